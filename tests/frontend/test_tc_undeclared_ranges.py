"""Item 3: an undeclared input read under explicit ranges needs a shape checked at call time."""
import numpy as np
import pytest

import polyc as pc

from .tc_helpers import check_all

rng = np.random.default_rng(2)


def test_prefix_sum_over_undeclared_input():
    k = pc.kernel("out[i] +=! a[j] where i in 0:N, j in 0:i+1")
    a = rng.random(6)
    check_all(k, dict(a=a, N=6), np.cumsum(a))
    check_all(k, dict(a=a, N=4), np.cumsum(a)[:4])


def test_too_short_input_is_an_argument_error_naming_the_size():
    k = pc.kernel("out[i] +=! a[j] where i in 0:N, j in 0:i+1")
    with pytest.raises(pc.ArgumentError, match=r"a_dim0 is 5 from a.shape\[0\]"):
        k(a=np.ones(5), N=6)


def test_triangular_matrix_vector():
    k = pc.kernel("y[i] +=! L[i, k] * v[k] where k in 0:i+1")
    L, v = rng.random((5, 5)), rng.random(5)
    check_all(k, dict(L=L, v=v), np.tril(L) @ v)
    with pytest.raises(pc.ArgumentError, match="v_dim0"):
        k(L=L, v=v[:4])


def test_declared_shape_too_small_is_still_a_definition_error():
    with pytest.raises(pc.OutOfBoundsError):
        pc.kernel("out[i] +=! a[j] where i in 0:N, j in 0:i+1", a=pc.f64["N - 1"])


def test_requirement_not_expressible_asks_to_declare_the_shape():
    with pytest.raises(pc.OutOfBoundsError, match="declare a's shape"):
        pc.kernel("b[i] = a[i % 3] where i in 0:N")


def test_range_size_bounded_by_an_input_takes_the_largest_allowed_value():
    # loopy's forward difference: N appears in no shape; u_dim0 >= N + 1 bounds it.
    k = pc.kernel("result[i] = u[i+1]-u[i] where i in 0:N")
    u = rng.random(12)
    check_all(k, dict(u=u), np.diff(u))
    check_all(k, dict(u=u, N=5), np.diff(u)[:5])


def test_requirement_holds_where_the_statement_runs():
    # Safe sizes are "w_dim0 >= 3, or no x at all": the call-time check states the first part.
    k = pc.kernel("O[x] +=! w[k] * inp[x + k] where k in 0:3")
    w, inp = rng.random(3), rng.random(9)
    check_all(k, dict(w=w, inp=inp), np.convolve(inp, w[::-1], "valid"))
    with pytest.raises(pc.ArgumentError, match="w_dim0"):
        k(w=w[:2], inp=inp)
