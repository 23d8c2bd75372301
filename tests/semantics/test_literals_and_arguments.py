"""Integer literals that do not fit their type, and call-time numbers beyond int64/float64, are
typed errors (`LiteralRangeError` naming the literal and its position, `ArgumentError`) instead of
silently wrapping or crashing with OverflowError/ValueError."""
# ruff: noqa: F821
# flake8: noqa: F821
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.errors import ArgumentError, LiteralRangeError, ParseError

HUGE = 10 ** 5000          # past Python's int-to-str digit limit: str(HUGE) raises ValueError
BEYOND_INT64 = 10 ** 30    # fits float64, not int64


@pytest.mark.parametrize("text, dtype, literal", [
    ("B[i] = A[i] + 99999999999999999999999", pc.i64, "99999999999999999999999"),
    ("B[i] = A[i] + 4294967297", pc.i32, "4294967297"),
    ("B[i] = A[i] * 2 - 2147483649", pc.i32, "2147483649"),
])
def test_einsum_integer_literal_that_does_not_fit_is_refused_with_its_position(text, dtype, literal):
    k = pc.kernel(text, A=dtype["N"])
    a = np.arange(4, dtype=dtype.numpy)
    for run in (lambda: pc.compile(k)(A=a), lambda: k.reference(A=a)):
        with pytest.raises(LiteralRangeError) as err:
            run()
        e = err.value
        assert isinstance(e, ParseError) and literal in str(e) and dtype.numpy_name in str(e)
        assert e.line == 1 and e.column == text.index(literal) + 1


def test_literals_at_the_edges_of_their_type_are_accepted():
    k = pc.kernel("B[i] = A[i] + 2147483647 - 2147483647\nC[i] = max(A[i], -2147483648)", A=pc.i32["N"])
    a = np.array([-(2 ** 31), -1, 0, 2 ** 31 - 1], dtype=np.int32)
    out = pc.compile(k)(A=a)
    np.testing.assert_array_equal(out["B"], a)
    np.testing.assert_array_equal(out["C"], a)


def test_big_integer_literal_in_a_float_expression_is_fine():
    k = pc.kernel("B[i] = A[i] + 99999999999999999999999")
    a = np.zeros(3)
    np.testing.assert_array_equal(pc.compile(k)(A=a), a + 99999999999999999999999.0)


def beyond_int64_in_int_kernel(A: pc.i64["N"], B: pc.i64["N"]):
    for i in range(N):
        B[i] = A[i] + BEYOND_INT64


def huge_global(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range(N):
        B[i] = A[i] * HUGE


def test_loop_kernel_literal_beyond_int64_refused_at_compile_time():
    k = pc.kernel(beyond_int64_in_int_kernel)
    with pytest.raises(LiteralRangeError, match="does not fit in int64") as err:
        pc.compile(k)(A=np.zeros(3, dtype=np.int64))
    assert err.value.line is not None


def test_loop_kernel_5000_digit_literal_is_a_parse_error_not_value_error():
    with pytest.raises(LiteralRangeError, match="fits no type") as err:
        pc.kernel(huge_global)
    assert err.value.line == huge_global.__code__.co_firstlineno + 2


def test_float_literal_overflowing_to_inf_is_inf_as_in_python():
    # documented: `1e400` is `inf` in Python's own literal syntax, so the kernel computes with inf
    k = pc.kernel("B[i] = A[i] + 1e400")
    a = np.ones(3)
    np.testing.assert_array_equal(pc.compile(k)(A=a), np.full(3, np.inf))


def test_scalar_beyond_float64_is_an_argument_error():
    k = pc.kernel("B[i] = alpha * A[i]")
    with pytest.raises(ArgumentError, match="alpha .* does not fit in float64"):
        pc.compile(k)(A=np.ones(3), alpha=10 ** 400)
    with pytest.raises(ArgumentError, match="does not fit in"):
        pc.compile(k)(A=np.ones(3), alpha=HUGE)


def steps(A: pc.f64["N"], T: int):
    for t in range(T):
        for i in range(N):
            A[i] = A[i] + 1.0


@pytest.mark.parametrize("value", [2 ** 63, 2 ** 70, HUGE], ids=["2**63", "2**70", "10**5000"])
def test_size_beyond_int64_is_an_argument_error(value):
    k = pc.kernel(steps)
    with pytest.raises(ArgumentError, match="does not fit in int64"):
        pc.compile(k)(A=np.ones(3), T=value)
    with pytest.raises(ArgumentError, match="does not fit in int64"):
        k.reference(A=np.ones(3), T=value)


def test_integer_literal_beyond_float32_is_refused_in_both_oracles():
    k = pc.kernel("B[i] = A[i] + 1000000000000000000000000000000000000000")
    a = np.ones(3, dtype=np.float32)
    for run in (lambda: pc.compile(k)(A=a), lambda: k.reference(A=a)):
        with pytest.raises(LiteralRangeError, match="float32"):
            run()


def test_einsum_5000_digit_literal_is_a_parse_error():
    with pytest.raises(ParseError, match="5000 digits") as err:
        pc.kernel("B[i] = A[i] + " + "9" * 5000)
    assert err.value.column == 15


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_float_literal_in_an_integer_update_or_call_compiles_like_the_reference(target):
    # A weak float literal is never an integer: `T += 0.5` adds in float, then converts (as numpy's
    # out=/casting="unsafe" and C's `+=`); `max(0.25, A)` with an int A compiles too.
    k = pc.kernel("T[i] = B[i]\nT[i] += 0.5\nC[i] = T[i]", B=pc.i64["M"])
    b = np.array([1, -2, 3])
    want = b.astype(np.float64) + 0.5
    np.testing.assert_array_equal(pc.compile(k, target=target)(B=b), want.astype(np.int64))
    np.testing.assert_array_equal(k.reference(B=b), want.astype(np.int64))
    k2 = pc.kernel("C[i] = max(0.25, A[i])", A=pc.i32["M"])
    a = np.array([0, 1, -3], dtype=np.int32)
    np.testing.assert_array_equal(pc.compile(k2, target=target)(A=a), k2.reference(A=a))


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_float_literal_in_select_or_max_with_integers_is_a_float(target):
    """`select(c, A_int, 0.5)` is numpy's `np.where(c, A_int, 0.5)`: float64.  It was typed as the
    integer, so the reference truncated 0.5 to 0 while the C computed it in double (the fuzzer's
    seed 23 case 612: an int64 reduction that differed by 1)."""
    k = pc.kernel("S[i] +=! select(i != j, A[i, j], 0.5) + A[i, j]\nM[i] = max(A[i, 0], 0.5)",
                  name="lit_select", A=pc.i64["N", "N"], outputs=["S", "M"])
    a = np.array([[-3, 1, 2], [4, -5, 6], [-7, 8, -9]], dtype=np.int64)
    want_s = (np.where(~np.eye(3, dtype=bool), a, 0.5) + a).sum(axis=1)
    ref = k.reference(A=a)
    got = pc.compile(k, target=target)(A=a)
    for out in (ref, got):
        assert out["S"].dtype == np.float64 and out["M"].dtype == np.float64
        np.testing.assert_array_equal(out["S"], want_s)
        np.testing.assert_array_equal(out["M"], np.maximum(a[:, 0], 0.5))


def test_reading_the_source_before_a_call_does_not_change_what_the_call_computes():
    """`f.source` before any call types undeclared arrays as float32 and their literals with them,
    as a float32 call does: `1.0 / N` is a float32 division either way.  (The source shown first
    had typed the literal float64, under the same variant key, and a float32 call then reused that
    code: a float64 division rounded once, 0.83333331 against float32's 0.83333343 for N = 3.)"""
    text = "B[i, j] = A[i, j] * 0.5 + 1.0 / N"
    a = np.ones((2, 3), np.float32)
    expected = a * np.float32(0.5) + np.float32(1.0) / np.float32(3)
    looked = pc.compile(pc.kernel(text, name="source_first", A=pc.tensor["M", "N"]))
    assert "1.0 /" not in looked.source and "1.0f /" in looked.source
    for f in (looked, pc.compile(pc.kernel(text, name="call_first", A=pc.tensor["M", "N"]))):
        got = f(A=a)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, expected)
