"""Loop kernels: clamped (piecewise-affine) subscripts, Halide's repeat_edge, and min/max in tests."""
import numpy as np
import pytest

import polyc as pc

from .loops_helpers import check_loops

rng = np.random.default_rng(16)


@pc.kernel
def blur_edge(A: pc.f64["W", "H"], B: pc.f64["W", "H"]):
    for x in range(W):
        for y in range(H):
            B[x, y] = (A[min(max(x - 1, 0), W - 1), y] + A[x, y] + A[min(max(x + 1, 0), W - 1), y]
                       + A[x, max(y - 2, 0)] + A[x, min(y + 2, H - 1)])


def test_repeat_edge_blur():
    a = rng.random((6, 5))
    p = np.pad(a, ((1, 1), (2, 2)), mode="edge")
    expected = p[0:6, 2:7] + a + p[2:8, 2:7] + p[1:7, 0:5] + p[1:7, 4:9]
    check_loops(blur_edge, dict(A=a, B=np.zeros((6, 5))), dict(B=expected))


@pytest.mark.parametrize("w", [1, 2])
def test_repeat_edge_on_tiny_images(w):
    a = rng.random((w, 3))
    p = np.pad(a, ((1, 1), (2, 2)), mode="edge")
    expected = p[0:w, 2:5] + a + p[2:w + 2, 2:5] + p[1:w + 1, 0:3] + p[1:w + 1, 4:7]
    check_loops(blur_edge, dict(A=a, B=np.zeros((w, 3))), dict(B=expected))


@pc.kernel
def triangle(A: pc.f64["N"], B: pc.f64["N", "N"]):
    for i in range(N):
        for j in range(min(i, 3) + 1):
            if max(i, 2 * j) < N - 1:
                B[i, j] = A[min(i, j + 1)] + A[max(i - j, 1) - 1]


def test_min_max_in_bounds_tests_and_subscripts():
    n = 7
    a = rng.random(n)
    b = np.zeros((n, n))
    for i in range(n):
        for j in range(min(i, 3) + 1):
            if max(i, 2 * j) < n - 1:
                b[i, j] = a[min(i, j + 1)] + a[max(i - j, 1) - 1]
    check_loops(triangle, dict(A=a, B=np.zeros((n, n))), dict(B=b))


def test_clamps_are_single_valued_iterators():
    st = blur_edge.program.statements[0]
    assert st.iterators[:2] == ("x", "y") and set(st.divisions) == set(st.iterators[2:])


def test_unclamped_read_is_still_out_of_bounds():
    def bad(A: pc.f64["N"], B: pc.f64["N"]):
        for i in range(N):
            B[i] = A[max(i, 0) + 1]
    with pytest.raises(pc.OutOfBoundsError, match=r"reads A\[max\(i, 0\) \+ 1\]"):
        pc.kernel(bad)

    def nested(A: pc.f64["N"], B: pc.f64["N"]):
        for i in range(N):
            B[i] = A[min(max(i - 1, 0), N) + 1]
    with pytest.raises(pc.OutOfBoundsError, match=r"reads A\[min\(max\(i - 1, 0\), N\) \+ 1\]"):
        pc.kernel(nested)
