"""Example operator programs (`@pc.program`) built from the library kernels: an attention head, an MLP
block, layernorm + residual + GELU, conv + batch norm + ReLU; used by the tests, the benchmark and
the notebook.  Builders, so nothing is traced at import; `inputs` makes random float32 arrays."""
from __future__ import annotations

import numpy as np

import polyc as pc
from kernels.linalg import matmul
from kernels.nn import conv2d, layernorm, softmax
from kernels.program_ops import add, batchnorm, bias_add, gelu, matmul_nt, relu4d, scale


def attention(**options):
    @pc.program(**options)
    def attention_head(Q: pc.f32["S", "D"], K: pc.f32["S", "D"], V: pc.f32["S", "D"]):
        s = matmul_nt.kernel(A=Q, B=K)
        p = softmax.kernel(X=scale.kernel(X=s, alpha=0.125))
        return matmul.kernel(A=p, B=V)
    return attention_head


def mlp(**options):
    @pc.program(**options)
    def mlp_block(x: pc.f32["B", "D"], w1: pc.f32["D", "H"], b1: pc.f32["H"], w2: pc.f32["H", "D"]):
        h = gelu.kernel(X=bias_add.kernel(X=matmul.kernel(A=x, B=w1), b=b1))
        return matmul.kernel(A=h, B=w2)
    return mlp_block


def ln_residual_gelu(**options):
    @pc.program(**options)
    def ln_res_gelu(x: pc.f32["M", "N"], r: pc.f32["M", "N"], g: pc.f32["N"], b: pc.f32["N"]):
        y = layernorm.kernel(X=add.kernel(A=x, B=r), gamma=g, beta=b, eps=1e-5)
        return gelu.kernel(X=y)
    return ln_res_gelu


def conv_bn_relu(**options):
    @pc.program(**options)
    def conv_block(X: pc.f32["N", "C", "H + 2", "W + 2"], K: pc.f32["F", "C", 3, 3], mean: pc.f32["F"],
                   var: pc.f32["F"], gamma: pc.f32["F"], beta: pc.f32["F"]):
        y = conv2d.kernel(X=X, K=K)
        return relu4d.kernel(X=batchnorm.kernel(X=y, mean=mean, var=var, gamma=gamma, beta=beta, eps=1e-5))
    return conv_block


def inputs(prog, sizes, seed=0):
    """Random float32 arrays for the program's inputs at `sizes` (variances positive)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in prog.inputs:
        shape = tuple(d.evaluate(sizes) for d in prog.handles[name].shape)
        lo = 0.5 if name == "var" else -1.0
        out[name] = rng.uniform(lo, 1.0, size=shape).astype(np.float32)
    return out
