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


def test_rounds_restore_only_what_the_kernel_writes():
    """gesummv writes tmp and y: a round restores those and leaves A, B and x where the last call
    read them (a copy of every input before every call would time where the copy left the data)."""
    from benchmarks._harness import written_arrays
    from benchmarks.polybench import fresh_inputs_contender

    lk = polybench_kernels()["gesummv"]
    assert written_arrays(lk.kernel) == {"tmp", "y"}
    inputs = lk.make_inputs(lk.sizes["MINI"], "f64")
    seen = {}

    def run(**arrays):
        seen.update(arrays)
        for name in ("A", "tmp", "y"):
            arrays[name][...] = -1.0

    contender = fresh_inputs_contender(run, inputs, lk.kernel)
    contender["run"]()
    contender["prepare"]()
    np.testing.assert_array_equal(seen["tmp"], inputs["tmp"])
    np.testing.assert_array_equal(seen["y"], inputs["y"])
    assert (seen["A"] == -1.0).all()  # not restored: gesummv never writes it


def test_the_demo_restores_only_what_the_kernel_writes():
    from benchmarks._harness import refilled
    from kernels.program_ops import add

    inputs = {"A": np.ones((2, 3), np.float32), "B": np.ones((2, 3), np.float32), "Y": np.zeros((2, 3), np.float32)}
    work, prepare = refilled(inputs, add.kernel)
    for a in work.values():
        a[...] = 7.0
    prepare()
    assert (work["Y"] == 0).all() and (work["A"] == 7).all() and (work["B"] == 7).all()
