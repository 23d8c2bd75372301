"""Zero-padded gathers (`polyc.grad.padding`, `pc.grad(..., pad_borders=True)`, the default).

A convolution's input gradient reads the output's adjoint through shifted indices that leave it
near the border.  By default the adjoint is copied into a zero-padded array and the gather sums over
a box; it must agree with the exact sum at every size, pad only where that is exact for finite
values, and leave everything else to the interior/border split."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import by_name
from polyc.errors import GradError

CONV = by_name("conv2d")


def _conv_input_grad(K, Yb, H, W):
    """X_grad[n, c, h, w] = sum over f, kh, kw of Yb[n, f, h - kh, w - kw] * K[f, c, kh, kw], in float64."""
    N, C = Yb.shape[0], K.shape[1]
    OH, OW = Yb.shape[2:]
    Xg = np.zeros((N, C, H, W))
    for kh in range(K.shape[2]):
        for kw in range(K.shape[3]):
            Xg[:, :, kh:kh + OH, kw:kw + OW] += np.einsum("nfhw,fc->nchw", Yb, K[:, :, kh, kw])
    return Xg


def _tensors(g):
    return {t.name: t for t in g.program.tensors}


def test_conv_input_gradient_is_one_packed_gather_over_a_box():
    g = pc.grad(CONV.kernel, of="Y", wrt=["X"])
    padded = _tensors(g)["Y_grad_padded"]
    assert padded.role == "temp"
    assert [str(e) for e in padded.shape] == ["N", "F", "H + KH - 1", "KW + W - 1"]
    gathers = [st for st in g.program.statements if st.update == "+"]
    assert len(gathers) == 1 and len(gathers[0].domain) == 1
    # Nothing but the box: no guard on h - kh.
    assert {str(c.expr) for c in gathers[0].domain[0]} >= {"h", "H - h - 1", "kh", "KH - kh - 1"}
    writes = [st for st in g.program.statements if st.target.tensor == "Y_grad_padded"]
    assert [str(st.value) for st in writes][0].startswith("Const") and len(writes) == 2
    f = pc.compile(g, "auto")
    assert any(plan.statement == gathers[0].name for plan in f.schedule.packing)


@pytest.mark.parametrize("sizes", [
    dict(N=2, C=5, F=6, H=11, W=13, KH=3, KW=3),
    dict(N=1, C=3, F=2, H=7, W=5, KH=5, KW=2),      # a tall, narrow window
    dict(N=1, C=2, F=3, H=4, W=4, KH=4, KW=4),      # the window covers the input: one output
    dict(N=3, C=1, F=1, H=9, W=1, KH=2, KW=1),      # width 1
    dict(N=1, C=4, F=5, H=6, W=7, KH=1, KW=1),      # a 1x1 filter: nothing to pad
])
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_padded_conv_input_gradient_matches_the_exact_sum(sizes, target):
    g = pc.grad(CONV.kernel, of="Y", wrt=["X"])
    f = pc.compile(g, "auto" if target == "c" else None, target=target)
    rng = np.random.default_rng(1)
    N, C, F, H, W, KH, KW = (sizes[k] for k in "N C F H W KH KW".split())
    K = rng.standard_normal((F, C, KH, KW))
    Yb = rng.standard_normal((N, F, H - KH + 1, W - KW + 1))
    got = f(K=K, Y_grad=Yb, N=N, C=C, H=H, W=W)
    np.testing.assert_allclose(got, _conv_input_grad(K, Yb, H, W), rtol=1e-10, atol=1e-10)


def test_one_dimensional_correlation_pads_the_adjoint_only():
    k = pc.kernel("y[i] +=! x[i + k] * w[k]", x=pc.f64["N"], w=pc.f64["K"])
    g = pc.grad(k, of="y", wrt=["x", "w"])
    assert [str(e) for e in _tensors(g)["y_grad_padded"].shape] == ["K + N - 1"]
    # w's gradient reads x inside its bounds everywhere: a box already, nothing padded for it.
    w_grad = next(st for st in g.program.statements if st.target.tensor == "w_grad" and st.update == "+")
    assert {a.tensor for a in w_grad.value.accesses()} == {"y_grad", "x"}
    rng = np.random.default_rng(2)
    for n, kk in ((9, 4), (5, 5), (6, 1), (40, 7)):
        x, w, yb = rng.standard_normal(n), rng.standard_normal(kk), rng.standard_normal(n - kk + 1)
        out = pc.compile(g, "auto")(x=x, w=w, y_grad=yb)
        xg, wg = out["x_grad"], out["w_grad"]
        np.testing.assert_allclose(xg, np.convolve(yb, w), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(wg, np.correlate(x, yb, mode="valid"), rtol=1e-12, atol=1e-12)


def test_no_padding_where_another_factor_would_leave_its_array():
    """x's gradient reads `z[j - k]` as well: padding y_grad alone would read z out of bounds on the
    box, so the border stays split off, and the gradient is still right."""
    k = pc.kernel("y[i] +=! x[i + k] * w[k] * z[i]", x=pc.f64["N"], w=pc.f64["K"], z=pc.f64["N - K + 1"])
    g = pc.grad(k, of="y", wrt=["x"])
    assert not any(t.endswith("_padded") for t in _tensors(g))
    assert sum(1 for st in g.program.statements if st.update == "+") == 2   # interior and border
    rng = np.random.default_rng(3)
    z, w, yb = rng.standard_normal(8), rng.standard_normal(3), rng.standard_normal(8)
    got = pc.compile(g, "auto")(w=w, z=z, y_grad=yb, N=10)
    np.testing.assert_allclose(got, np.convolve(yb * z, w), rtol=1e-12)


def test_padding_multiplies_zeros_by_the_filter_which_pad_borders_false_avoids():
    """The documented cost of padding: 0 * inf = NaN on the border an infinite tap does not reach."""
    K = np.ones((2, 1, 3, 3), np.float32)
    K[0, 0, 0, 0] = np.inf
    Yb = np.ones((1, 2, 4, 4), np.float32)
    padded = pc.compile(pc.grad(CONV.kernel, of="Y", wrt=["X"]), "auto")(K=K, Y_grad=Yb, N=1, C=1, H=6, W=6)[0, 0]
    exact = pc.compile(pc.grad(CONV.kernel, of="Y", wrt=["X"], pad_borders=False), "auto")(
        K=K, Y_grad=Yb, N=1, C=1, H=6, W=6)[0, 0]
    assert np.all(np.isinf(exact[:4, :4])) and np.all(np.isinf(padded[:4, :4]))
    assert np.all(np.isfinite(exact[4:, :])) and np.all(np.isnan(padded[4:, :]))
    finite = np.ones((2, 1, 3, 3), np.float32)
    args = dict(K=finite, Y_grad=Yb, N=1, C=1, H=6, W=6)
    np.testing.assert_array_equal(pc.compile(pc.grad(CONV.kernel, of="Y", wrt=["X"]), "auto")(**args),
                                  pc.compile(pc.grad(CONV.kernel, of="Y", wrt=["X"], pad_borders=False), "auto")(**args))


def test_pad_borders_must_be_a_bool():
    with pytest.raises(GradError, match="pad_borders"):
        pc.grad(CONV.kernel, of="Y", wrt=["X"], pad_borders="yes")
