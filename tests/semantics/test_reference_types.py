"""`kernel.reference` (the Einstein interpreter) computes every operation in the type the
generated code computes it in (README "Types"), not in numpy's promotion: it is the oracle that
`check_kernel` compares compiled code with, so any difference would flag correct code."""
import numpy as np
import pytest

import polyc as pc


def _both(kernel, **arrays):
    return pc.compile(kernel)(**arrays), kernel.reference(**arrays)


def test_float32_plus_int32_scalar_is_float32_before_the_integer_store():
    # numpy: float32 array + int32 scalar is float64 (1e9 + 1 exact); a kernel computes float32
    k = pc.kernel("B[i] = A[i] + s", A=pc.f32["N"], s=pc.i32, B=pc.i64["N"])
    a = np.array([1e9, 16777216.0], np.float32)
    got, ref = _both(k, A=a, s=np.int32(1))
    want = (a + np.float32(1)).astype(np.int64)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ref, want)


def test_literal_takes_the_operand_type_not_the_store_type():
    # 256 is an int32 next to A; only the result is converted to uint8
    k = pc.kernel("B[i] = A[i] // 256", A=pc.i32["N"], B=pc.u8["N"])
    a = np.array([65280, 511, -1], np.int32)
    got, ref = _both(k, A=a)
    want = (a // 256).astype(np.uint8)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ref, want)


def test_mixed_int_and_float_arrays_in_max_and_select():
    k = pc.kernel("C[i] = max(A[i], B[i]) + select(A[i] > 0.0, B[i], A[i])",
                  A=pc.f32["N"], B=pc.i32["N"], C=pc.i64["N"])
    a = np.array([16777216.0, -3.5, 2.0], np.float32)
    b = np.array([16777217, 7, -1], np.int32)
    got, ref = _both(k, A=a, B=b)
    bf = b.astype(np.float32)
    want = (np.maximum(a, bf) + np.where(a > 0, bf, a)).astype(np.int64)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ref, want)


@pytest.mark.parametrize("fn", ["exp", "sqrt"])
def test_math_of_uint8_is_float64(fn):
    # numpy's exp(uint8) is float16; the kernel's is float64 (README "Types")
    k = pc.kernel(f"B[i] = {fn}(A[i])", A=pc.u8["N"], B=pc.f64["N"])
    a = np.array([0, 3, 200], np.uint8)
    got, ref = _both(k, A=a)
    want = getattr(np, fn)(a.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-15)
    np.testing.assert_allclose(ref, want, rtol=1e-15)


def test_literal_beyond_the_operand_type_is_still_refused():
    k = pc.kernel("B[i] = A[i] + 4294967297", A=pc.i32["N"])
    with pytest.raises(pc.LiteralRangeError):
        k.reference(A=np.zeros(3, np.int32))


@pytest.mark.parametrize("src", ["O[i] = A[i] + 256", "O[i] = select(A[i] > 0, A[i], 300)", "O[i] = A[i] * -1"])
def test_a_literal_beyond_uint8_is_refused_by_the_compiler_and_the_reference(src):
    # numpy (NEP 50) raises OverflowError for uint8 + 256; polyc refuses it at its position
    k = pc.kernel(src, A=pc.u8["N"])
    a = np.array([1, 2, 200], np.uint8)
    with pytest.raises(pc.LiteralRangeError, match="does not fit in uint8"):
        pc.compile(k)(A=a)
    with pytest.raises(pc.LiteralRangeError, match="does not fit in uint8"):
        k.reference(A=a)


@pytest.mark.parametrize("src, want", [
    ("O[i] = select(A[i] < 300, 1, 0)", lambda a: np.ones(3)),        # numpy compares exactly
    ("O[i] = select(A[i] == -1, 1, 0)", lambda a: np.zeros(3)),
    ("O[i] = A[i] + (256 - 1)", lambda a: a + np.uint8(255)),         # one literal, as Python computes it
])
def test_uint8_comparisons_and_literal_arithmetic_follow_numpy(src, want):
    k = pc.kernel(src, A=pc.u8["N"])
    a = np.array([1, 2, 200], np.uint8)
    np.testing.assert_array_equal(pc.compile(k)(A=a), want(a))
    np.testing.assert_array_equal(k.reference(A=a), want(a))


def test_literal_arithmetic_beyond_uint8_is_refused_as_numpy_refuses_it():
    for src in ("O[i] = A[i] + 2 ** 8", "O[i] = A[i] + 16 * 16"):
        with pytest.raises(pc.LiteralRangeError, match="256 does not fit in uint8"):
            pc.compile(pc.kernel(src, A=pc.u8["N"]))(A=np.ones(3, np.uint8))


@pytest.mark.parametrize("src, want, dtype", [
    ("B[i] = !A[i] + 1.0", [1.0, 1.0, 1.0], np.float64),
    ("B[i] = (A[i] > 0) * 2.0", [0.0, 2.0, 2.0], np.float64),
    ("B[i] = 3 - (A[i] > 0)", [3, 2, 2], np.int64),
    ("B[i] = (A[i] > 0) / 2", [0.0, 0.5, 0.5], np.float64),
])
def test_a_condition_with_literals_counts_as_0_or_1(src, want, dtype):
    # numpy: True + 1.0 is 2.0, 3 - True is 2 (an int64)
    k = pc.kernel(src, A=pc.f64["N"])
    a = np.array([-1.0, 0.5, 2.0])
    for got in (pc.compile(k)(A=a), pc.compile(k, target="cuda-emu")(A=a), k.reference(A=a)):
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("schedule", [None, "auto"])
def test_an_integer_reduction_of_float_terms_converts_after_every_step_under_every_schedule(schedule):
    """`C_i32 +=! A_f32`: each step adds in float32 and converts back (README "Types"), which is
    not associative: "auto" keeps it out of its vector accumulators (it held an int32 and added
    floats to it, converting once: INT_MIN where numpy gives 852516352)."""
    k = pc.kernel("C[i] +=! A[i, k]", C=pc.i32["I"], A=pc.f32["I", "K"])
    a = np.full((3, 2), 3e9, np.float32)
    want = np.zeros(3, np.int32)
    with np.errstate(all="ignore"):
        for kk in range(2):
            want = (want.astype(np.float32) + a[:, kk]).astype(np.int32)
    assert want[0] == 852516352
    np.testing.assert_array_equal(pc.compile(k, schedule)(A=a), want)


def test_integer_accumulators_wrap_as_numpy_does():
    k = pc.kernel("C[i] +=! A[i, k]", C=pc.i32["I"], A=pc.i32["I", "K"])
    a = np.random.default_rng(0).integers(-2**31, 2**31 - 1, size=(5, 300), dtype=np.int32)
    f = pc.compile(k, "auto")
    assert "pc_acc = (int32_t)((uint32_t)(pc_acc) + " in f.source
    np.testing.assert_array_equal(f(A=a), a.sum(axis=1, dtype=np.int32))
