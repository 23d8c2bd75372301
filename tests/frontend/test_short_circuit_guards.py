"""`and` / `or` short-circuit, in C as in Python: a read in the right operand happens only where
the left operand lets it, so `i + 1 < N and A[i + 1] > 0.5` is in bounds (it was refused as a read
of A[N]); a left operand that does not guard the read is still refused."""
import numpy as np
import pytest

import polyc as pc
from polyc.errors import OutOfBoundsError

A = np.array([0.9, 0.1, 0.7, 0.6])


@pc.kernel
def next_is_large(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range(N):
        B[i] = 1.0 if (i + 1 < N and A[i + 1] > 0.5) else 0.0


@pc.kernel
def first_or_previous_large(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range(N):
        B[i] = 1.0 if (i == 0 or A[i - 1] > 0.5) else 0.0


@pytest.mark.parametrize("schedule", (None, "auto"))
@pytest.mark.parametrize("kernel, expected", [(next_is_large, [0.0, 1.0, 1.0, 0.0]),
                                              (first_or_previous_large, [1.0, 1.0, 0.0, 1.0])])
def test_loop_kernel_guards_a_read_with_and_or(kernel, expected, schedule):
    got, want = np.zeros(4), np.zeros(4)
    pc.compile(kernel, schedule)(A=A, B=got)
    kernel.reference(A=A, B=want)
    assert got.tolist() == want.tolist() == expected


def test_einstein_and_guards_its_right_operand():
    k = pc.kernel("B[i] = select(i + 1 < N and A[i + 1] > 0.5, 1.0, 0.0) where i in 0:N", A=pc.f64["N"])
    assert k(A=A).tolist() == k.reference(A=A).tolist() == [0.0, 1.0, 1.0, 0.0]


def test_a_left_operand_that_does_not_guard_the_read_is_refused():
    with pytest.raises(OutOfBoundsError, match=r"reads A\[i \+ 1\]"):
        pc.kernel("B[i] = select(i + 1 < N or A[i + 1] > 0.5, 1.0, 0.0) where i in 0:N", A=pc.f64["N"])
