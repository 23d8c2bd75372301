"""Gathers split into an interior and a border (`polyc.grad.domains.split_interior`).

A convolution's input gradient sums over the kernel window only where the window stays inside
the output (`0 <= h - kh < OH`).  Its target elements away from the border receive every window
position: that part is a contraction over a box, which `"auto"` packs like a matrix product,
while the thin border keeps its guarded loops.  The split is exact (no zero padding: an infinite
weight still gives the same result as the unsplit gather).  It is what `pad_borders=False` asks for;
the default pads (`test_grad_padding.py`)."""
import numpy as np

import polyc as pc
from kernels import by_name


def _conv_input_grad(X, K, Yb):
    """Reference: X_grad[n, c, h, w] = sum over f, kh, kw of Yb[n, f, h - kh, w - kw] * K[f, c, kh, kw]."""
    Xg = np.zeros_like(X, dtype=np.float64)
    OH, OW = Yb.shape[2:]
    for kh in range(K.shape[2]):
        for kw in range(K.shape[3]):
            Xg[:, :, kh:kh + OH, kw:kw + OW] += np.einsum("nfhw,fc->nchw", Yb, K[:, :, kh, kw])
    return Xg


def test_conv_input_gradient_has_a_box_interior_that_auto_packs():
    g = pc.grad(by_name("conv2d").kernel, of="Y", wrt=["X"], pad_borders=False)
    gathers = [st for st in g.program.statements if st.update == "+"]
    assert len(gathers) == 2
    interior, border = gathers
    assert len(interior.domain) == 1 and len(border.domain) >= 2
    f = pc.compile(g, "auto")
    assert any(plan.statement == interior.name for plan in f.schedule.packing)
    rng = np.random.default_rng(0)
    K = rng.standard_normal((6, 5, 3, 3)).astype(np.float32)
    Yb = rng.standard_normal((2, 6, 9, 11)).astype(np.float32)
    got = f(K=K, Y_grad=Yb, N=2, C=5, H=11, W=13)
    np.testing.assert_allclose(got, _conv_input_grad(np.zeros((2, 5, 11, 13)), K, Yb), rtol=1e-4, atol=1e-4)


def test_the_split_adds_no_product_with_zero():
    """An infinite weight reaches only the elements whose window uses it: the others stay finite
    (zero padding would have made them 0 * inf = NaN)."""
    g = pc.grad(by_name("conv2d").kernel, of="Y", wrt=["X"], pad_borders=False)
    f = pc.compile(g, "auto")
    K = np.ones((2, 1, 3, 3), np.float32)
    K[0, 0, 0, 0] = np.inf
    Yb = np.ones((1, 2, 4, 4), np.float32)
    got = f(K=K, Y_grad=Yb, N=1, C=1, H=6, W=6)[0, 0]
    # K[.., 0, 0] multiplies Yb[h, w] into X_grad[h, w]: only h, w < 4 see it.
    assert np.all(np.isinf(got[:4, :4]))
    assert np.all(np.isfinite(got[4:, :])) and np.all(np.isfinite(got[:, 4:]))
