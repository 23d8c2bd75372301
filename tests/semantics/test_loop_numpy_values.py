"""Loop kernels compute with the values their Python reference computes with: numpy's promotion of
numpy scalars (int32 with float32 is float64), Python floats for float literals next to indices,
numpy's square root for `** 0.5`, and a typed error where Python itself refuses a value."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import polyc as pc

VARIANTS = [dict(), dict(schedule="auto"), dict(target="cuda-emu")]


@pc.kernel
def mixed_max(A: pc.i32["N"], X: pc.f32["N"], B: pc.f64["N"]):
    for i in range(N):
        B[i] = max(A[i], X[i])


@pc.kernel
def mixed_product(A: pc.i64["N"], X: pc.f32["N"], B: pc.f64["N"]):
    for i in range(N):
        B[i] = A[i] * X[i]


@pc.kernel
def mixed_update(A: pc.i32["N"], X: pc.f32["N"]):
    for i in range(N):
        A[i] += X[i]


@pc.kernel
def index_times_literal(B: pc.f32["N"]):
    for i in range(N):
        B[i] = (i * 0.1) * 3.0


def _python(fn, **arrays):
    """The kernel's Python run on copies: what `kernel.reference` promises."""
    out = {k: v.copy() for k, v in arrays.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn.reference(**out)
    return out


@pytest.mark.parametrize("variant", VARIANTS, ids=["source", "auto", "cuda-emu"])
def test_int32_and_float32_combine_in_float64_as_numpy(variant):
    a = np.array([2147483647, 16777217, -5], np.int32)
    x = np.array([8.0, 16777216.0, -7.5], np.float32)
    b = np.zeros(3)
    pc.compile(mixed_max, **variant)(A=a, X=x, B=b)
    assert b.tolist() == [2147483647.0, 16777217.0, -5.0]      # float32 would give 2147483648, 16777216
    assert b.tolist() == _python(mixed_max, A=a, X=x, B=np.zeros(3))["B"].tolist()
    a64 = np.array([6, 16777217], np.int64)
    x2 = np.array([3e38, 9.0], np.float32)
    b = np.zeros(2)
    pc.compile(mixed_product, **variant)(A=a64, X=x2, B=b)
    assert b.tolist() == [float(np.int64(6) * np.float32(3e38)), 150994953.0]   # not inf, not 150994944
    u = np.array([16777217, 2 ** 31 - 100, 5], np.int32)
    want = _python(mixed_update, A=u, X=np.array([1.0, 50.0, 0.25], np.float32))["A"]
    pc.compile(mixed_update, **variant)(A=u, X=np.array([1.0, 50.0, 0.25], np.float32))
    assert u.tolist() == want.tolist() == [16777218, 2147483598, 5]


@pytest.mark.parametrize("variant", VARIANTS, ids=["source", "auto", "cuda-emu"])
def test_a_float_literal_next_to_an_index_is_a_python_float(variant):
    b = np.zeros(300, np.float32)
    pc.compile(index_times_literal, **variant)(B=b)
    np.testing.assert_array_equal(b, np.array([(i * 0.1) * 3.0 for i in range(300)], np.float32))


def test_einstein_kernels_keep_c_promotion():
    k = pc.kernel("B[i] = A[i] * X[i]", A=pc.i32["N"], X=pc.f32["N"])
    assert k(A=np.array([3], np.int32), X=np.array([0.5], np.float32)).dtype == np.float32


@pytest.mark.parametrize("dtype", [pc.f32, pc.f64])
@pytest.mark.parametrize("n", [1, 6, 17])
@pytest.mark.parametrize("variant", VARIANTS, ids=["source", "auto", "cuda-emu"])
def test_power_one_half_is_numpys_square_root(dtype, n, variant):
    k = pc.kernel("B[i] = pow(A[i], 0.5)", A=dtype["N"], name="pow_half")
    a = np.full(n, 4.0, dtype.numpy)
    a[0] = -np.inf
    if n > 1:
        a[1] = -0.0
    got = pc.compile(k, **variant)(A=a)
    with np.errstate(invalid="ignore"):
        want = np.power(a, dtype.numpy.type(0.5))
    np.testing.assert_array_equal(got, want)                  # nan at -inf
    assert np.array_equal(np.signbit(got[1:2]), np.signbit(want[1:2]))    # -0.0 at -0.0


def test_a_value_python_refuses_is_a_typed_error_of_the_reference():
    @pc.kernel
    def to_int(A: pc.f64["N"], B: pc.i64["N"]):
        for i in range(N):
            B[i] = int(A[i])

    a = np.array([1.5, np.nan])
    b = np.zeros(2, np.int64)
    pc.compile(to_int)(A=a, B=b)
    assert b.tolist() == [1, np.iinfo(np.int64).min]          # numpy's conversion on x86
    with pytest.raises(pc.ReferenceFailedError, match=r"test_loop_numpy_values.py:\d+: the Python reference "
                                                      r"of to_int stopped with ValueError"):
        to_int.reference(A=a, B=np.zeros(2, np.int64))


@pc.kernel
def scaled(A: pc.f32["N"], B: pc.f32["N"], alpha: float):
    for i in range(N):
        B[i] = A[i] * alpha + (alpha * 0.1) * i


@pc.kernel
def larger(A: pc.f32["N"], B: pc.f64["N"], alpha: float):
    for i in range(N):
        B[i] = max(A[i], alpha)      # Python's max returns an operand: alpha itself, unrounded


EXACT = ["-O3", "-march=native", "-ffp-contract=off"]     # no fused multiply-add: Python's roundings


@pytest.mark.parametrize("variant", [dict(flags=EXACT), dict(schedule="auto", flags=EXACT), dict(target="cuda-emu")],
                         ids=["source", "auto", "cuda-emu"])
def test_a_float_parameter_is_a_python_float(variant):
    """`np.float32(a) * alpha` is a float32 (NEP 50: alpha converted once); `alpha * 0.1` a float64."""
    a = np.random.default_rng(0).random(500, dtype=np.float32)
    for alpha in (0.1, 1 / 3, 2.718281828459045):
        got, want = np.zeros(500, np.float32), np.zeros(500, np.float32)
        pc.compile(scaled, **variant)(A=a, B=got, alpha=alpha)
        scaled.reference(A=a, B=want, alpha=alpha)
        np.testing.assert_array_equal(got, want)
    got, want = np.zeros(500), np.zeros(500)
    pc.compile(larger, **variant)(A=a, B=got, alpha=1 / 3)
    larger.reference(A=a, B=want, alpha=1 / 3)
    np.testing.assert_array_equal(got, want)


@pc.kernel
def numpy_functions(A: pc.f32["N"], B: pc.f32["N"], C: pc.f32["N"], alpha: float):
    for i in range(N):
        B[i] = np.maximum(A[i], alpha) + np.minimum(A[i], alpha * 0.5)
        C[i] = A[i] ** alpha


@pytest.mark.parametrize("variant", [dict(flags=EXACT), dict(schedule="auto", flags=EXACT), dict(target="cuda-emu")],
                         ids=["source", "auto", "cuda-emu"])
def test_numpy_functions_take_python_numbers_weakly(variant):
    """`np.maximum(np.float32(a), alpha)` and `np.float32(a) ** alpha` are float32 (NEP 50)."""
    a = np.random.default_rng(1).random(300, dtype=np.float32)
    got = {k: np.zeros(300, np.float32) for k in ("B", "C")}
    want = {k: np.zeros(300, np.float32) for k in ("B", "C")}
    pc.compile(numpy_functions, **variant)(A=a, alpha=0.4321, **got)
    numpy_functions.reference(A=a, alpha=0.4321, **want)
    np.testing.assert_array_equal(got["B"], want["B"])
    np.testing.assert_allclose(got["C"], want["C"], rtol=2e-7)     # powf and numpy's pow: within an ulp


@pc.kernel
def python_numbers_everywhere(A: pc.f32["N"], D: pc.f64["N"], B: pc.i32["N"], C: pc.u8["N"],
                              O1: pc.f64["N"], O2: pc.f64["N"], O3: pc.f64["N"], O4: pc.f64["N"],
                              O5: pc.f64["N"], O6: pc.f64["N"], O7: pc.u8["N"], O8: pc.f64["N"], alpha: float):
    for i in range(N):
        O1[i] = A[i] * i + N                            # Python ints beside float32: float32
        O2[i] = A[i] * float(alpha) + int(D[i])         # conversions make Python numbers
        O3[i] = A[i] + abs(alpha) + max(alpha, 0.2)     # so do Python's abs and max of them
        O4[i] = A[i] + (alpha if i > 2 else 0.5)        # and a choice between two of them
        O5[i] = B[i] ** alpha                           # an integer to a float power: a float
        O6[i] = A[i] if i > 2 else 0.1                  # Python's choice: the operand itself
        O7[i] = -C[i]                                   # uint8 negation wraps
        O8[i] = max(A[i], 0.1)


@pytest.mark.parametrize("variant", [dict(flags=EXACT), dict(schedule="auto", flags=EXACT), dict(target="cuda-emu")],
                         ids=["source", "auto", "cuda-emu"])
def test_python_numbers_in_every_position(variant):
    rng = np.random.default_rng(3)
    n = 40
    inputs = dict(A=(rng.random(n, dtype=np.float32) - 0.5) * 7, D=rng.random(n) * 9, alpha=-2.7,
                  B=rng.integers(1, 9, n).astype(np.int32), C=rng.integers(0, 255, n).astype(np.uint8))
    names = [f"O{k}" for k in range(1, 9)]
    got = {k: np.zeros(n, np.uint8 if k == "O7" else np.float64) for k in names}
    want = {k: v.copy() for k, v in got.items()}
    pc.compile(python_numbers_everywhere, **variant)(**inputs, **got)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        python_numbers_everywhere.reference(**inputs, **want)
    for k in names:
        if k == "O5":       # pow: libm and numpy within an ulp
            np.testing.assert_allclose(got[k], want[k], rtol=1e-15, err_msg=k)
        else:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_check_grad_seeds_the_output_in_its_own_dtype():
    k = pc.kernel("Y[i] = X[i] * float64(W[i])", X=pc.f64["N"], W=pc.f32["N"])
    rng = np.random.default_rng(0)
    from polyc.testing import check_grad
    check_grad(k, of="Y", wrt=["W"], X=rng.random(6), W=rng.random(6).astype(np.float32))
