"""Clamped subscripts in Einstein notation (`A[min(max(x - 1, 0), N - 1)]`, Halide's `clamp` and
`repeat_edge`): min/max of affine terms become piecewise iterators, isl splits the index set where
the answer changes, and every back end sees affine accesses only."""
import numpy as np
import pytest

import polyc as pc
from polyc.errors import OutOfBoundsError, ParseError
from polyc.testing import check_grad

BLUR = pc.kernel("B[x] = A[max(x - 1, 0)] + A[x] + A[min(x + 1, N - 1)]", A=pc.f64["N"], name="edge_blur")


def _blur(a):
    n = len(a)
    idx = np.arange(n)
    return a[np.clip(idx - 1, 0, n - 1)] + a + a[np.clip(idx + 1, 0, n - 1)]


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
@pytest.mark.parametrize("schedule", [None, "auto"])
def test_repeat_edge_blur(target, schedule):
    a = np.random.default_rng(0).standard_normal(9)
    np.testing.assert_allclose(pc.compile(BLUR, schedule, target=target)(A=a), _blur(a), rtol=1e-12)
    np.testing.assert_allclose(BLUR.reference(A=a), _blur(a), rtol=1e-12)


def test_two_dimensional_clamp_on_both_sides():
    k = pc.kernel("O[x, y] = I[min(max(x - 2, 0), W - 1), min(max(y + 1, 0), H - 1)]",
                  I=pc.f32["W", "H"], O=pc.f32["W", "H"], name="clamp2d")
    img = np.random.default_rng(1).standard_normal((6, 5)).astype(np.float32)
    xs = np.clip(np.arange(6) - 2, 0, 5)[:, None]
    ys = np.clip(np.arange(5) + 1, 0, 4)[None, :]
    np.testing.assert_array_equal(pc.compile(k, "auto")(I=img), img[xs, ys])


def test_clamped_reads_in_a_reduction():
    k = pc.kernel("O[i] +=! A[min(i + k, N - 1)] * w[k]", A=pc.f64["N"], w=pc.f64["K"], O=pc.f64["N"],
                  name="clamped_conv")
    rng = np.random.default_rng(2)
    a, w = rng.standard_normal(10), rng.standard_normal(3)
    want = np.array([sum(a[min(i + j, 9)] * w[j] for j in range(3)) for i in range(10)])
    for schedule in (None, "auto"):
        np.testing.assert_allclose(pc.compile(k, schedule)(A=a, w=w), want, rtol=1e-12)


def test_gradient_of_a_clamped_read_accumulates_at_the_edge():
    a = np.random.default_rng(3).standard_normal(7)
    check_grad(BLUR, of="B", wrt=["A"], A=a)


def test_an_index_only_clamped_reads_use_has_no_range():
    """A clamped read is in bounds for every index value, so it bounds nothing (TC's rule): the
    index needs a range from elsewhere, and the error says so."""
    from polyc.errors import ShapeInferenceError
    with pytest.raises(ShapeInferenceError, match="range of index 'i'"):
        pc.kernel("O[i] +=! A[min(i + k, N - 1)] * w[k]", A=pc.f64["N"], w=pc.f64["K"])


def test_an_unclamped_side_is_still_out_of_bounds():
    with pytest.raises(OutOfBoundsError):
        pc.kernel("B[x] = A[max(x - 1, 0)] + A[x + 1]", A=pc.f64["N"], B=pc.f64["N"])


def test_too_many_clamps_are_refused_with_the_position():
    terms = " + ".join(f"A[min(x + {k}, N - 1)]" for k in range(1, 9))
    with pytest.raises(ParseError, match="min/max") as e:
        pc.kernel(f"B[x] = {terms}", A=pc.f64["N"], B=pc.f64["N"])
    assert e.value.location is not None


def test_min_of_a_product_is_refused_with_the_position():
    with pytest.raises(ParseError, match="affine") as e:
        pc.kernel("B[x] = A[min(x * x, N - 1)]", A=pc.f64["N"], B=pc.f64["N"])
    assert e.value.location is not None and e.value.location.column > 1


def test_min_in_a_where_bound():
    k = pc.kernel("O[i] +=! A[i, j] where j in 0:min(i + 2, M)", A=pc.f64["N", "M"], name="clamped_range")
    a = np.random.default_rng(4).standard_normal((5, 4))
    want = np.array([a[i, :min(i + 2, 4)].sum() for i in range(5)])
    for schedule in (None, "auto"):
        np.testing.assert_allclose(pc.compile(k, schedule)(A=a), want, rtol=1e-12)


@pytest.mark.parametrize("src, want", [
    ("o[x] = a[min(x, W - 1)] where x in 0:W", lambda a: a),
    ("o[x] = a[min(x, W - 1)] where x in 0:12", lambda a: a[np.minimum(np.arange(12), len(a) - 1)]),
    ("o[x] = a[min(2 * x, W - 1)] where x in 0:W/2", lambda a: a[0:len(a):2][:len(a) // 2]),
    ("o[x] = a[min(max(x - 1, 0), W - 1)] + a[x] where x in 0:W",
     lambda a: a[np.maximum(np.arange(len(a)) - 1, 0)] + a),
])
def test_a_where_range_holds_beside_a_clamped_read(src, want):
    # the clamp's pieces (x <= W - 1 in one, x >= W in the other) must not be read as the range
    k = pc.kernel(src, a=pc.f64["W"])
    a = np.arange(10.0)
    np.testing.assert_array_equal(pc.compile(k)(a=a), want(a))
    np.testing.assert_array_equal(k.reference(a=a), want(a))
