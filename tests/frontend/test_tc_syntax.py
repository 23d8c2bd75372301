"""Item 8: statements spanning lines, `//` in expressions, unsigned 8/16-bit element types; TC's C-style
operators (`c ? a : b`, `&&`, `||`, `!`), casts (`int32(x)`, `float(x)`) and fabs / rsqrt."""
import re

import numpy as np
import pytest

import polyc as pc
from polyc.errors import ParseError

from .tc_helpers import check_all

rng = np.random.default_rng(8)


def test_continuation_lines_starting_with_operator_or_where():
    k = pc.kernel("""
        C[i, j] +=! A[i, k]
            * B[k, j]
            where k in 0:K
        D[i, j] = C[i, j] +
            1.0
    """, A=pc.f64["I", "K"])
    assert len(k.program.statements) == 3
    assert k.program.statements[1].text == "C[i, j] +=! A[i, k] * B[k, j] where k in 0:K"
    a, b = rng.random((3, 4)), rng.random((4, 5))
    check_all(k, dict(A=a, B=b), a @ b + 1.0)


def test_semicolon_still_separates_and_new_line_starts_a_statement():
    k = pc.kernel("B[i] = A[i] * 2.0; C[i] = B[i] + 1.0\nD[i] = C[i] - 1.0")
    assert len(k.program.statements) == 3


def test_floor_division_of_values():
    k = pc.kernel("B[i] = A[i] // 2.0")
    a = rng.random(6) * 10 - 5
    check_all(k, dict(A=a), a // 2.0)


@pytest.mark.parametrize("dtype", [pc.u8, pc.u16])
def test_unsigned_image_types(dtype):
    k = pc.kernel("O[x, y] max=! I[x, y + k] where k in 0:3", I=dtype["W", "H"])
    img = rng.integers(0, 250, (5, 6)).astype(dtype.numpy)
    expected = np.stack([img[:, 0:4], img[:, 1:5], img[:, 2:6]]).max(0)
    check_all(k, dict(I=img), expected)
    got = k(I=img)
    assert got.dtype == dtype.numpy


def test_unsigned_scalar_range_is_checked():
    k = pc.kernel("O[x] = I[x] + s", I=pc.u8["W"], s=pc.u8)
    with pytest.raises(pc.ArgumentError, match="does not fit"):
        k(I=np.zeros(3, np.uint8), s=300)


def test_tc_parentheses_are_refused_with_the_bracket_spelling():
    """TC writes `O(n, o) +=! I(n, i) * W(o, i)`; polyc's subscripts are square brackets, and the
    error says so at the parenthesis, on the statement's line."""
    with pytest.raises(pc.ParseError, match=r"square brackets: O\[\.\.\.\], where Tensor Comprehensions writes O\(") as e:
        pc.kernel("""
            X[i] = A[i] * 2.0
            O(n, o) +=! I(n, i) * W(o, i)
        """)
    assert ":3:14:" in str(e.value)


def test_power_operator_is_pow_with_pythons_precedence():
    a = np.array([1.5, -2.0, 3.0])
    cases = {"O[i] = A[i] ** 2": a ** 2, "O[i] = -A[i] ** 2": -a ** 2, "O[i] = 2.0 ** A[i] ** 2": 2.0 ** a ** 2,
             "O[i] = A[i] ** -1": a ** -1.0, "O[i] = A[i] ** 2 * 3": a ** 2 * 3}
    for source, expected in cases.items():
        k = pc.kernel(source)
        np.testing.assert_allclose(k(A=a), expected, rtol=1e-15, err_msg=source)
        np.testing.assert_allclose(k.reference(A=a), expected, rtol=1e-15, err_msg=source)
    assert pc.kernel("O[i] = A[i] ** 3")(A=np.array([2, -3], np.int64)).tolist() == [8, -27]


def test_true_and_false_are_literals_not_scalar_parameters():
    a = np.array([0.2, 0.7])
    for source, expected in {"O[i] = select(True, A[i], 0.0)": [0.2, 0.7],
                             "O[i] = select(False or A[i] > 0.5, 1.0, 0.0)": [0.0, 1.0]}.items():
        k = pc.kernel(source)
        assert not k.program.scalars, source
        assert k(A=a).tolist() == k.reference(A=a).tolist() == expected


@pytest.mark.parametrize("src, want", [
    ("B[i] = A[i] > 0 ? A[i] : -A[i]", lambda a: np.abs(a)),
    ("B[i] = A[i] > 1 ? 1.0 : A[i] < -1 ? -1.0 : A[i]", lambda a: np.clip(a, -1, 1)),      # from the right
    ("B[i] = A[i] > 0 ? A[i] > 2 ? 2.0 : 1.0 : 0.0", lambda a: np.where(a > 0, np.where(a > 2, 2.0, 1.0), 0.0)),
    ("B[i] = (A[i] > 0 && A[i] < 2) || !(A[i] > -2) ? 1.0 : 0.0",
     lambda a: np.where(((a > 0) & (a < 2)) | ~(a > -2), 1.0, 0.0)),
    ("B[i] = 1.0 + (A[i] > 0 ? A[i] : 0.0) * 2.0", lambda a: 1 + np.maximum(a, 0) * 2),
    ("B[i] = fabs(A[i]) + rsqrt(A[i] * A[i] + 1.0) + float(i)",
     lambda a: np.abs(a) + 1 / np.sqrt(a * a + 1) + np.arange(len(a))),
])
def test_tc_c_style_operators_and_builtins(src, want):
    # TC's kernels use C's `c ? a : b`, `&&`, `||`, `!`, fabs, rsqrt and casts
    k = pc.kernel(src, A=pc.f64["N"])
    a = np.arange(-3.0, 4.0)
    np.testing.assert_allclose(pc.compile(k)(A=a), want(a), rtol=1e-14)
    np.testing.assert_allclose(k.reference(A=a), want(a), rtol=1e-14)


def test_tc_casts_convert_as_c_does():
    k = pc.kernel("output[m, n] = int32(A[m, n] + four)", A=pc.f32["M", "N"], four=pc.i32, output=pc.i32["M", "N"])
    a = np.array([[1.5, -2.7], [1e9, 3.0]], np.float32)
    want = (a + np.float32(4)).astype(np.int32)
    np.testing.assert_array_equal(pc.compile(k)(A=a, four=4), want)
    np.testing.assert_array_equal(k.reference(A=a, four=4), want)
    f = pc.kernel("O[m] = select(m >= 1, A[m, 0], float(0)) + double(m)", A=pc.f32["M", "N"])
    got = pc.compile(f)(A=np.ones((3, 2), np.float32))
    np.testing.assert_array_equal(got, [0.0, 2.0, 3.0])


@pytest.mark.parametrize("src, message", [
    ("B[i] = A[i] > 0 ? A[i]", "needs both `?` and `:`"),
    ("B[i] = select(A[i] > 0 ? 1.0, 2.0, 3.0)", "needs both `?` and `:`"),
    ("B[i] = int32(A[i], 2)", "converts one value"),
])
def test_tc_c_style_mistakes_are_parse_errors(src, message):
    with pytest.raises(ParseError, match=re.escape(message)):
        pc.kernel(src, A=pc.f64["N"])


@pytest.mark.parametrize("src, want", [
    ("B[i] = A[i] + uint8(-1) + int32(3000000000)", 255 + np.int64(3000000000).astype(np.int32)),
    ("B[i] = A[i] + uint8(300)", 44), ("B[i] = A[i] + uint8(-1.5)", 255), ("B[i] = A[i] + int32(nan)", -2 ** 31),
    ("B[i] = A[i] + float(16777217)", 16777216.0),
    ("B[i] = A[i] + uint8(0 - 1)", 255), ("B[i] = A[i] + uint8(255 + 1)", 0),     # literal arithmetic is folded:
    ("B[i] = A[i] + int32(2000000000 * 2)", np.int64(4000000000).astype(np.int32)),  # an integer, as Python's
    ("B[i] = A[i] + int32(0.5 * 2.0e10)", -2 ** 31),                                 # a float, converted as numpy
])
def test_a_conversion_of_a_constant_is_numpys_on_every_target(src, want):
    # C leaves out-of-range conversions of constants undefined: they are folded as numpy computes them
    k = pc.kernel(src, A=pc.f64["N"])
    a = np.zeros(3)
    for target in ("c", "cuda-emu"):
        np.testing.assert_array_equal(pc.compile(k, target=target)(A=a), float(want))
    np.testing.assert_array_equal(k.reference(A=a), float(want))


def test_c_not_binds_tighter_than_a_comparison():
    k = pc.kernel("B[i] = !A[i] > 0 ? 1.0 : 0.0", A=pc.f64["N"])     # (!A[i]) > 0, as in C
    a = np.array([-3.0, 0.0, 2.0])
    np.testing.assert_array_equal(pc.compile(k)(A=a), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(k.reference(A=a), [0.0, 1.0, 0.0])


def test_the_negation_of_a_condition_is_an_integer_in_the_reference_too():
    k = pc.kernel("B[i] = -!A[i] + 0 * A[i]", A=pc.f64["N"])       # C: -(!x) is 0 or -1
    a = np.array([0.0, 2.0, -1.0])
    np.testing.assert_array_equal(pc.compile(k)(A=a), [-1.0, 0.0, 0.0])
    np.testing.assert_array_equal(k.reference(A=a), [-1.0, 0.0, 0.0])
