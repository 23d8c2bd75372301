"""Core neural-network kernels in Einstein notation: bias + ReLU, convolution, pooling, softmax and
layer normalisation.

Dtypes stay undeclared so each kernel runs in float32 and float64.  Where range inference cannot
name or infer a size (the input height of a convolution is only ever indexed as `h + kh`; the
output of a stride-2 pooling needs a division), the shape is declared with `shape(...)`, which
fixes the shape but not the element type.  Multi-statement kernels show intermediates (row maxima,
sums, means) that polyc allocates itself.
"""
from __future__ import annotations

import numpy as np

import polyc as pc
from kernels import LibraryKernel
from kernels._core import input_maker, shape

bias_relu = LibraryKernel(
    name="bias_relu",
    kernel=pc.kernel("Y[i, j] = max(X[i, j] + b[j], 0.0)", name="bias_relu"),
    make_inputs=input_maker({"X": lambda s: (s["I"], s["J"]), "b": lambda s: (s["J"],)}),
    reference=lambda X, b: np.maximum(X + b, 0).astype(X.dtype),
    sizes={"small": dict(I=21, J=34), "primes": dict(I=7, J=13),
           "typical": dict(I=2048, J=2048), "bench": dict(I=8192, J=8192)},
)

# NCHW, stride 1, no padding (the caller pads).  Inference alone would name the input height and
# width X_dim2 / X_dim3 (no index appears alone there), so the shapes are declared.  The filters
# are `K`, not `W`, because `W` is the input width.  Inputs in [0, 1): a reduction of positive
# terms, accurate relative to its size in float32 (see kernels/linalg.py).
conv2d = LibraryKernel(
    name="conv2d",
    kernel=pc.kernel("Y[n, f, h, w] +=! X[n, c, h + kh, w + kw] * K[f, c, kh, kw]", name="conv2d",
                     X=shape("N", "C", "H", "W"), K=shape("F", "C", "KH", "KW")),
    make_inputs=input_maker({"X": lambda s: (s["N"], s["C"], s["H"], s["W"]),
                             "K": lambda s: (s["F"], s["C"], s["KH"], s["KW"])}, lo=0.0, hi=1.0),
    reference=lambda X, K: np.einsum(
        "nchwpq,fcpq->nfhw",
        np.lib.stride_tricks.sliding_window_view(X, K.shape[2:], axis=(2, 3)), K, optimize=True),
    sizes={"small": dict(N=2, C=3, H=9, W=8, F=4, KH=3, KW=2),
           "primes": dict(N=1, C=5, H=13, W=7, F=7, KH=5, KW=3),
           "typical": dict(N=4, C=16, H=34, W=34, F=32, KH=3, KW=3),
           "bench": dict(N=8, C=64, H=58, W=58, F=64, KH=3, KW=3)},
)

# 2x2 average pooling, stride 2.  The output range of h is floor(X_dim2 / 2), a division that an
# affine range cannot express (inference says so), so X is declared with even extents 2*H, 2*W;
# the window indices r, s get their ranges from the `where` clause.  Odd inputs: crop first.
avgpool2d = LibraryKernel(
    name="avgpool2d",
    kernel=pc.kernel("P[n, c, h, w] +=! X[n, c, 2*h + r, 2*w + s] / 4.0 where r in 0:2, s in 0:2",
                     name="avgpool2d", X=shape("N", "C", "2*H", "2*W")),
    make_inputs=input_maker({"X": lambda s: (s["N"], s["C"], 2 * s["H"], 2 * s["W"])}),
    reference=lambda X: X.reshape(X.shape[0], X.shape[1], X.shape[2] // 2, 2, X.shape[3] // 2, 2)
    .mean(axis=(3, 5), dtype=X.dtype),
    sizes={"small": dict(N=2, C=3, H=5, W=4), "primes": dict(N=7, C=13, H=5, W=7),
           "typical": dict(N=8, C=32, H=64, W=64), "bench": dict(N=32, C=64, H=128, W=128)},
)


def _softmax(X):
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# Numerically stable row softmax: subtract the row maximum before exp.  The maximum only shifts
# the exponent (the result does not depend on it), so its exact adjoint is zero: `stop_gradient`
# tells `pc.grad` not to carry it back (as JAX's softmax does), which saves the backward two
# passes over each row and the count of tied maxima.
softmax = LibraryKernel(
    name="softmax",
    kernel=pc.kernel("""
        m[i] max=! X[i, j]
        e[i, j] = exp(X[i, j] - stop_gradient(m[i]))
        s[i] +=! e[i, j]
        Y[i, j] = e[i, j] / s[i]
    """, name="softmax"),
    make_inputs=input_maker({"X": lambda s: (s["I"], s["J"])}, lo=-4.0, hi=4.0),
    reference=_softmax,
    sizes={"small": dict(I=17, J=30), "primes": dict(I=13, J=7),
           "typical": dict(I=1024, J=1024), "bench": dict(I=8192, J=2048)},
)


def _layernorm(X, gamma, beta, eps):
    mean = X.mean(axis=1, keepdims=True)
    var = ((X - mean) ** 2).mean(axis=1, keepdims=True)
    return ((X - mean) / np.sqrt(var + X.dtype.type(eps)) * gamma + beta).astype(X.dtype)


# Layer normalisation over the last axis, with the two-pass variance.  X is declared [M, N] so the
# row length N is a size the kernel can divide by; `eps` is a scalar parameter of the call.
# `eps` is left undeclared, so it takes the kernel's float type (f32 or f64).
layernorm = LibraryKernel(
    name="layernorm",
    kernel=pc.kernel("""
        mean[i] +=! X[i, j] / N
        xc[i, j] = X[i, j] - mean[i]
        var[i] +=! xc[i, j] * xc[i, j] / N
        Y[i, j] = xc[i, j] / sqrt(var[i] + eps) * gamma[j] + beta[j]
    """, name="layernorm", X=shape("M", "N"), gamma=shape("N"), beta=shape("N")),
    make_inputs=input_maker({"X": lambda s: (s["M"], s["N"]), "gamma": lambda s: (s["N"],),
                             "beta": lambda s: (s["N"],)}, scalars={"eps": 1e-5}),
    reference=_layernorm,
    sizes={"small": dict(M=15, N=32), "primes": dict(M=7, N=13),
           "typical": dict(M=1024, N=1024), "bench": dict(M=8192, N=2048)},
)

KERNELS = [bias_relu, conv2d, avgpool2d, softmax, layernorm]
