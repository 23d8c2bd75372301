"""Item 6: integer parameters in subscripts are isl parameters, never one-point reductions."""
import numpy as np
import pytest

import polyc as pc

from .tc_helpers import check_all

rng = np.random.default_rng(1)


def test_undeclared_right_only_name_is_refused_not_reduced():
    with pytest.raises(pc.ParseError, match=r"SHIFT=pc.i64"):
        pc.kernel("O[i, j] += A[i, j - SHIFT]")


def test_shift_parameter_in_subscript():
    k = pc.kernel("O[i, j] += A[i, j - SHIFT] where j in SHIFT:J", SHIFT=pc.i64)
    assert k.program.int_params == ("SHIFT",)
    a, o = rng.random((3, 7)), rng.random((3, 7))
    expected = o.copy()
    expected[:, 2:] += a[:, :5]
    check_all(k, dict(A=a, O=o, SHIFT=2), expected)


def test_negative_shift_is_a_call_time_requirement():
    k = pc.kernel("O[i, j] += A[i, j - SHIFT] where j in SHIFT:J", SHIFT=pc.i64)
    with pytest.raises(pc.ArgumentError, match="SHIFT >= 0"):
        k(A=np.zeros((2, 4)), O=np.zeros((2, 4)), SHIFT=-1)


def test_dilation_parameter_scales_nothing_but_offsets():
    # TC's dilated convolution with a declared dilation offset d: O[x] = sum_k I[x + k + d] W[k]
    k = pc.kernel("O[x] +=! I[x + k + d] * W[k] where x in 0:N", d=pc.i64)
    i, w = rng.random(12), rng.random(3)
    expected = np.array([sum(i[x + kk + 2] * w[kk] for kk in range(3)) for x in range(6)])
    check_all(k, dict(I=i, W=w, d=2, N=6), expected)


def test_float_scalar_in_subscript_is_refused():
    with pytest.raises(pc.ParseError, match="must be integer"):
        pc.kernel("O[i] = A[i + s] where i in 0:N", s=pc.f32)
