"""Definition-time checks: out-of-bounds accesses and uninitialised reads, with witnesses."""
import pytest

import polyc as pc


def test_out_of_bounds_names_statement_access_and_instance():
    with pytest.raises(pc.OutOfBoundsError) as info:
        pc.kernel("B[i] = A[i + 1]", A=pc.f64["N"], B=pc.f64["N"])
    msg = str(info.value)
    assert "statement `B[i] = A[i + 1]` (line 1)" in msg
    assert "reads A[i + 1] outside tensor A of shape (N)" in msg
    assert "with N = 1, at i = 0 it reads A[1]" in msg


def test_out_of_bounds_in_a_loop_kernel_points_at_the_line():
    def shift(A: pc.f64["N"], B: pc.f64["N"]):
        for i in range(N):  # noqa: F821 - N is a size symbol
            B[i] = A[i - 1]
    with pytest.raises(pc.OutOfBoundsError, match=r"reads A\[i - 1\].*at i = 0 it reads A\[-1\]"):
        pc.kernel(shift)


def test_in_bounds_with_where_clause_passes():
    k = pc.kernel("B[i] = A[i - 1] + A[i + 1] where i in 1:N-1", A=pc.f64["N"], B=pc.f64["N"])
    assert k.program.tensor("B").shape[0].as_single_var() == "N"


def test_uninitialised_intermediate_read():
    with pytest.raises(pc.UninitializedReadError) as info:
        pc.kernel("t[i] = A[i] where i in 1:N\nB[i] = t[i]", A=pc.f64["N"], B=pc.f64["N"])
    msg = str(info.value)
    assert "reads t[0]" in msg and "no earlier statement writes" in msg and "line 2" in msg
