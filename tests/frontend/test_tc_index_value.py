"""Item 7: an index used only as a value (loopy's `sum(j, j**2)`)."""
import numpy as np

import polyc as pc

from .tc_helpers import check_all


def test_index_only_in_value_with_where_range():
    k = pc.kernel("out[i] +=! pow(j, 2) where j in 2:2*i+3", out=pc.f64["N"])
    expected = np.array([sum(j ** 2 for j in range(2, 2 * i + 3)) for i in range(6)], dtype=float)
    check_all(k, dict(N=6), expected)


def test_index_as_value_next_to_a_tensor():
    k = pc.kernel("out[i] +=! A[i] * j where j in 0:3")
    a = np.arange(4.0)
    check_all(k, dict(A=a), a * 3.0)
