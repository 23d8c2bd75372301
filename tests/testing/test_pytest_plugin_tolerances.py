"""Tolerances follow the arrays compared: an f32 kernel is judged with f32 tolerances by
`check_kernel` and `fuzz_schedules` however its inputs came about (issue 20: explicit float32
`inputs=` used to be compared with float64 tolerances, so every schedule was a "mismatch")."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.testing import check_kernel, fuzz_schedules
from polyc.testing.check import TOLERANCES, tolerances_for

MATMUL = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul_tol")
MATMUL_F32 = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul_f32",
                       A=pc.f32["I", "K"], B=pc.f32["K", "J"])


def f64_then_rounded(A, B, **_):
    """A more accurate reference than any f32 schedule: accumulate in f64, round once at the end."""
    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)


def f32_inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    return dict(A=rng.random((6, 300)).astype(np.float32), B=rng.random((300, 5)).astype(np.float32))


def test_the_f32_rounding_really_differs_beyond_f64_tolerances():
    inputs = f32_inputs()
    got = pc.compile(MATMUL)(**inputs)
    want = f64_then_rounded(**inputs)
    assert not np.allclose(got, want, *TOLERANCES["f64"])   # what the old default compared with
    assert np.allclose(got, want, *TOLERANCES["f32"])


def test_check_kernel_with_explicit_f32_inputs_uses_f32_tolerances():
    got = check_kernel(MATMUL, MATMUL.schedule().tile(i=2, j=2), inputs=f32_inputs(),
                       reference=f64_then_rounded)
    assert got["C"].dtype == np.float32


def test_check_kernel_on_a_kernel_declared_f32_uses_f32_tolerances():
    # dtype= keeps its default ("f64") but the declared f32 arrays decide the tolerance
    check_kernel(MATMUL_F32, sizes={"I": 4, "K": 400, "J": 3}, reference=f64_then_rounded)


def test_fuzz_schedules_with_explicit_f32_inputs_reports_no_false_mismatch():
    summary = fuzz_schedules(MATMUL, n=6, seed=0, inputs=f32_inputs(), reference=f64_then_rounded,
                             raise_on_mismatch=False)
    assert summary.schedules > 0
    assert summary.mismatches == 0, summary.failures


def test_real_f32_errors_are_still_reported_with_the_first_differing_element():
    def off_by_one_row(A, B, **_):
        out = f64_then_rounded(A, B)
        out[2, 1:] += 0.5
        return out

    with pytest.raises(AssertionError) as err:
        check_kernel(MATMUL, inputs=f32_inputs(), reference=off_by_one_row)
    text = str(err.value)
    assert "C (float32): 4 of 30 elements differ (rtol=0.0002, atol=1e-05)" in text
    assert "first at (2, 1)" in text
    assert "inputs A: float32(6, 300), B: float32(300, 5)" in text


def test_explicit_tolerances_win_and_the_least_precise_array_decides():
    f32, f64 = np.zeros(2, np.float32), np.zeros(2, np.float64)
    assert tolerances_for(f32, f64) == TOLERANCES["f32"]
    assert tolerances_for(f64, f32) == TOLERANCES["f32"]
    assert tolerances_for(f64, f64) == TOLERANCES["f64"]
    assert tolerances_for(np.zeros(2, np.int32), np.zeros(2, np.int32)) == (0, 0)
    assert tolerances_for(f32, f32, rtol=0.5) == (0.5, TOLERANCES["f32"][1])
