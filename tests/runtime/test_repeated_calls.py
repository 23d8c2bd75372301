"""A compiled kernel called again with the same dtypes, shapes, layouts and numbers reuses the
checks of the first call (`arguments.call_key`, `ready_call.ReadyCall`); everything that can differ between
such calls is still checked, and every call gets fresh outputs."""
import numpy as np
import pytest

import polyc as pc
from polyc.errors import ArgumentError

SAXPY = pc.kernel("Y[i] = a * X[i] + Z[i]", name="saxpy_rep", X=pc.f64["N"], Z=pc.f64["N"], a=pc.f64)
INPLACE = pc.kernel("Y[i] = Y[i] * s + X[i]", name="inplace_rep", X=pc.f64["N"], Y=pc.f64["N"], s=pc.f64)


def test_repeated_calls_give_fresh_right_outputs():
    f = pc.compile(SAXPY)
    x, z = np.arange(5.0), np.ones(5)
    first = f(X=x, Z=z, a=2.0)
    second = f(X=x, Z=z, a=2.0)
    assert first is not second and not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, 2 * x + 1)
    second[:] = -1
    np.testing.assert_array_equal(f(X=x + 1, Z=z, a=2.0), 2 * (x + 1) + 1)
    np.testing.assert_array_equal(f(X=x, Z=z, a=3.0), 3 * x + 1)     # another scalar value


def test_aliasing_is_checked_on_every_call():
    f = pc.compile(INPLACE)
    x, y = np.arange(4.0), np.ones(4)
    f(X=x, Y=y, s=2.0)
    y2 = np.ones(4)
    with pytest.raises(ArgumentError, match="alias"):
        f(X=y2, Y=y2, s=2.0)               # same shapes and flags as the accepted call


@pytest.mark.parametrize("bad, match", [
    (lambda y: y.astype(np.float32), "dtype"),
    (lambda y: np.ones(8)[::2], "C-contiguous"),
    (lambda y: np.broadcast_to(np.ones(1), (4,)), "read-only|C-contiguous"),
    (lambda y: np.ones(5), "shape|sizes"),
])
def test_a_different_array_is_checked_again(bad, match):
    f = pc.compile(INPLACE)
    x, y = np.arange(4.0), np.ones(4)
    f(X=x, Y=y, s=2.0)
    with pytest.raises(ArgumentError, match=match):
        f(X=x, Y=bad(y), s=2.0)


def test_a_read_only_output_is_refused_after_a_writable_one():
    f = pc.compile(INPLACE)
    x, y = np.arange(4.0), np.ones(4)
    f(X=x, Y=y, s=1.0)
    frozen = np.ones(4)
    frozen.flags.writeable = False
    with pytest.raises(ArgumentError, match="read-only"):
        f(X=x, Y=frozen, s=1.0)


def test_overlapping_views_are_refused_and_adjacent_ones_accepted_on_a_repeated_call():
    """The repeated-call path checks overlap from addresses: views of one buffer that share an
    element are refused, views that only touch are fine."""
    f = pc.compile(INPLACE)
    f(X=np.arange(4.0), Y=np.ones(4), s=2.0)
    buf = np.arange(8.0)
    with pytest.raises(ArgumentError, match="alias"):
        f(X=buf[3:7], Y=buf[0:4], s=2.0)
    x, y = buf[4:8], buf[0:4]
    expected = y * 2.0 + x
    np.testing.assert_array_equal(f(X=x, Y=y, s=2.0), expected)


def test_read_only_inputs_and_returned_outputs_on_repeated_calls():
    f = pc.compile(SAXPY)
    x, z = np.arange(6.0), np.ones(6)
    x.flags.writeable = False
    for _ in range(3):
        np.testing.assert_array_equal(f(X=x, Z=z, a=0.5), 0.5 * x + 1)
    y = np.empty(6)
    assert f(X=x, Z=z, a=0.5, Y=y) is y      # a passed output is the one returned
    np.testing.assert_array_equal(y, 0.5 * x + 1)


def test_minus_zero_is_another_scalar_value_on_a_repeated_call():
    f = pc.compile(pc.kernel("y[i] = x[i] / alpha"))
    x = np.ones(2)
    assert list(f(x=x, alpha=-0.0)) == [-np.inf, -np.inf]
    assert list(f(x=x, alpha=0.0)) == [np.inf, np.inf]
    assert list(f(x=x, alpha=-0.0)) == [-np.inf, -np.inf]
