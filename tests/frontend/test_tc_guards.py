"""Item 5: affine conditions of `select` / `a if c else b` restrict where the reads under them happen."""
import numpy as np
import pytest

import polyc as pc

from .tc_helpers import check_all

rng = np.random.default_rng(5)


def test_select_guard_keeps_read_in_bounds():
    k = pc.kernel("B[i] = select(i >= 1, A[i - 1], 0.0)", A=pc.f64["N"], B=pc.f64["N"])
    a = rng.random(7)
    check_all(k, dict(A=a), np.concatenate([[0.0], a[:-1]]))
    np.testing.assert_allclose(k.reference(A=a), np.concatenate([[0.0], a[:-1]]))


def test_conjunction_guard_on_both_sides():
    k = pc.kernel("B[i] = select(i >= 1 and i < N - 1, A[i - 1] + A[i + 1], A[i])",
                  A=pc.f64["N"], B=pc.f64["N"])
    a = rng.random(7)
    expected = a.copy()
    expected[1:-1] = a[:-2] + a[2:]
    check_all(k, dict(A=a), expected)


def test_else_branch_is_guarded_by_the_negation():
    k = pc.kernel("B[i] = select(i == 0, 0.0, A[i - 1])", A=pc.f64["N"], B=pc.f64["N"])
    a = rng.random(5)
    check_all(k, dict(A=a), np.concatenate([[0.0], a[:-1]]))


def test_wrong_guard_is_still_out_of_bounds():
    with pytest.raises(pc.OutOfBoundsError, match=r"A\[-1\]"):
        pc.kernel("B[i] = select(i >= 0, A[i - 1], 0.0)", A=pc.f64["N"], B=pc.f64["N"])


def test_data_dependent_guard_gives_no_protection():
    with pytest.raises(pc.OutOfBoundsError):
        pc.kernel("B[i] = select(A[i] > 0.0, A[i - 1], 0.0)", A=pc.f64["N"], B=pc.f64["N"])


def test_python_conditional_expression_guard():
    @pc.kernel
    def shift(A: pc.f64["N"], B: pc.f64["N"]):
        for i in range(N):  # noqa: F821
            B[i] = A[i - 1] if i >= 1 else 0.0

    a = rng.random(6)
    check_all(shift, dict(A=a, B=np.zeros(6)), np.concatenate([[0.0], a[:-1]]))
