"""Item 7: an index used only as a value (loopy's `sum(j, j**2)`)."""
import numpy as np
import pytest

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


def test_reduction_index_used_nowhere_counts():
    # loopy's scan of a scan: tmp[i] counts k in 0:i+1.
    k = pc.kernel("tmp[i] +=! 1 where i in 0:N, k in 0:i+1\nout[i] +=! tmp[j] where i in 0:N, j in 0:i+1")
    check_all(k, dict(N=6), np.cumsum(np.arange(1, 7)))


@pytest.mark.parametrize("src, want", [
    ("P[x, y] = (x * y) // 10 + 8 where x in 0:10, y in 0:10", lambda x, y: (x * y) // 10 + 8),
    ("P[x, y] = (x * y) % 7 where x in 0:10, y in 0:10", lambda x, y: (x * y) % 7),
    ("P[x, y] = (x * y + 3) // -4 where x in 0:10, y in 0:10", lambda x, y: (x * y + 3) // -4),
])
def test_a_division_of_a_product_of_indices_is_a_value(src, want):
    # Halide's lesson 9 producer: not a subscript, so not quasi-affine; computed as data
    x, y = np.meshgrid(np.arange(10), np.arange(10), indexing="ij")
    k = pc.kernel(src)
    np.testing.assert_array_equal(pc.compile(k)(), want(x, y))
    np.testing.assert_array_equal(k.reference(), want(x, y))
