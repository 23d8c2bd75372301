"""Sizes of 0 (empty arrays): fine where loops just run no iteration, refused at call time where
an access would leave an empty array (`B[0] = ...`), never a write outside it."""
import numpy as np
import pytest

import polyc as pc
from polyc.errors import ArgumentError


@pc.kernel
def first_element(A: pc.f64["N"], B: pc.f64["M"]):
    B[0] = 5.0
    for i in range(N):
        A[i] = B[0]


@pc.kernel
def two_thirds(A: pc.f64["N"]):
    for i in range(N // 3 * 2 + 1):
        A[i] = 1.0


@pc.kernel
def doubled(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range(N):
        B[i] = A[i] * 2


@pytest.mark.parametrize("schedule", (None, "auto"))
def test_an_empty_array_read_at_a_fixed_position_is_refused(schedule):
    memory = np.zeros(10)
    with pytest.raises(ArgumentError, match=r"M - 1 >= 0 \(M is 0 from B.shape\[0\]\)"):
        pc.compile(first_element, schedule)(A=np.zeros(3), B=memory[5:5])
    assert not memory.any()          # nothing was written next to the empty view
    out = pc.compile(first_element, schedule)(A=np.zeros(3), B=np.zeros(2))
    assert out["A"].tolist() == [5.0] * 3


def test_a_loop_that_runs_once_at_size_zero_is_refused():
    with pytest.raises(ArgumentError, match="N - 1 >= 0"):
        two_thirds(A=np.zeros(0))
    assert two_thirds(A=np.zeros(6)).tolist() == [1.0] * 5 + [0.0]


def test_loops_over_empty_arrays_still_run_nothing():
    assert doubled(A=np.zeros(0), B=np.zeros(0)).shape == (0,)
    rowsum = pc.kernel("O[i] +=! A[i, k]")
    assert rowsum(A=np.zeros((3, 0))).tolist() == [0.0, 0.0, 0.0]
    assert rowsum(A=np.zeros((0, 4))).shape == (0,)
    assert "M - 1" not in " ".join(str(c) for c in doubled.program.assumptions)
