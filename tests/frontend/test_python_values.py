"""Values in loop kernels compute what Python computes (the kernel's reference runs the function
itself), and conditions in arithmetic follow numpy's booleans in both front ends."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import polyc as pc


def _both(kernel, **arrays):
    """(compiled, reference) results of a loop kernel on copies of `arrays`."""
    mine = {k: v.copy() for k, v in arrays.items()}
    theirs = {k: v.copy() for k, v in arrays.items()}
    pc.compile(kernel)(**mine)
    kernel.reference(**theirs)
    return mine, theirs


def test_python_int_powers_with_negative_exponents_are_floats():
    @pc.kernel
    def powers(B: pc.f64["N"], C: pc.f64["N"], D: pc.i64["N"]):
        for i in range(N):
            B[i] = 2 ** (i - 3)          # Python: 0.125, 0.25, ... (numpy's integer rule gave 0)
            C[i] = (i + 1) ** -1
            D[i] = i ** 2                # a non-negative literal exponent stays an integer power
    mine, theirs = _both(powers, B=np.zeros(6), C=np.zeros(6), D=np.zeros(6, np.int64))
    np.testing.assert_array_equal(mine["B"], [0.125, 0.25, 0.5, 1, 2, 4])
    np.testing.assert_array_equal(mine["C"], 1.0 / np.arange(1, 7))
    np.testing.assert_array_equal(mine["D"], np.arange(6) ** 2)
    for name in mine:
        np.testing.assert_array_equal(mine[name], theirs[name])


def test_and_or_of_numbers_give_an_operand_as_in_python():
    @pc.kernel
    def pick(A: pc.f64["N"], B: pc.f64["N"], C: pc.f64["N"], D: pc.i64["N"], E: pc.f64["N"]):
        for i in range(N):
            C[i] = A[i] or B[i]
            D[i] = i or 7
            E[i] = A[i] and B[i] and 2.5
    a, b = np.array([0.0, 0.25, 3.0, np.nan]), np.array([5.0, 0.0, 7.0, 1.0])
    mine, theirs = _both(pick, A=a, B=b, C=np.zeros(4), D=np.zeros(4, np.int64), E=np.zeros(4))
    np.testing.assert_array_equal(mine["C"], [5.0, 0.25, 3.0, np.nan])    # nan is truthy
    np.testing.assert_array_equal(mine["D"], [7, 1, 2, 3])
    np.testing.assert_array_equal(mine["E"], [0.0, 0.0, 2.5, 2.5])
    for name in mine:
        np.testing.assert_array_equal(mine[name], theirs[name])


def test_conditions_on_array_elements_add_as_numpy_booleans_and_index_conditions_as_python_ints():
    @pc.kernel
    def count(A: pc.f64["N"], C: pc.f64["N"], D: pc.f64["N"], E: pc.i64["N"]):
        for i in range(N):
            C[i] = (A[i] > 0.5) + (A[i] > 0.2)        # numpy bools: a logical or
            D[i] = (A[i] > 0.5) * (A[i] > 0.2)        # a logical and
            E[i] = (i > 0) + (i > 1)                  # Python bools: 0, 1, 2
    a = np.array([0.1, 0.3, 0.7])
    mine, theirs = _both(count, A=a, C=np.zeros(3), D=np.zeros(3), E=np.zeros(3, np.int64))
    np.testing.assert_array_equal(mine["C"], [0.0, 1.0, 1.0])
    np.testing.assert_array_equal(mine["D"], [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(mine["E"], [0, 1, 2])
    for name in mine:
        np.testing.assert_array_equal(mine[name], theirs[name])


def test_einstein_conditions_combine_as_numpy_booleans():
    a = np.array([0.1, 0.3, 0.7])
    k = pc.kernel("C[i] = (A[i] > 0.5) + (A[i] > 0.2) + 0.0")
    np.testing.assert_array_equal(pc.compile(k)(A=a), ((a > 0.5) + (a > 0.2)) + 0.0)
    np.testing.assert_array_equal(k.reference(A=a), [0.0, 1.0, 1.0])
    with pytest.raises(pc.ParseError, match="boolean subtract") as e:
        pc.kernel("C[i] = (A[i] > 0.5) - (A[i] > 0.2) + 0.0")
    assert e.value.location is not None and e.value.location.column == 21


@pytest.mark.parametrize("branches", [16, 60])
def test_long_elif_chains_and_not_equal_tests_expand_without_blowing_up(branches, tmp_path):
    lines = ["import polyc as pc", "def ladder(A: pc.f64['N']):", "    for i in range(N):"]
    for k in range(branches):
        lines += [f"        {'if' if k == 0 else 'elif'} i == {k}:", f"            A[i] = {k}.0"]
    lines += [f"        elif {' and '.join(f'i != {k}' for k in range(branches, branches + 16))}:",
              "            A[i] = -2.0"]
    path = tmp_path / f"ladder{branches}.py"
    path.write_text("\n".join(lines) + "\n")
    spec = importlib.util.spec_from_file_location(f"ladder{branches}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    k = pc.kernel(module.ladder)                        # 2**16 alternatives unpruned: minutes
    got = pc.compile(k)(A=np.full(branches + 20, -1.0))
    want = np.r_[np.arange(branches, dtype=float), np.full(16, -1.0), np.full(4, -2.0)]
    np.testing.assert_array_equal(got, want)
