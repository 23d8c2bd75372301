"""`check_kernel` and friends must not pass a wrong kernel: planted errors that positive inputs,
zero-filled outputs, float comparison of integers, inflated tolerances or serial test sizes hid."""
import math

import numpy as np
import pytest

import polyc as pc
from polyc.testing import check_grad, check_kernel, check_proven, fuzz_schedules
from polyc.schedule.state import LoopKind


def test_integer_results_compare_exactly_whatever_the_tolerance():
    k = pc.kernel("B[i] = A[i] * 2", A=pc.i64["N"])
    a = np.array([2 ** 59, 3, -7], np.int64)
    off_by_one = lambda A, **_: A * 2 + np.array([1, 0, 0])      # noqa: E731
    with pytest.raises(AssertionError, match="1 of 3 elements differ"):
        check_kernel(k, inputs={"A": a}, reference=off_by_one)
    with pytest.raises(AssertionError):
        check_kernel(k, inputs={"A": a}, reference=off_by_one, rtol=1e-3)


def test_given_inputs_get_the_tolerance_of_the_kernels_own_reductions():
    # a pointwise kernel on cuda-emu (which may reassociate) has no reduction: no n * eps widening
    k = pc.kernel("B[i, j] = A[i, j] * 2.0", name="scale2")
    a = np.random.default_rng(0).uniform(0.5, 1.5, (200, 200)).astype(np.float32)
    with pytest.raises(AssertionError):
        check_kernel(k, inputs={"A": a}, reference=lambda A, **_: A * np.float32(2.0) * np.float32(1.004),
                     target="cuda-emu")


@pytest.mark.parametrize("src, wrong", [
    ("B[i, j] = max(A[i, j], 0.0)", lambda A, **_: A.copy()),                          # relu as identity
    ("B[i, j] = abs(A[i, j]) - 1.0", lambda A, **_: A - 1.0),                            # abs as identity
    ("m[i] max=! A[i, j]", lambda A, **_: np.maximum(A.max(axis=1), 0.0)),              # a row max from 0
    ("m[j] max=! A[i, j]", lambda A, **_: np.maximum(A.max(axis=0), 0.0)),              # a column max from 0
    ("B[i, j] = A[i, j] % 0.75", lambda A, **_: np.fmod(A, 0.75)),                      # C's fmod for %
])
def test_inputs_of_both_signs_catch_what_positive_ones_hide(src, wrong):
    k = pc.kernel(src, A=pc.f64["I", "J"])
    check_kernel(k)
    with pytest.raises(AssertionError):
        check_kernel(k, reference=wrong)


def test_an_output_the_compiled_code_never_initialises_shows():
    rowsum = pc.kernel("C[i] +=! A[i, j]", name="rowsum")
    no_init = pc.compile(pc.kernel("C[i] += A[i, j]", name="rowsum_noinit"))   # forgets C = 0
    with pytest.raises(AssertionError, match="C"):
        check_kernel(rowsum, compiled=no_init)


def test_check_proven_and_compile_prove_every_mark():
    @pc.kernel
    def seidel(A: pc.f64["N", "N"], T: int):
        for t in range(T):
            for i in range(1, N - 1):          # noqa: F821
                for j in range(1, N - 1):      # noqa: F821
                    A[i, j] = (A[i - 1, j] + A[i, j - 1] + A[i, j] + A[i, j + 1] + A[i + 1, j]) / 5.0
    s = seidel.schedule()
    for loop, kind, reduction in (("i", LoopKind.PARALLEL, False), ("i", LoopKind.PARALLEL, True),
                                  ("j", LoopKind.VECTORIZED, True), ("t", LoopKind.GPU_BLOCK, False),
                                  ("i", LoopKind.GPU_THREAD, False)):
        planted = s.with_mark(loop, kind, "planted", reduction=reduction)   # unproven, as with_mark says
        with pytest.raises(pc.IllegalScheduleError, match=f"loop '{loop}' carries"):
            check_proven(seidel, planted)
        with pytest.raises(pc.IllegalScheduleError, match=f"loop '{loop}' carries"):
            pc.compile(seidel, planted, target="cuda-emu" if kind in (LoopKind.GPU_BLOCK, LoopKind.GPU_THREAD)
                       else "c")


def test_a_kernel_with_a_floor_size_gets_consistent_default_sizes():
    k = pc.kernel("O[h] max=! I[2 * h + k] where k in 0:2", name="pool1d")
    check_kernel(k)
    summary = fuzz_schedules(k, n=4, seed=0)
    assert summary.mismatches == 0


def test_loop_kernel_math_follows_c_in_the_reference():
    @pc.kernel
    def roots(A: pc.f64["N"], B: pc.f64["N"]):
        for i in range(N):        # noqa: F821
            B[i] = math.sqrt(A[i]) + math.log(A[i] + 2.0) + math.exp(A[i] * 1000.0)
    a = np.array([4.0, -1.0, 0.0, -3.0])
    got = roots.reference(A=a.copy(), B=np.zeros(4))
    assert np.isnan(got[1]) and np.isnan(got[3]) and np.isinf(got[0])
    check_kernel(roots, inputs={"A": a, "B": np.zeros(4)})
    check_kernel(roots)


def test_programs_are_checked_through_their_combined_kernel():
    from kernels.nn import softmax

    @pc.program
    def prog(X: pc.f64["S", "D"]):
        return softmax.kernel(X=X)

    check_kernel(prog)
    check_kernel(prog, "auto")
    assert fuzz_schedules(prog, n=2, seed=0).mismatches == 0


def test_check_grad_of_an_intermediate_follows_the_intermediate():
    rng = np.random.default_rng(0)
    k1 = pc.kernel("T[i] = X[i] * X[i]\nY[i] = T[i] + X[i]", name="k1")
    check_grad(k1, of="T", wrt="X", X=rng.random(5))
    k2 = pc.kernel("T[i] = X[i] * X[i]\nY[i] = T[i] + X[i]\nZ[i] = T[i] * 2.0", name="k2", outputs=["Y", "Z"])
    check_grad(k2, of="T", wrt="X", X=rng.random(5))


def test_a_reference_may_return_a_scalar_or_a_list():
    k = pc.kernel("s +=! A[i]", name="total")
    check_kernel(k, reference=lambda A, **_: float(A.sum()))
    k2 = pc.kernel("B[i] = A[i] * 2.0", name="twice_list")
    check_kernel(k2, reference=lambda A, **_: list(A * 2.0))


def test_a_cuda_kernels_source_shows_before_any_call():
    f = pc.compile(pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_src"), target="cuda-emu")
    assert "__global__" in f.source and "ArgumentError" not in f._repr_html_()


def test_check_grad_with_no_direction_checks_nothing_so_is_refused():
    k = pc.kernel("Y[i] = X[i] * X[i]", name="sq")
    with pytest.raises(pc.GradError, match="directions must be a positive int"):
        check_grad(k, of="Y", wrt="X", X=np.ones(3), directions=0)


def test_a_result_equal_to_the_fill_value_is_no_false_alarm():
    # uint8 brightness: 8 * 20 + 5 = 165, the uint8 fill value (0xA5)
    k = pc.kernel("O[i] = I[i] * 20 + 5", I=pc.u8["N"])
    check_kernel(k, inputs={"I": np.array([8, 1, 2], np.uint8), "O": np.full(3, 165, np.uint8)})
    got = check_kernel(k, sizes={"N": 40})          # generated inputs: the allocating run compares too
    assert (got["O"] == 165).any()


def test_check_grad_judges_a_float32_result_by_float32_tolerances():
    k = pc.kernel("Y[i] = float(X[i]) * 2.0", name="to_f32")     # TC's float: 32-bit
    check_grad(k, of="Y", wrt="X", X=np.random.default_rng(0).standard_normal(6))


def test_check_grad_judges_a_kernel_that_rounds_to_float32_inside_by_float32():
    x = np.random.default_rng(0).standard_normal((6, 5))
    check_grad(pc.kernel("Y[i, j] = float32(X[i, j]) * exp(X[i, j])", name="f32_inside"), "Y", "X", dict(X=x))


def test_check_grad_refuses_integer_arrays_it_would_differentiate():
    """`A=np.arange(3)` passed with both values 0: the seed and the steps truncated to int64."""
    k = pc.kernel("Y[i] = A[i] * X[i]")
    with pytest.raises(pc.GradError, match="A is an array of int64"):
        check_grad(k, of="Y", wrt=["A"], A=np.arange(3), X=np.ones(3))


def test_check_grad_passes_the_sizes_only_the_forward_call_binds():
    """The gradient of `Y[i] +=! X[i + j, j]` reads no X, so `X_dim0` and `J` come from the call."""
    k = pc.kernel("Y[i] +=! X[i + j, j]")
    r = check_grad(k, of="Y", wrt="X", X=np.random.default_rng(0).standard_normal((5, 3)))
    assert len(r.analytic) == 3


def test_grad_refuses_a_wrt_that_is_no_name_with_its_own_error():
    with pytest.raises(pc.GradError, match="wrt must be a tensor name"):
        pc.grad(pc.kernel("Y[i] = X[i] * X[i]"), of="Y", wrt=3)


def test_a_loop_recurrence_refusal_names_the_way_out():
    @pc.kernel
    def row_max(X: pc.f64["N", "M"], Y: pc.f64["N"]):
        for i in range(N):
            m = X[i, 0]
            for j in range(M):
                m = max(m, X[i, j])
            Y[i] = m
    with pytest.raises(pc.GradError, match="checkpoint='store'"):
        pc.grad(row_max, of="Y", wrt="X")
    check_grad(row_max, of="Y", wrt="X", checkpoint="store", X=np.random.default_rng(1).standard_normal((3, 4)))


@pc.kernel
def _max_from_zero(X: pc.f64["N"], m: pc.f64[1]):
    m[0] = 0.0
    for i in range(N):
        m[0] = max(m[0], X[i])


def test_a_full_max_started_from_zero_shows_on_all_negative_inputs():
    """Inputs of both signs leave a 1-D maximum positive, so a maximum started from 0 instead of
    -inf passed; kernels with max/min also run on inputs of one sign."""
    def true_max(X, m):
        m[0] = X.max()
        return {"m": m}
    with pytest.raises(AssertionError, match="m \\(float64\\)"):
        check_kernel(_max_from_zero, reference=true_max)
    check_kernel(pc.kernel("m max=! X[i]", name="full_max"))


def test_check_grad_checks_each_wrt_tensor_on_its_own(monkeypatch):
    """A large gradient must not hide a wrong small one: `X * W` with X ~ 1e4, W ~ 1e-4, and a
    gradient kernel whose X_grad is zero (the gradient of `stop_gradient(X) * W`)."""
    fwd = pc.kernel("Y[i] = X[i] * W[i]", name="product")
    wrong = pc.kernel("Y[i] = stop_gradient(X[i]) * W[i]", name="product")
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(50) * 1e4, rng.standard_normal(50) * 1e-4
    check_grad(fwd, of="Y", wrt=["X", "W"], X=x, W=w)
    real = pc.grad
    monkeypatch.setattr(pc, "grad", lambda k, of, wrt, **kw: real(wrong, of=of, wrt=wrt, **kw))
    with pytest.raises(AssertionError, match="gradient of Y with respect to X:"):
        check_grad(fwd, of="Y", wrt=["X", "W"], X=x, W=w)


def test_check_grad_of_a_program_returning_a_tuple():
    from kernels.linalg import matmul
    from kernels.nn import softmax
    rowsum = pc.kernel("r[i] +=! X[i, j]", name="rowsum")

    @pc.program
    def two_results(x: pc.f64["M", "N"], w: pc.f64["N", "N"]):
        h = matmul.kernel(A=x, B=w)
        return softmax.kernel(X=h), rowsum(X=h)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((4, 4))
    for of in ("out0", "out1"):
        result = check_grad(two_results, of=of, wrt=["x", "w"], x=x, w=w)
        assert len(result.analytic) == 3 * 2       # per direction, per wrt tensor
