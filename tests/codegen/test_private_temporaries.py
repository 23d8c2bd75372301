"""Intermediates private to the threads of a parallel loop (`schedule.storage.private_temporaries`).

An operator program's fused loop keeps its intermediates contracted to one row (`program.contraction`):
every iteration reuses the row, so the loop carries anti and output dependences on it, but no value
crosses iterations.  Such a loop may run in parallel when each thread keeps its own copy of the
row: `check_mark` proves it, the C generator gives each thread the copy (on its stack), and the
attention head's fused row loop runs on every core instead of one."""
import numpy as np
import pytest

import polyc as pc

def _fused_kernel(prog):
    return next(f for g, f in prog.compiled_groups() if g.contracted and f.schedule.dims)


def test_a_loop_reusing_a_contracted_row_runs_in_parallel_with_private_copies():
    from kernels.nn import softmax
    from kernels.program_ops import scale

    @pc.program
    def scaled_softmax(X: pc.f64["M", "N"]):
        return softmax.kernel(X=scale.kernel(X=X, alpha=0.5))
    X = np.random.default_rng(0).standard_normal((4000, 64))
    want = np.exp(0.5 * X - (0.5 * X).max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    for _ in range(3):                                # shared rows would mix the threads' values
        np.testing.assert_allclose(scaled_softmax(X=X), want, rtol=1e-12)
    f = _fused_kernel(scaled_softmax)
    assert any("parallel" in d.labels() for d in f.schedule.dims if d.name)
    assert "pc_private_" in f.source and "omp for" in f.source


def test_a_value_crossing_iterations_is_never_privatised():
    """`acc` carries a value from one row to the next: the loop stays refused."""
    def running(X: pc.f64["M", "N"], Y: pc.f64["M", "N"], acc: pc.f64["N"]):
        for i in range(M):
            for j in range(N):
                acc[j] += X[i, j]
                Y[i, j] = acc[j]
    k = pc.kernel(running)
    with pytest.raises(pc.IllegalScheduleError):
        k.schedule().parallel("i")


def test_the_attention_programs_fused_row_loop_is_parallel():
    from kernels import programs as P
    prog = P.attention(contract=True)      # products fused row by row, their rows contracted
    args = P.inputs(prog, dict(S=96, D=16))
    got = prog(**args)
    fused = [f for g, f in prog.compiled_groups() if "relayout_matmul5_C" in {t for t, _, _ in g.contracted}]
    assert fused and any("parallel" in d.labels() for d in fused[0].schedule.dims if d.name)
    assert "pc_private_" in fused[0].source
    assert fused[0].schedule.storage.private      # the contracted rows, one copy per thread
    np.testing.assert_allclose(got, prog.reference(**args), rtol=1e-4, atol=1e-5)


def test_the_schedule_states_its_storage_decisions():
    """`Schedule.storage`: one typed value with the row buffers, per-thread copies and reductions
    across threads that the C generator then emits."""
    from kernels import by_name
    f = pc.compile(by_name("softmax").kernel, "auto")
    plan = f.schedule.storage
    assert [t for t, _, _ in plan.row_buffers] == ["e"] and "e: a row per iteration" in str(plan)
    k = pc.kernel("g[j] +=! A[i, j]", name="colsum")
    s = k.schedule().interchange("j", "i").parallel("i", reduction=True)
    assert s.storage.reductions == (("i", ("g",)),)
    assert pc.kernel("y[i] = 2.0 * x[i]").schedule().storage.private == ()
