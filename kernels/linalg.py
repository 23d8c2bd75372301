"""Core linear-algebra kernels in Einstein notation: products, contractions and reshuffles.

Every kernel leaves its dtypes undeclared so one definition runs in float32 and float64; sizes
are inferred from the subscripts (TC-style), so `i` gives the size `I`, `k` gives `K`, and so on.
The references are plain numpy.
"""
from __future__ import annotations

import numpy as np

import polyc as pc
from kernels import LibraryKernel
from kernels._core import input_maker

# Inputs of the reductions (matmul, matvec, batched_matmul, trace, contract3) are uniform in [0, 1):
# a sum of positive terms has no cancellation, so the float32 result is accurate relative to its
# size and the default rtol holds at every size.  A mixed-sign sum of L terms can cancel to
# nearly zero, where only an atol growing with L would do; the kernels that must see negative
# values (relu, softmax, layernorm) use [-1, 1).
POSITIVE = dict(lo=0.0, hi=1.0)

matmul = LibraryKernel(
    name="matmul",
    kernel=pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul"),
    make_inputs=input_maker({"A": lambda s: (s["I"], s["K"]), "B": lambda s: (s["K"], s["J"])}, **POSITIVE),
    reference=lambda A, B: A @ B,
    sizes={"small": dict(I=24, K=17, J=20), "primes": dict(I=7, K=13, J=5),
           "typical": dict(I=512, K=512, J=512), "bench": dict(I=1024, K=1024, J=1024)},
)

matvec = LibraryKernel(
    name="matvec",
    kernel=pc.kernel("y[i] +=! A[i, j] * x[j]", name="matvec"),
    make_inputs=input_maker({"A": lambda s: (s["I"], s["J"]), "x": lambda s: (s["J"],)}, **POSITIVE),
    reference=lambda A, x: A @ x,
    sizes={"small": dict(I=33, J=40), "primes": dict(I=7, J=13),
           "typical": dict(I=2048, J=2048), "bench": dict(I=8192, J=8192)},
)

# The batch index is `n`, not `b`: a size named after `b` would collide with the tensor `B` and
# come out as `B_`.
batched_matmul = LibraryKernel(
    name="batched_matmul",
    kernel=pc.kernel("C[n, i, j] +=! A[n, i, k] * B[n, k, j]", name="batched_matmul"),
    make_inputs=input_maker({"A": lambda s: (s["N"], s["I"], s["K"]), "B": lambda s: (s["N"], s["K"], s["J"])}, **POSITIVE),
    reference=lambda A, B: np.matmul(A, B),
    sizes={"small": dict(N=3, I=10, K=9, J=8), "primes": dict(N=5, I=7, K=13, J=5),
           "typical": dict(N=32, I=128, K=128, J=128), "bench": dict(N=64, I=256, K=256, J=256)},
)

transpose = LibraryKernel(
    name="transpose",
    kernel=pc.kernel("B[j, i] = A[i, j]", name="transpose"),
    make_inputs=input_maker({"A": lambda s: (s["I"], s["J"])}),
    # A copy, so numpy's time counts moving the data as polyc's does (A.T alone is a view).
    reference=lambda A: np.ascontiguousarray(A.T),
    sizes={"small": dict(I=31, J=17), "primes": dict(I=13, J=7),
           "typical": dict(I=2048, J=2048), "bench": dict(I=8192, J=8192)},
)

outer = LibraryKernel(
    name="outer",
    kernel=pc.kernel("C[i, j] = a[i] * b[j]", name="outer"),
    make_inputs=input_maker({"a": lambda s: (s["I"],), "b": lambda s: (s["J"],)}),
    reference=lambda a, b: np.outer(a, b),
    sizes={"small": dict(I=19, J=23), "primes": dict(I=7, J=13),
           "typical": dict(I=2048, J=2048), "bench": dict(I=8192, J=8192)},
)

# A[i, i] makes A square (both dimensions are the size I).  The output is a rank-0 array.
trace = LibraryKernel(
    name="trace",
    kernel=pc.kernel("t +=! A[i, i]", name="trace"),
    make_inputs=input_maker({"A": lambda s: (s["I"], s["I"])}, **POSITIVE),
    reference=lambda A: np.asarray(np.trace(A), dtype=A.dtype),
    sizes={"small": dict(I=29), "primes": dict(I=13),
           "typical": dict(I=4096), "bench": dict(I=16384)},
)

# Contracts two indices at once, in different positions of A and B (r is the 2nd dimension of
# both, s is A's 3rd and B's 1st).  Indices p, q, r, s give the sizes P, Q, R, S; indices named
# a, b, c would give A_, B_, C_ since the tensors A, B, C take those names.
contract3 = LibraryKernel(
    name="contract3",
    kernel=pc.kernel("C[p, q] +=! A[p, r, s] * B[s, r, q]", name="contract3"),
    make_inputs=input_maker({"A": lambda s: (s["P"], s["R"], s["S"]), "B": lambda s: (s["S"], s["R"], s["Q"])}, **POSITIVE),
    # tensordot reshapes the contraction into one BLAS matrix product (einsum may not).
    reference=lambda A, B: np.tensordot(A, B, axes=([1, 2], [1, 0])),
    sizes={"small": dict(P=11, R=6, S=7, Q=9), "primes": dict(P=7, R=13, S=5, Q=7),
           "typical": dict(P=128, R=32, S=32, Q=128), "bench": dict(P=256, R=128, S=128, Q=256)},
)

KERNELS = [matmul, matvec, batched_matmul, transpose, outer, trace, contract3]
