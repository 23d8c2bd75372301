"""Tensors defined piecewise (each element by one of several statements, on disjoint index sets)
differentiate as one definition: each piece's reads receive the adjoint of its own elements."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.testing import check_grad


@pc.kernel
def _if_else(X: pc.f64["N"], Y: pc.f64["N"]):
    for i in range(N):
        if i < 2:
            Y[i] = X[i] * X[i]
        else:
            Y[i] = 3.0 * X[i]


@pc.kernel
def _even_odd(X: pc.f64["N"], Y: pc.f64["N"]):
    for i in range(0, N, 2):
        Y[i] = X[i] * X[i]
    for i in range(1, N, 2):
        Y[i] = 3.0 * X[i]


@pc.kernel
def _overlapping(X: pc.f64["N"], Y: pc.f64["N"]):
    for i in range(N):
        Y[i] = X[i] * X[i]
    for i in range(1, N):
        Y[i] = 3.0 * X[i]


@pytest.mark.parametrize("kernel, first", [(_if_else, lambda i: i < 2), (_even_odd, lambda i: i % 2 == 0)])
def test_a_piecewise_definition_has_the_gradient_of_each_piece(kernel, first):
    x = np.random.default_rng(0).standard_normal(7)
    seed = np.random.default_rng(1).standard_normal(7)
    want = np.where(first(np.arange(7)), 2 * x, 3.0) * seed
    g = pc.grad(kernel, of="Y", wrt=["X"])
    for target in ("c", "cuda-emu"):
        np.testing.assert_allclose(pc.compile(g, target=target)(X=x, Y_grad=seed), want, rtol=1e-12)
    check_grad(kernel, of="Y", wrt="X", X=x)


def test_definitions_that_overlap_are_still_refused():
    with pytest.raises(pc.GradError, match="written by"):
        pc.grad(_overlapping, of="Y", wrt=["X"])
