"""Gaps real kernels hit: exact integer pow, inputs declared only to bind a size, float literals
combined with integer index values."""
import numpy as np
import pytest

import polyc as pc
from polyc.runtime.interpreter import interpret

from .loops_helpers import check_loops
from .tc_helpers import check_all


def _check_exact(k, args, expected):
    """Interpreter and every compiled variant give exactly `expected` (values and dtype)."""
    got = interpret(k, {n: v.copy() if isinstance(v, np.ndarray) else v for n, v in args.items()})
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    check_all(k, args, expected, rtol=0)
    for schedule, target in ((None, "c"), ("auto", "c"), (None, "cuda-emu")):
        assert pc.compile(k, schedule, target=target)(**args).dtype == expected.dtype


# -- integer pow ------------------------------------------------------------------------------
def test_int_pow_is_exact_beyond_double_precision():
    a = np.array([2_000_001, -1_999_999, 3, 0], np.int64)
    k = pc.kernel("b[i] = pow(a[i], 3)")
    expected = np.array([int(x) ** 3 for x in a], np.int64)   # past 2**53: a double round trip rounds
    _check_exact(k, dict(a=a), expected)
    for target in ("c", "cuda"):
        src = pc.codegen(k, target=target, dtypes=dict(a=pc.i64))
        assert "= pc_ipow_i64(t_a[" in src or "= pc_ipow_i64(" in src, src[-400:]


def test_int_pow_wraps_like_numpy():
    a = np.array([1_000_003, 7, -5], np.int64)
    k = pc.kernel("b[i] = pow(a[i], 5)")
    _check_exact(k, dict(a=a), np.power(a, 5))


def test_int32_pow_stays_int32():
    a = np.arange(-4, 5, dtype=np.int32)
    k = pc.kernel("b[i] = pow(a[i], 2) + 1")
    _check_exact(k, dict(a=a), (a ** 2 + 1).astype(np.int32))


def test_index_pow_and_float_pow():
    k = pc.kernel("b[i] = pow(i, 2) where i in 0:N")
    _check_exact(k, dict(N=6), np.arange(6, dtype=np.int64) ** 2)
    x = np.linspace(0.5, 2, 5).astype(np.float32)
    f = pc.kernel("y[i] = pow(x[i], 2)")
    for schedule in (None, "auto"):
        got = pc.compile(f, schedule)(x=x)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, x ** 2, rtol=1e-6)


def test_int_pow_with_a_float_literal_exponent_is_float():
    a = np.arange(5, dtype=np.int64)
    x = np.ones(5, np.float32)
    k = pc.kernel("b[i] = x[i] * pow(a[i], 0.5)")
    got = pc.compile(k)(a=a, x=x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.sqrt(a), rtol=1e-6)


def test_negative_constant_exponent_is_refused_like_numpy():
    k = pc.kernel("b[i] = pow(a[i], -1)")
    with pytest.raises(pc.PolycError, match="negative exponent"):
        pc.compile(k)(a=np.arange(1, 4, dtype=np.int64))


def test_run_time_negative_exponent_truncates():
    a = np.array([2, 1, -1, -1, 0, 3], np.int64)
    e = np.array([-1, -3, -3, -2, 2, 2], np.int64)
    k = pc.kernel("b[i] = pow(a[i], e[i])")
    _check_exact(k, dict(a=a, e=e), np.array([0, 1, -1, 1, 0, 9], np.int64))


@pc.kernel
def cubes(A: pc.i64["N"], B: pc.i64["N"]):
    for i in range(N):
        B[i] = A[i] ** 3 + i ** 2


def test_loop_kernel_int_pow():
    a = np.array([2_000_001, -3, 5], np.int64)
    check_loops(cubes, dict(A=a, B=np.zeros(3, np.int64)),
                dict(B=np.array([int(x) ** 3 + i * i for i, x in enumerate(a)], np.int64)), rtol=0)


# -- inputs declared only to bind a size -----------------------------------------------------------
def test_input_declared_only_to_bind_a_size():
    k = pc.kernel("min_idx min=! select(MinIdx[r_d] < N, r_d, N)", S=pc.f32["N"], MinIdx=pc.i32["D"])
    s = k.program.tensor("S")
    assert s.role == "input" and s.declared
    idx = np.array([6, 6, 2, 6], np.int32)
    check_all(k, dict(S=np.zeros(6, np.float32), MinIdx=idx), np.int64(2), rtol=0)
    check_all(k, dict(S=np.zeros(1, np.float32), MinIdx=idx), np.int64(1), rtol=0)   # N = 1 from S


def test_size_binding_input_shape_is_checked():
    k = pc.kernel("O[i] = A[i] + N", S=pc.f64["N"], A=pc.f64["M"])
    got = pc.compile(k)(S=np.zeros(3), A=np.ones(4))
    np.testing.assert_array_equal(got, np.full(4, 4.0))
    with pytest.raises(pc.ArgumentError):
        pc.compile(k)(S=np.zeros((3, 2)), A=np.ones(4))
    with pytest.raises(pc.ArgumentError):
        pc.compile(k)(A=np.ones(4))


def test_declared_input_with_no_used_size_is_refused():
    with pytest.raises(pc.ParseError, match=r"'S' is declared but the kernel never uses it \(nor any size"):
        pc.kernel("O[i] = A[i]", S=pc.f64["N"], A=pc.f64["M"])
    with pytest.raises(pc.ParseError, match="'alpha' is declared but the kernel never uses it"):
        pc.kernel("O[i] = A[i]", alpha=pc.f64)


# -- float literals next to integer index values ---------------------------------------------------
def test_float_literal_on_an_index_keeps_a_float32_kernel_float32():
    k = pc.kernel("g[x] = f[x] * (((x % 2) * 2 + 1) / 4.0) + (x + 0.5)")
    f = np.linspace(-1, 1, 7).astype(np.float32)
    x = np.arange(7)
    expected = (f * (((x % 2) * 2 + 1) / np.float32(4.0)).astype(np.float32)
                + (x + np.float32(0.5)).astype(np.float32)).astype(np.float32)
    got = interpret(k, dict(f=f))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    check_all(k, dict(f=f), expected)
    for schedule, target in ((None, "c"), ("auto", "c"), (None, "cuda-emu")):
        assert pc.compile(k, schedule, target=target)(f=f).dtype == np.float32
    assert "4.0f" in pc.codegen(k, dtypes=dict(f=pc.f32))


def test_float_literal_on_an_index_in_a_float64_kernel_is_float64():
    k = pc.kernel("g[x] = f[x] * ((x % 3) / 3.0)")
    f = np.linspace(-1, 1, 7)
    x = np.arange(7)
    expected = f * ((x % 3) / 3.0)
    got = pc.compile(k)(f=f)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, expected)


def test_float_literal_in_an_integer_kernel_is_float64_as_numpy():
    a = np.arange(5, dtype=np.int64)
    k = pc.kernel("g[i] = a[i] + i / 3.0")
    got = pc.compile(k)(a=a)
    assert got.dtype == np.float64 and interpret(k, dict(a=a)).dtype == np.float64
    np.testing.assert_array_equal(got, a + np.arange(5) / 3.0)


def test_index_compared_with_a_float_literal():
    k = pc.kernel("g[i] = select(i < 2.5, f[i], 0.0)")
    f = np.arange(1, 6, dtype=np.float32)
    check_all(k, dict(f=f), np.where(np.arange(5) < 2.5, f, 0).astype(np.float32))


@pc.kernel
def lerp(f: pc.f32["N"], g: pc.f32["N"]):
    for x in range(N):
        g[x] = f[x] * (((x % 2) * 2 + 1) / 4.0)


def test_loop_kernel_float_literal_on_an_index():
    f = np.linspace(-1, 1, 6).astype(np.float32)
    x = np.arange(6)
    check_loops(lerp, dict(f=f, g=np.zeros(6, np.float32)),
                dict(g=(f * (((x % 2) * 2 + 1) / 4.0)).astype(np.float32)), rtol=1e-6)
