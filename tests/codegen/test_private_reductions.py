"""Reductions across a parallel loop: per-thread private copies combined at the end, or atomic
updates, and never a reduction accumulator written back by two threads at once.

`parallel("i", reduction=True)` on a loop whose iterations update the same elements (a fused pair
of full reductions, column sums, a layernorm gradient's `gamma_grad[j]`) is legal: the emitted code
gives each thread a copy of those tensors (`schedule.storage.private_copies`) or, where a copy is
not exact (float max) or too large, updates them atomically.  Before, an inner vector accumulator
of such a tensor was written back without synchronisation, and threads lost each other's sums."""
import numpy as np
import pytest

import polyc as pc

FUSED_SUMS = """
s +=! A[i, j]
t +=! A[i, j] * A[i, j]
"""


def test_two_full_reductions_fused_under_a_parallel_loop_are_exact():
    k = pc.kernel(FUSED_SUMS, name="two_sums")
    s = k.schedule().fuse("S1", "S3", loop="j").parallel("i", reduction=True).vectorize("j", reduction=True)
    f = pc.compile(k, s)
    assert "pc_private_" in f.source and "omp critical" in f.source
    A = np.ones((4000, 64), np.float32)       # partial sums of ones are exact: any lost update shows
    for _ in range(5):
        got = f(A=A)
        assert got["s"] == 256000 and got["t"] == 256000


def test_a_float_max_across_threads_stays_atomic_and_exact():
    k = pc.kernel("m max=! A[i, j]\nt +=! A[i, j] * A[i, j]", name="max_and_sum")
    s = k.schedule().fuse("S1", "S3", loop="j").parallel("i", reduction=True).vectorize("j", reduction=True)
    f = pc.compile(k, s)
    assert "pc_private_" not in f.source
    A = np.ones((4000, 64), np.float32)
    A[1234, 5] = 7.0
    for _ in range(3):
        got = f(A=A)
        assert got["m"] == 7.0 and got["t"] == 256048


@pytest.mark.parametrize("J", [64, 20000])   # 20000 floats are over the private-copy limit: serial
def test_column_sums_under_a_parallel_row_loop(J):
    k = pc.kernel("g[j] +=! A[i, j]", name="colsum")
    f = pc.compile(k, k.schedule().interchange("j", "i").parallel("i", reduction=True))
    assert "pc_private_" in f.source
    A = np.ones((3000, J), np.float32)
    np.testing.assert_array_equal(f(A=A), np.full(J, 3000, np.float32))


def center(X: pc.f64["M", "N"], mean: pc.f64["M"], Y: pc.f64["M", "N"], colsum: pc.f64["N"]):
    for i in range(N):
        colsum[i] = 0.0
    for i in range(M):
        mean[i] = 0.0
        for j in range(N):
            mean[i] += X[i, j] / N
        for j in range(N):
            Y[i, j] = X[i, j] - mean[i]
            colsum[j] += Y[i, j]


def test_a_per_row_value_read_in_the_loop_is_not_copied():
    """`mean[i]` is updated and read inside one iteration; only `colsum[j]` is shared."""
    k = pc.kernel(center)
    f = pc.compile(k, k.schedule().parallel("i", reduction=True))
    assert "pc_private_t_colsum" in f.source and "pc_private_t_mean" not in f.source
    rng = np.random.default_rng(0)
    X = rng.integers(-4, 5, (2000, 48)).astype(np.float64)
    mean, Y, colsum = np.zeros(2000), np.zeros((2000, 48)), np.zeros(48)
    f(X=X, mean=mean, Y=Y, colsum=colsum)
    want = X - X.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(Y, want, atol=1e-12)
    np.testing.assert_allclose(colsum, want.sum(axis=0), atol=1e-9)
