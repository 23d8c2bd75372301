"""Comparisons in Einstein notation chain as in Python (and in loop kernels): `a < b < c` is
`a < b and b < c`, never C's `(a < b) < c`; a parenthesised comparison stays one value."""
import numpy as np
import pytest

import polyc as pc

A = np.array([0.5, -0.5, 2.0, 1.0])


@pytest.mark.parametrize("schedule", (None, "auto"))
def test_chained_comparison_is_a_conjunction(schedule):
    k = pc.kernel("O[i] = select(0 < A[i] < 1, 1.0, 0.0)")
    assert pc.compile(k, schedule)(A=A).tolist() == [1.0, 0.0, 0.0, 0.0]
    assert k.reference(A=A).tolist() == [1.0, 0.0, 0.0, 0.0]


def test_longer_chains_and_equalities():
    three = pc.kernel("O[i] = select(0 < A[i] <= 1 < 2, 1.0, 0.0)")
    assert three(A=A).tolist() == [1.0, 0.0, 0.0, 1.0]
    equal = pc.kernel("O[i] = select(A[i] == A[i] == 1.0, 1.0, 0.0)")
    assert equal(A=A).tolist() == [0.0, 0.0, 0.0, 1.0]


def test_a_parenthesised_comparison_is_compared_as_a_value():
    k = pc.kernel("O[i] = select((0 < A[i]) < 1, 1.0, 0.0)")   # (bool) < 1: true where 0 < A is false
    assert k(A=A).tolist() == [0.0, 1.0, 0.0, 0.0]


def test_a_chained_guard_is_affine():
    k = pc.kernel("B[i] = select(0 <= i - 1 < N, A[i - 1], 0.0) where i in 0:N", A=pc.f64["N"])
    assert k(A=np.array([1.0, 2.0, 3.0])).tolist() == [0.0, 1.0, 2.0]
