"""Loop kernels called and written like the Python functions they are: positional arguments in
the function's order, `A.shape[k]` and `len(A)` as sizes; and the messages of calls that miss."""
from __future__ import annotations

import math

import numpy as np
import pytest

import polyc as pc
from polyc.errors import ArgumentError, ParseError


@pc.kernel
def scale(A: pc.f64["N"], B: pc.f64["N"], T: int):
    for t in range(T):
        for i in range(N):
            B[i] = B[i] + A[i] * 2.0


@pc.kernel
def by_shape(A: pc.f64["N", "M"], B: pc.f64["N"]):
    for i in range(A.shape[0]):
        for j in range(1, len(B) - 1 + A.shape[-1] - N):
            B[i] += A[i, j] * A.shape[1]


def test_a_loop_kernel_takes_positional_arguments_in_its_functions_order():
    a = np.arange(3.0)
    for call in (scale, scale.reference, pc.compile(scale), pc.compile(scale, target="cuda-emu")):
        b = np.ones(3)
        call(a, b, 2)
        np.testing.assert_array_equal(b, 1.0 + 4.0 * a)
        b = np.ones(3)
        call(a, B=b, T=1)
        np.testing.assert_array_equal(b, 1.0 + 2.0 * a)
    with pytest.raises(ArgumentError, match="scale got B both by position and by name"):
        scale(a, np.ones(3), B=np.ones(3), T=1)
    with pytest.raises(ArgumentError, match=r"scale takes 3 arguments \(A, B, T\) but 4 were given"):
        scale(a, np.ones(3), 1, 2)


def test_an_einstein_kernel_spells_the_call_out_instead():
    k = pc.kernel("Y[i] = X[i] * alpha + s", name="axpb", s=pc.i64)
    for call in (k, k.reference, pc.compile(k)):
        with pytest.raises(ArgumentError, match=r"axpb takes its arrays by name, not by position \(1 positional "
                                                r"given\): call it as f\(X=\.\.\., alpha=\.\.\., s=\.\.\.\)"):
            call(np.ones(2))


def test_shape_and_len_of_an_array_parameter_are_its_sizes():
    a, b = np.arange(12.0).reshape(3, 4), np.zeros(3)
    want = by_shape.reference(A=a, B=b.copy())
    np.testing.assert_array_equal(want, [(1 + 2) * 4.0, (5 + 6) * 4.0, (9 + 10) * 4.0])
    for schedule in (None, "auto"):
        np.testing.assert_array_equal(pc.compile(by_shape, schedule)(A=a, B=b.copy()), want)
    with pytest.raises(ParseError, match=r"`A.shape\[1\]`: A has 1 dimension\(s\)"):
        @pc.kernel
        def beyond(A: pc.f64["N"], B: pc.f64["N"]):
            for i in range(A.shape[1]):
                B[i] = A[i]


def test_messages_of_calls_that_miss():
    mm = pc.compile(pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm"))
    with pytest.raises(ArgumentError, match=r"unknown argument 'Bb' for kernel 'mm' \(did you mean B\?\)"):
        mm(A=np.ones((2, 2)), Bb=np.ones((2, 2)))
    fixed = pc.compile(pc.kernel("b[i] = a[i % 3]", a=pc.f64[3], b=pc.f64["N"]))
    with pytest.raises(ArgumentError, match=r"^a.shape\[0\] is 4 but the kernel declares it 3 \(a has shape \(4,\)\)$"):
        fixed(a=np.ones(4), b=np.zeros(2))
    with pytest.raises(ArgumentError, match=r"np.asarray\(A, dtype=np.float64\)"):
        pc.compile(scale)(A=[1.0, 2.0], B=np.ones(2), T=1)


@pc.kernel
def _loopy_blocks(a: pc.f64["L"], b: pc.f64["L"], n: int, m: int):
    for i in range(n):
        for j in range(m):
            b[(i // 256) * 256 + j] = a[(i // 256) * 256 + j] * 2.0


def test_a_call_time_requirement_spells_its_floors_as_written():
    with pytest.raises(ArgumentError) as e:
        _loopy_blocks(a=np.ones(300), b=np.zeros(300), n=10, m=301)
    assert "floor((-L + m - 1) / 256)" in str(e.value) and "_floor" not in str(e.value)


@pc.kernel
def _row_max(X: pc.i64["N"], A: pc.i64["N", "M"]):
    for i in range(N):
        for j in range(M):
            X[i] = max(X[i], A[i, j])


@pc.kernel
def _row_min_float(X: pc.f64["N"], A: pc.f64["N", "M"]):
    for i in range(N):
        for j in range(M):
            X[i] = min(A[i, j], X[i])


def test_an_integer_max_of_itself_is_a_reduction_update():
    """`X[i] = max(X[i], e)` on integers is `X[i] max= e`: the reduction strategies accept it (they
    refused it while `+=` in the same place was accepted); floats keep Python's order at NaN."""
    assert _row_max.program.statements[0].update == "max"
    assert _row_min_float.program.statements[0].update is None
    a = np.random.default_rng(0).integers(-100, 100, (5, 37))
    for schedule in (None, "auto", _row_max.schedule().vectorize("j", reduction=True),
                     _row_max.schedule().parallel("j", reduction=True)):
        x = np.full(5, -1000)
        pc.compile(_row_max, schedule)(X=x, A=a)
        np.testing.assert_array_equal(x, a.max(axis=1))


@pc.kernel
def _row_min_numpy(X: pc.i32["N"], A: pc.i32["N", "M"]):
    for i in range(N):
        for j in range(M):
            X[i] = np.minimum(X[i], A[i, j])


def test_numpys_integer_minimum_of_itself_is_a_reduction_update_too():
    assert _row_min_numpy.program.statements[0].update == "min"
    a = np.random.default_rng(1).integers(-100, 100, (4, 29)).astype(np.int32)
    for schedule in (None, _row_min_numpy.schedule().parallel("j", reduction=True)):
        x = np.full(4, 1000, np.int32)
        pc.compile(_row_min_numpy, schedule)(X=x, A=a)
        np.testing.assert_array_equal(x, a.min(axis=1))


def _int_math_pow(a: pc.i32["n"], out: pc.f64["n"]):
    for i in range(n):  # noqa: F821
        out[i] = math.pow(a[i], 2)


def test_math_pow_is_a_float_power_of_integers_too():
    # Python's math.pow converts to float: 65536 ** 2 is 4294967296.0, not int32's wrapped 0
    k = pc.kernel(_int_math_pow)
    a = np.array([3, 65536, 2 ** 31 - 1], np.int32)
    want = np.array([math.pow(int(x), 2) for x in a])
    out = np.zeros(3)
    pc.compile(k)(a=a, out=out)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(k.reference(a=a, out=np.zeros(3)), want)


def _int_math_pow_arrays(a: pc.i32["n"], out: pc.f64["n"]):
    for i in range(n):  # noqa: F821
        out[i] = math.pow(a[i], a[i])


def test_math_pow_of_integer_arrays_is_a_float_power_in_the_reference_too():
    k = pc.kernel(_int_math_pow_arrays)
    a = np.array([1, 2, 40, -2], np.int32)
    want = np.array([math.pow(int(x), int(x)) for x in a])
    np.testing.assert_allclose(k.reference(a=a, out=np.zeros(4)), want, rtol=1e-15)
    out = np.zeros(4)
    pc.compile(k)(a=a, out=out)
    np.testing.assert_allclose(out, want, rtol=1e-15)
