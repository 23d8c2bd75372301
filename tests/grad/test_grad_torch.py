"""Gradient kernels against PyTorch's autograd, in float64, to 1e-5 relative.

Only this comparison needs PyTorch; it is skipped, with the reason, where torch is not importable
(the finite-difference checks in test_grad_library.py run everywhere)."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import by_name

torch = pytest.importorskip("torch", reason="PyTorch is not importable: the autograd comparison is skipped")


def _torch_fn(name):
    F = torch.nn.functional
    return {
        "matmul": lambda A, B: A @ B,
        "conv2d": lambda X, K: F.conv2d(X, K),
        "softmax": lambda X: torch.softmax(X, dim=1),
        "layernorm": lambda X, gamma, beta, eps: F.layer_norm(X, X.shape[1:], gamma, beta, eps),
        "bias_relu": lambda X, b: torch.maximum(X + b, torch.zeros((), dtype=X.dtype)),
        "avgpool2d": lambda X: F.avg_pool2d(X, 2),
        "batched_matmul": lambda A, B: A @ B,
        "trace": lambda A: torch.trace(A),
    }[name]


@pytest.mark.parametrize("name", ["matmul", "conv2d", "softmax", "layernorm", "bias_relu", "avgpool2d",
                                  "batched_matmul", "trace"])
def test_gradients_match_torch_autograd(name):
    lk = by_name(name)
    prog = lk.kernel.program
    of = [t.name for t in prog.tensors if t.role == "output"][0]
    wrt = [t.name for t in prog.tensors if t.role == "input"]
    inputs = lk.make_inputs(lk.sizes["small"], "f64", np.random.default_rng(5))
    g = pc.grad(lk.kernel, of=of, wrt=wrt)
    out = lk.kernel(**{k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()})
    ybar = np.random.default_rng(6).standard_normal(np.shape(out))
    args = {k: v for k, v in inputs.items() if k in g.program.tensor_map or k in {s.name for s in g.program.scalars}}
    res = pc.compile(g, "auto")(**args, **{g.grad_names.seed: ybar})
    res = res if isinstance(res, dict) else {g.grad_names[wrt[0]]: res}

    tensors = {k: torch.tensor(v, requires_grad=k in wrt) if isinstance(v, np.ndarray) else v
               for k, v in inputs.items()}
    y = _torch_fn(name)(**tensors)
    y.backward(torch.tensor(ybar))
    for x in wrt:
        np.testing.assert_allclose(res[g.grad_names[x]], tensors[x].grad.numpy(), rtol=1e-5, atol=1e-12)
