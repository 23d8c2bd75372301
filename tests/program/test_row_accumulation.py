"""Row blocks that add into outputs: operators summing over the rows (a gradient's `dV += P^T dO`)
run per block on the outputs in place, so what they read by rows shrinks to one block too."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import programs as P
from kernels.nn import softmax
from polyc.program.blocking import row_accumulation

column_sum = pc.kernel("C[j] +=! X[i, j]", name="column_sum")
column_max = pc.kernel("C[j] max=! X[i, j]", name="column_max")


@pytest.mark.parametrize("text, accepted", [
    ("C[k] +=! A[i, k]", True),
    ("C[k] max=! A[i, k]", True),
    ("C[k] *=! A[i, k] + A[i, 0]", True),
    ("C[k] +=! A[i, k] * B[j, k]", True),           # i, the rows, is the outer reduction loop
    ("C[k] +=! B[j, k] * A[i, k]", False),          # j first: each C[k] would add j-major, not i-major
    ("C[k] +=! A[i, k] / I", False),                # the row count as a value changes per block
    ("C[k] +=! A[i, k] * i", False),                # so does the row index
    ("C[k, i] +=! A[i, k]", False),                 # writes rows: row-wise, not an accumulation
])
def test_row_accumulation_accepts_only_what_blocks_in_order_compute_exactly(text, accepted):
    k = pc.kernel(text, A=pc.tensor["I", "K"], B=pc.tensor["J", "K"])
    found = row_accumulation(k, "I")
    assert (found is not None) == accepted
    if found is not None:
        form, starts, updates = found
        assert "A" in form.tensors and len(starts) == 1 and len(updates) == 1


def _attention_backward(**options):
    return P.attention(**options).grad(of="out", wrt=["Q", "K", "V"])


def _backward_inputs(S, D=16, seed=0):
    a = P.inputs(P.attention(), dict(S=S, D=D), seed=seed)
    a["out_grad"] = np.random.default_rng(seed + 1).standard_normal((S, D)).astype(np.float32)
    return a


def test_attention_backward_runs_in_row_blocks_summing_the_key_and_value_gradients(threads):
    prog = _attention_backward()
    b = prog.blocks
    assert b is not None and len(b.accumulated) == 2
    grads = dict(prog.outputs)
    assert set(b.accumulated) == {grads["K_grad"], grads["V_grad"]}
    assert {n.name for n in b.before} >= {f"{n.name}_start" for n in prog.nodes if n.outputs[0] in b.accumulated}
    # the scores, probabilities and their gradients flow by rows
    assert {"softmax2_Y", "scale_grad7_X_grad"} <= set(b.intermediates)


def test_blocked_attention_backward_equals_the_whole_program(threads):
    blocked, whole = _attention_backward(blocks=64), _attention_backward(blocks=False)
    a = _backward_inputs(200)                         # 64 + 64 + 64 + 8 rows
    got, want = blocked(**a), whole(**a)
    loop = blocked._last.loop
    assert loop is not None and loop.rows == 64 and loop.in_c and loop.threads == int(threads)
    if loop.threads == 1:       # every element adds its rows in source order: bit for bit
        assert not loop.combine and "reduced over the blocks in order" in blocked.explain()
        for name in ("Q_grad", "K_grad", "V_grad"):
            np.testing.assert_array_equal(got[name], want[name])
    else:                       # each thread's run of rows into a copy, added at the end (unordered sums)
        assert {t for t, _ in loop.combine} == set(blocked.blocks.accumulated)
        assert "into a copy of" in blocked.explain()
        np.testing.assert_array_equal(got["Q_grad"], want["Q_grad"])
        for name in ("K_grad", "V_grad"):
            np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=1e-6)
    again = blocked(**a)                              # the outputs and copies start again at every call
    np.testing.assert_array_equal(again["K_grad"], got["K_grad"])
    ref = P.attention().grad(of="out", wrt=["Q", "K", "V"]).reference(**a)
    np.testing.assert_allclose(got["V_grad"], ref["V_grad"], rtol=1e-4, atol=1e-5)


def test_blocked_attention_backward_shrinks_its_intermediates(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    prog = _attention_backward()
    zeros = {k: np.zeros((1024, 64), np.float32) for k in ("Q", "K", "V", "out_grad")}
    plan = prog.plan(**zeros)
    assert plan.loop is not None and plan.loop.blocks.accumulated
    whole = _attention_backward(blocks=False).plan(**zeros)
    assert whole.memory.planned_peak > 12 * 2**20          # S x S scores, probabilities and gradients
    assert plan.memory.planned_peak * 3 < whole.memory.planned_peak
    monkeypatch.setenv("OMP_NUM_THREADS", "2")              # block buffers and sums per thread
    two = _attention_backward().plan(**zeros)
    assert two.loop.threads == 2 and two.loop.combine
    assert two.memory.planned_peak * 2.5 < whole.memory.planned_peak


def test_accumulation_beside_a_vendor_call_runs_blocks_from_python():
    blocked, whole = _attention_backward(blocks=64, vendor=True), _attention_backward(blocks=False, vendor=True)
    a = _backward_inputs(150)
    got, want = blocked(**a), whole(**a)
    assert not blocked._last.loop.in_c
    for name in ("Q_grad", "K_grad", "V_grad"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduce, combine", [(column_sum, np.sum), (column_max, np.max)])
def test_a_program_returning_only_column_reductions_runs_over_the_input_rows(reduce, combine):
    @pc.program(blocks=16)
    def probabilities_per_column(X: pc.f32["N", "M"]):
        return reduce(X=softmax.kernel(X=X))
    b = probabilities_per_column.blocks
    assert b is not None and b.extent == pc.ir.Affine.var("N") and b.accumulated
    x = np.random.default_rng(3).standard_normal((45, 7)).astype(np.float32)
    x[5, 2] = np.nan                                  # NaN survives max=! in blocks as in one run
    got = probabilities_per_column(X=x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = combine(e / e.sum(axis=1, keepdims=True), axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    plain = pc.program(probabilities_per_column.function, blocks=False)
    np.testing.assert_array_equal(got, plain(X=x))


def test_an_accumulation_another_operator_reads_runs_whole():
    from kernels.program_ops import bias_add

    @pc.program(blocks=16)
    def shifted(X: pc.f32["N", "M"]):
        p = softmax.kernel(X=X)
        return bias_add.kernel(X=p, b=column_sum(X=p))   # every row needs every row's sum
    b = shifted.blocks
    assert b is None or not b.accumulated
    x = np.random.default_rng(4).standard_normal((40, 6)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(shifted(X=x), p + p.sum(axis=0), rtol=1e-5, atol=1e-6)


def test_sums_split_by_thread_only_where_every_one_is_unordered():
    from polyc.program.blocking import _combinable
    assert _combinable({"dV": {"+"}, "m": {"max"}}) == (("dV", "+"), ("m", "max"))
    assert _combinable({"dV": {"+"}, "L": {"in order"}}) == ()      # a loop kernel's sum: in order
    assert _combinable({"dV": {"+", "max"}}) == ()


def test_column_maxima_split_by_thread_keep_nan_and_integer_extremes(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    imax = pc.kernel("C[j] max=! X[i, j]", name="imax", X=pc.i32["N", "M"], C=pc.i32["M"])
    twice = pc.kernel("Y[i, j] = X[i, j] * 2", name="twice", X=pc.i32["N", "M"], Y=pc.i32["N", "M"])

    @pc.program(blocks=16)
    def column_max(X: pc.i32["N", "M"]):
        return imax(X=twice(X=X))
    x = np.full((70, 3), -2**30, np.int32)            # every value below the float-free identity 0
    x[65, 1] = -5
    got = column_max(X=x)
    assert column_max._last.loop.combine == ((column_max.blocks.accumulated[0], "max"),)
    np.testing.assert_array_equal(got, (x * 2).max(axis=0))


_exp = pc.kernel("Y[i, j] = exp(X[i, j])", name="elementwise_exp")


def _over_exp(reduce, blocks, **scalars):
    @pc.program(blocks=blocks)
    def p(X: pc.f64["N", "M"]):
        return reduce(X=_exp(X=X), **scalars)
    return p


def test_two_updates_of_one_output_are_not_interleaved_block_by_block(threads):
    """`C max= X` then `C += X` over all rows is not (max, +) per block: such a kernel runs whole."""
    both = pc.kernel("C[j] = 0.0\nC[j] max= X[i, j]\nC[j] += X[i, j]", name="max_then_sum")
    prog = _over_exp(both, 16)
    assert prog.blocks is None or not prog.blocks.accumulated
    x = np.random.default_rng(0).uniform(-1, 1, (40, 3))
    np.testing.assert_allclose(prog(X=x), np.exp(x).max(axis=0) + np.exp(x).sum(axis=0), rtol=1e-12)


def test_a_start_value_may_be_a_scalar(threads):
    started = pc.kernel("C[j] = alpha\nC[j] += X[i, j]", name="from_alpha", alpha=pc.f64)
    prog = _over_exp(started, 16, alpha=2.5)
    assert prog.blocks is not None and prog.blocks.accumulated
    x = np.random.default_rng(1).uniform(-1, 1, (40, 3))
    np.testing.assert_allclose(prog(X=x), 2.5 + np.exp(x).sum(axis=0), rtol=1e-12)


def test_an_output_read_by_a_blocked_sum_costs_no_thread_buffer(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")

    @pc.program(blocks=16)
    def values_and_sums(X: pc.f64["N", "M"]):
        y = _exp(X=X)
        return y, column_sum(X=y)
    x = np.random.default_rng(2).uniform(-1, 1, (40, 5))
    y, s = values_and_sums(X=x)
    np.testing.assert_allclose(s, np.exp(x).sum(axis=0), rtol=1e-12)
    assert values_and_sums.memory.planned_peak == 5 * 8          # thread 1's copy of the sums
    assert "intermediates:" in values_and_sums.explain()         # a zero unfused peak divided by zero


def test_auto_takes_no_blocks_where_they_would_hold_more_than_unfused(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    prog = _attention_backward()
    plan = prog.plan(**{k: np.zeros((70, 16), np.float32) for k in ("Q", "K", "V", "out_grad")})
    assert plan.loop is None and plan.memory.planned_peak <= plan.memory.unfused_peak * 1.1
