"""`benchmarks.polybench.compare`: the benchmark's correctness check in each kernel's own type."""
import numpy as np

from benchmarks.polybench import compare, polybench_kernels


def test_integer_kernels_compare_exactly():
    lk = polybench_kernels()["floyd-warshall"]  # int32, tolerance (0, 0)
    a = np.array([[1, 2], [3, 999]], dtype=np.int32)
    assert compare(lk, a, a.copy()) == 0.0
    off = a.copy()
    off[1, 1] += 1
    assert compare(lk, off, a) == float("inf")


def test_float_kernels_compare_within_their_tolerance():
    lk = polybench_kernels()["gemm"]
    rtol, atol = lk.tol("f64")
    e = np.array([1.0, 2.0])
    assert compare(lk, e + 0.5 * (atol + rtol * e), e) <= 1.0
    assert compare(lk, e + 2.0 * (atol + rtol * e), e) > 1.0
