"""Operators that programs compose (`@pc.program`): a matrix product with a transposed operand,
scaling, bias, GELU, residual addition, and inference batch normalisation and ReLU over NCHW.

Each is a small Einstein-notation kernel with undeclared dtypes (float32 and float64 alike), so
programs fuse them with the library's other kernels (matmul, softmax, layernorm, conv2d).
"""
from __future__ import annotations

import numpy as np

import polyc as pc
from kernels import LibraryKernel
from kernels._core import input_maker

#: sqrt(2 / pi), the constant of GELU's tanh approximation.
GELU_C = 0.7978845608028654

matmul_nt = LibraryKernel(
    name="matmul_nt",
    kernel=pc.kernel("C[i, j] +=! A[i, k] * B[j, k]", name="matmul_nt"),
    make_inputs=input_maker({"A": lambda s: (s["I"], s["K"]), "B": lambda s: (s["J"], s["K"])}, lo=0.0, hi=1.0),
    reference=lambda A, B: A @ B.T,
    sizes={"small": dict(I=9, J=11, K=5), "primes": dict(I=7, J=13, K=3), "typical": dict(I=1024, J=1024, K=64), "bench": dict(I=1024, J=1024, K=64)},
)

scale = LibraryKernel(
    name="scale",
    kernel=pc.kernel("Y[i, j] = X[i, j] * alpha", name="scale"),
    make_inputs=input_maker({"X": lambda s: (s["I"], s["J"])}, scalars={"alpha": 0.125}),
    reference=lambda X, alpha: (X * X.dtype.type(alpha)).astype(X.dtype),
    sizes={"small": dict(I=9, J=11), "primes": dict(I=7, J=13), "typical": dict(I=1024, J=1024), "bench": dict(I=4096, J=4096)},
)

bias_add = LibraryKernel(
    name="bias_add",
    kernel=pc.kernel("Y[i, j] = X[i, j] + b[j]", name="bias_add"),
    make_inputs=input_maker({"X": lambda s: (s["I"], s["J"]), "b": lambda s: (s["J"],)}),
    reference=lambda X, b: X + b,
    sizes={"small": dict(I=9, J=11), "primes": dict(I=7, J=13), "typical": dict(I=1024, J=1024), "bench": dict(I=4096, J=4096)},
)


def _gelu(X):
    c = X.dtype.type(GELU_C)
    return (X.dtype.type(0.5) * X * (1 + np.tanh(c * (X + X.dtype.type(0.044715) * X * X * X)))).astype(X.dtype)


gelu = LibraryKernel(
    name="gelu",
    kernel=pc.kernel(f"Y[i, j] = 0.5 * X[i, j] * (1.0 + tanh({GELU_C!r} * (X[i, j] + 0.044715 * X[i, j] * X[i, j] * X[i, j])))",
                     name="gelu"),
    make_inputs=input_maker({"X": lambda s: (s["I"], s["J"])}, lo=-3.0, hi=3.0),
    reference=_gelu,
    sizes={"small": dict(I=9, J=11), "primes": dict(I=7, J=13), "typical": dict(I=1024, J=1024), "bench": dict(I=4096, J=4096)},
)

add = LibraryKernel(
    name="add",
    kernel=pc.kernel("Y[i, j] = A[i, j] + B[i, j]", name="add"),
    make_inputs=input_maker({"A": lambda s: (s["I"], s["J"]), "B": lambda s: (s["I"], s["J"])}),
    reference=lambda A, B: A + B,
    sizes={"small": dict(I=9, J=11), "primes": dict(I=7, J=13), "typical": dict(I=1024, J=1024), "bench": dict(I=4096, J=4096)},
)


def _batchnorm(X, mean, var, gamma, beta, eps):
    c = (slice(None), None, None)
    return ((X - mean[c]) / np.sqrt(var[c] + X.dtype.type(eps)) * gamma[c] + beta[c]).astype(X.dtype)


# Inference batch normalisation over NCHW with running statistics; `eps` a scalar of the call.
batchnorm = LibraryKernel(
    name="batchnorm",
    kernel=pc.kernel("Y[n, c, h, w] = (X[n, c, h, w] - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c]",
                     name="batchnorm"),
    make_inputs=lambda s, dtype="f64", rng=None: {
        **input_maker({"X": lambda s: (s["N"], s["C"], s["H"], s["W"]), "mean": lambda s: (s["C"],),
                       "gamma": lambda s: (s["C"],), "beta": lambda s: (s["C"],)})(s, dtype, rng),
        "var": input_maker({"var": lambda s: (s["C"],)}, lo=0.5, hi=2.0)(s, dtype, rng)["var"], "eps": 1e-5},
    reference=_batchnorm,
    sizes={"small": dict(N=2, C=3, H=5, W=4), "primes": dict(N=1, C=5, H=7, W=3), "typical": dict(N=8, C=32, H=32, W=32),
           "bench": dict(N=32, C=64, H=56, W=56)},
)

relu4d = LibraryKernel(
    name="relu4d",
    kernel=pc.kernel("Y[n, c, h, w] = max(X[n, c, h, w], 0.0)", name="relu4d"),
    make_inputs=input_maker({"X": lambda s: (s["N"], s["C"], s["H"], s["W"])}),
    reference=lambda X: np.maximum(X, 0).astype(X.dtype),
    sizes={"small": dict(N=2, C=3, H=5, W=4), "primes": dict(N=1, C=5, H=7, W=3), "typical": dict(N=8, C=32, H=32, W=32),
           "bench": dict(N=32, C=64, H=56, W=56)},
)

KERNELS = [matmul_nt, scale, bias_add, gelu, add, batchnorm, relu4d]
