"""Loop kernels: Python's chained assignment `a = B[i] = v`, and `-=` on unsigned arrays."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import polyc as pc
from polyc.errors import ParseError


def chained_scalars(A: pc.f64["N"], alpha: float):       # PolyBench deriche: `a1 = a5 = k;`
    a1 = a5 = alpha * 2.0
    for i in range(N):
        A[i] = A[i] * a1 + a5


def chained_mixed(A: pc.u8["N"], B: pc.f64["N"]):
    for i in range(N):
        x = A[i] = B[i] = B[i] + 250.5     # one value, stored left to right, each in its own type
        B[i] = B[i] + x


def chained_python(A, B):
    for i in range(len(A)):
        x = A[i] = B[i] = B[i] + 250.5
        B[i] = B[i] + x


def minus_assign_u8(A: pc.u8["N"], B: pc.u16["N"]):
    for i in range(N):
        A[i] -= 100
        B[i] -= 1


@pytest.mark.parametrize("schedule", [None, "auto"])
def test_chained_assignment_assigns_one_value_left_to_right(schedule):
    a = np.arange(4.0)
    pc.compile(pc.kernel(chained_scalars), schedule=schedule)(A=a, alpha=3.0)
    np.testing.assert_array_equal(a, np.arange(4.0) * 6.0 + 6.0)
    a, b = np.zeros(3, np.uint8), np.arange(3.0)
    want_a, want_b = a.copy(), b.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chained_python(want_a, want_b)
    pc.compile(pc.kernel(chained_mixed), schedule=schedule)(A=a, B=b)
    np.testing.assert_array_equal(a, want_a)
    np.testing.assert_array_equal(b, want_b)


def test_chained_assignment_errors_point_at_the_users_line():
    def bad(A: pc.f64["N"]):
        for i in range(N):
            A[i] = N = 3.0
    with pytest.raises(ParseError, match="cannot assign to size `N`") as info:
        pc.kernel(bad)
    assert "A[i] = N = 3.0" in str(info.value)


@pytest.mark.parametrize("schedule", [None, "auto"])
def test_minus_assign_on_unsigned_arrays_wraps_as_numpy(schedule):
    a, b = np.array([10, 200, 100], np.uint8), np.array([0, 7, 65535], np.uint16)
    want_a, want_b = a.copy(), b.copy()
    want_a -= 100
    want_b -= 1
    pc.compile(pc.kernel(minus_assign_u8), schedule=schedule)(A=a, B=b)
    np.testing.assert_array_equal(a, want_a)
    np.testing.assert_array_equal(b, want_b)
