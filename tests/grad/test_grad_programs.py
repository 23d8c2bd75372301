"""`pc.grad` of an operator program (`@pc.program`): the traced kernel of every operator is
differentiated end to end; the adjoint comes in as `<output>_grad`, gradients go out per input."""
import numpy as np
import pytest

import polyc as pc
from kernels import programs as P
from polyc.errors import GradError
from polyc.testing import check_grad

SMOOTH = [(P.mlp, dict(B=6, D=5, H=7)), (P.ln_residual_gelu, dict(M=5, N=8)), (P.attention, dict(S=6, D=4))]


@pytest.mark.parametrize("build, sizes", SMOOTH, ids=lambda v: getattr(v, "__name__", ""))
def test_program_gradients_match_finite_differences(build, sizes):
    prog = build()
    check_grad(prog, of="out", wrt=list(prog.inputs), inputs=P.inputs(prog, sizes))


def test_program_gradient_on_the_cuda_emulator():
    prog = P.mlp()
    check_grad(prog, of="out", wrt=["w1", "b1"], inputs=P.inputs(prog, dict(B=3, D=4, H=5)), target="cuda-emu")


def test_program_gradient_names_and_auto_schedule():
    prog = P.mlp()
    g = pc.grad(prog, of="out", wrt=["w2", "x"])
    assert g.grad_names.seed == "out_grad" and dict(g.grad_names.wrt) == {"w2": "w2_grad", "x": "x_grad"}
    x = P.inputs(prog, dict(B=4, D=3, H=6))
    ybar = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    plain = pc.compile(g)(**x, out_grad=ybar)
    auto = pc.compile(g, schedule="auto")(**x, out_grad=ybar)
    for name in ("w2_grad", "x_grad"):
        np.testing.assert_allclose(auto[name], plain[name], rtol=1e-5, atol=1e-6)


def test_conv_bn_relu_gradients_match_torch():
    """ReLU's kink defeats float32 finite differences here; PyTorch's autograd (float64) decides."""
    torch = pytest.importorskip("torch", reason="the comparison with autograd needs PyTorch")
    prog = P.conv_bn_relu()
    x = P.inputs(prog, dict(N=1, C=2, H=5, W=4, F=3))
    g = pc.grad(prog, of="out", wrt=list(prog.inputs))
    out = prog(**x)
    ybar = np.random.default_rng(3).standard_normal(out.shape).astype(np.float32)
    got = pc.compile(g, schedule="auto")(**x, out_grad=ybar)
    t = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in x.items()}
    c = lambda v: v[None, :, None, None]  # noqa: E731
    y = torch.nn.functional.conv2d(t["X"], t["K"])
    o = torch.relu((y - c(t["mean"])) / torch.sqrt(c(t["var"]) + 1e-5) * c(t["gamma"]) + c(t["beta"]))
    (o * torch.tensor(ybar.astype(np.float64))).sum().backward()
    for name in prog.inputs:
        want = t[name].grad.numpy()
        np.testing.assert_allclose(got[g.grad_names[name]], want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_program_gradient_requests_are_checked():
    prog = P.mlp()
    with pytest.raises(GradError, match="not an output"):
        pc.grad(prog, of="h", wrt=["x"])
    with pytest.raises(GradError, match="not inputs"):
        pc.grad(prog, of="out", wrt=["matmul0_C"])
