"""Outputs the runtime allocates: uninitialised only where isl proves the kernel writes every
element (`PolyModel.fully_written`), zero-filled everywhere else (stencil borders, triangles,
strided or guarded writes), whatever the memory held before."""
import numpy as np
import pytest

import polyc as pc


@pytest.mark.parametrize("source, declared, expected", [
    ("C[i, j] = A[i, j] + B[i, j]", dict(A=pc.f32["N", "M"]), {"C"}),
    ("C[i, j] +=! A[i, k] * B[k, j]", {}, {"C"}),              # the initialisation writes every C[i, j]
    ("O[i] max=! A[i, j]", dict(A=pc.f32["N", "M"]), {"O"}),
    ("B[i] = A[i] where i in 1:N", dict(A=pc.f32["N"], B=pc.f32["N"]), set()),          # B[0] never written
    ("B[2 * i] = A[i]", dict(A=pc.f32["N"], B=pc.f32["2 * N"]), set()),                  # odd elements never
    ("L[i, j] = A[i, j] where j in 0:i+1", dict(A=pc.f32["N", "N"], L=pc.f32["N", "N"]), set()),  # a triangle
])
def test_which_outputs_are_fully_written(source, declared, expected):
    assert set(pc.kernel(source, **declared).model.fully_written) == expected


def test_a_loop_kernel_writing_the_interior_keeps_zero_borders():
    @pc.kernel
    def smooth(A: pc.f64["N"], B: pc.f64["N"]):
        for i in range(1, N - 1):  # noqa: F821  (N is a size)
            B[i] = (A[i - 1] + A[i] + A[i + 1]) / 3

    assert "B" not in smooth.model.fully_written


def test_unwritten_elements_are_zero_even_after_garbage():
    """Fill freed memory with NaN first: an output allocated uninitialised would show it."""
    k = pc.kernel("B[i, j] = A[i, j] * 2 where i in 1:N, j in 0:M", A=pc.f64["N", "M"], B=pc.f64["N", "M"])
    f = pc.compile(k)
    a = np.ones((300, 300))
    for _ in range(5):
        junk = np.full((300, 300), np.nan)
        del junk
        b = f(A=a)
        assert np.all(b[0] == 0) and np.all(b[1:] == 2)


def test_fully_written_outputs_are_right():
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_alloc")
    f = pc.compile(k, schedule="auto")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((33, 17)), rng.standard_normal((17, 29))
    for _ in range(3):
        junk = np.full((33, 29), np.nan)
        del junk
        np.testing.assert_allclose(f(A=a, B=b), a @ b, rtol=1e-12)
