"""Row blocks (`polyc.program.blocking`): operators that work row by row run block of rows by block,
with intermediates sized for one block; what is row-wise, which operators run in the blocks, and
that blocked programs compute what unblocked ones do (remainder blocks, threads, buffers kept)."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import programs as P
from kernels.linalg import matmul
from kernels.nn import softmax
from kernels.program_ops import matmul_nt
from polyc.program.blocking import block_rows, row_blocks, row_form
from polyc.program.memory import Step, plan_buffers


def test_row_form_names_the_rows_of_row_wise_kernels():
    f = row_form(softmax.kernel.program)
    assert f is not None and f.size == "I" and {"X", "Y", "m", "e", "s"} <= f.tensors
    mm = row_form(matmul.kernel.program)
    assert mm is not None and "A" in mm.tensors and "C" in mm.tensors and "B" not in mm.tensors
    nt = row_form(matmul_nt.kernel.program)
    assert nt is not None and "B" not in nt.tensors       # B[j, k]: its rows are another size


@pytest.mark.parametrize("text", [
    "Y[i, j] = X[j, i]",                         # rows read as columns
    "Y[i, j] = X[i, j] / I",                     # the row count as a value
    "Y[i] = X[i + 1]",                           # a neighbouring row
    "s[j] +=! X[i, j]",                          # a sum over rows
    "Y[i, j] = X[i, j] + X[i, i]",               # the row index in another subscript
    "Y[i, j] = X[i, j] * i",                     # the row index as a value
])
def test_row_form_refuses_what_a_block_of_rows_would_change(text):
    k = pc.kernel(text, X=pc.tensor["I", "I"]) if "i + 1" not in text else pc.kernel(text, X=pc.tensor["I + 1"])
    assert row_form(k.program) is None


def test_attention_runs_its_products_and_softmax_per_block_and_the_transpose_once():
    prog = P.attention()
    b = prog.blocks
    assert b is not None
    assert [n.kernel.name for n in b.before] == ["relayout_transpose"]
    assert [n.kernel.name for n in b.blocked] == ["relayout_matmul", "scale", "softmax", "matmul"]
    assert [whole for _, whole in b.sliced] == ["Q"]                # K and V are read whole
    assert set(b.intermediates) >= {"softmax2_Y"}


def test_blocked_attention_matches_the_unblocked_program_with_a_remainder_block(threads):
    blocked, plain = P.attention(blocks=64), P.attention(blocks=False)
    a = P.inputs(blocked, dict(S=200, D=16))          # 64 + 64 + 64 + 8 rows
    got = blocked(**a)
    np.testing.assert_allclose(got, plain(**a), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(got, blocked.reference(**a), rtol=1e-5, atol=1e-6)
    loop = blocked._last.loop
    assert loop is not None and loop.rows == 64 and loop.threads == int(threads)
    assert "in blocks of 64" in blocked.explain()
    assert blocked.memory.planned_peak < plain.memory.planned_peak
    assert blocked.memory.unfused_peak == plain.memory.unfused_peak
    got2 = blocked(**a)                                # buffers reused: the same again
    np.testing.assert_array_equal(got2, got)


def test_second_thread_gets_a_buffer_set_of_its_own_in_the_memory_plan(monkeypatch):
    a = P.inputs(P.attention(), dict(S=256, D=16))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = P.attention(blocks=64)
    one(**a)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    two = P.attention(blocks=64)
    two(**a)
    extra = two.memory.planned_peak - one.memory.planned_peak
    per_block = sum(64 * 256 * 4 for t in two._last.loop.buffers)
    assert two._last.loop.buffers and extra == per_block


def test_auto_blocks_of_a_packed_m_block_shrink_the_attention_intermediates_4x(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    prog = P.attention()
    plan = prog.plan(**{k: np.zeros(s, np.float32) for k, s in (("Q", (1024, 64)), ("K", (1024, 64)),
                                                                  ("V", (1024, 64)))})
    assert plan.loop is not None and plan.loop.threads == 1
    from polyc.schedule.packing import default_blocking
    assert plan.loop.rows == block_rows(1024, default_blocking(4)[3], 1)
    if plan.loop.rows <= 256:                      # this machine's packed m block (256 rows here)
        assert plan.memory.ratio >= 4.0


def test_block_rows_rule():
    assert block_rows(1024, 256, 1) == 256
    assert block_rows(1024, 256, 2) == 128         # two blocks live at once: half a block each
    assert block_rows(200, 256, 2) == 100          # every thread a block
    assert block_rows(100, 256, 4) == 64           # not below 64
    assert block_rows(40, 256, 1) == 40


def test_no_blocks_where_an_intermediate_is_read_whole_or_nothing_shrinks():
    @pc.program
    def gram(X: pc.f32["N", "N"]):
        t = softmax.kernel(X=X)
        return matmul.kernel(A=t, B=t)                # B reads t whole: its producer runs first
    assert gram.blocks is None                      # ...and nothing is left to shrink

    @pc.program
    def one(X: pc.f32["N", "M"]):
        return softmax.kernel(X=X)
    assert one.blocks is None


def test_rows_read_whole_by_one_operator_and_by_rows_by_another_come_from_one_input():
    @pc.program
    def self_attention(X: pc.f32["S", "D"]):
        s = matmul_nt.kernel(A=X, B=X)
        return matmul.kernel(A=softmax.kernel(X=s), B=X)
    assert self_attention.blocks is not None
    x = np.random.default_rng(0).standard_normal((150, 8)).astype(np.float32)
    blocked = pc.program(self_attention.function, blocks=64)
    np.testing.assert_allclose(blocked(X=x), self_attention.reference(X=x), rtol=1e-5, atol=1e-6)


def test_layernorm_residual_gelu_in_blocks():
    prog, plain = P.ln_residual_gelu(blocks=16), P.ln_residual_gelu(blocks=False)
    a = P.inputs(prog, dict(M=50, N=32))
    np.testing.assert_allclose(prog(**a), plain(**a), rtol=1e-6, atol=1e-6)


def test_blocks_option_is_checked_and_off_on_gpu_targets():
    for bad in ("yes", 0, -3, 2.5):
        with pytest.raises(pc.PolycError, match="blocks must be"):
            P.attention(blocks=bad)
    assert P.attention(target="cuda-emu").blocks is None
    assert P.attention(contract=True).blocks is None


def test_tensors_read_again_in_every_block_keep_their_buffer():
    steps = [Step("before", ("kt",), (), 0), Step("b1", ("c",), ("kt",), 0), Step("b2", ("p",), ("c",), 0),
             Step("b3", ("out",), ("p",), 0)]
    sizes = {"kt": 100, "c": 100, "p": 100, "out": 100}
    plain = plan_buffers(steps, sizes, ["out"], steps)
    assert plain.slot_of["p"] == plain.slot_of["kt"]           # kt is dead after b1 ...
    kept = plan_buffers(steps, sizes, ["out"], steps, keep=["kt"])
    assert kept.slot_of["p"] != kept.slot_of["kt"]             # ... unless every block reads it


def test_row_blocks_needs_outputs():
    assert row_blocks((), {}, [], ()) is None


def _plan(prog, **shapes):
    return prog.plan(**{k: np.zeros(s, np.float32) for k, s in shapes.items()})


def test_auto_leaves_out_blocks_that_would_not_pay(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # One fused group: no intermediate between units, nothing to shrink.
    ln = _plan(P.ln_residual_gelu(), x=(1024, 64), r=(1024, 64), g=(64,), b=(64,))
    assert ln.loop is None
    # An MLP: each block would read (and pack) both weight matrices again, more bytes than the
    # block's intermediates; with blocks=N it still runs in blocks, and correctly.
    shapes = dict(x=(512, 512), w1=(512, 1024), b1=(1024,), w2=(1024, 512))
    assert _plan(P.mlp(), **shapes).loop is None
    forced = P.mlp(blocks=128)
    assert _plan(forced, **shapes).loop is not None
    a = P.inputs(forced, dict(B=300, D=16, H=40))
    np.testing.assert_allclose(forced(**a), P.mlp(blocks=False)(**a), rtol=1e-5, atol=1e-6)
    # Two threads: blocks with a vendor call among them would run from Python threads (measured
    # slower than whole operators with their own threads); in one C loop they run.
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    shapes = dict(Q=(1024, 64), K=(1024, 64), V=(1024, 64))
    assert _plan(P.attention(vendor=True), **shapes).loop is None
    assert _plan(P.attention(), **shapes).loop is not None


def test_openmp_team_sets_the_calling_threads_team_and_restores_it():
    from polyc.runtime.loader import _openmp_runtime, openmp_team
    pc.compile(pc.kernel("Y[i] = X[i] * 2.0"))(X=np.ones(3))      # the runtime is loaded by then
    rt = _openmp_runtime()
    if rt is None:
        pytest.skip("no libgomp in this process")
    before = rt.omp_get_max_threads()
    with openmp_team(1):
        assert rt.omp_get_max_threads() == 1
    assert rt.omp_get_max_threads() == before
