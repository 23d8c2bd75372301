"""PolyBench linear-algebra/blas: gemm, gemver, gesummv, symm, syr2k, syrk, trmm.

Scalars alpha = 1.5 and beta = 1.2 as in PolyBench; matrices are filled from small modular index
formulas scaled into [0, 1).
"""

import numpy as np

from ._common import fill, pc, polybench_kernel, presets

ALPHA, BETA = 1.5, 1.2


# --- gemm: C = alpha * A B + beta * C -------------------------------------------------------------
def gemm(C: pc.f64["NI", "NJ"], A: pc.f64["NI", "NK"], B: pc.f64["NK", "NJ"], alpha: float, beta: float):
    for i in range(NI):
        for j in range(NJ):
            C[i, j] *= beta
        for k in range(NK):
            for j in range(NJ):
                C[i, j] += alpha * A[i, k] * B[k, j]


def _init_gemm(NI, NJ, NK):
    return dict(
        C=fill((NI, NJ), lambda i, j: ((i * j + 1) % NI) / NI),
        A=fill((NI, NK), lambda i, k: (i * (k + 1) % NK) / NK),
        B=fill((NK, NJ), lambda k, j: (k * (j + 2) % NJ) / NJ),
        alpha=ALPHA,
        beta=BETA,
    )


# --- gemver: A += u1 v1^T + u2 v2^T; x += beta A^T y + z; w += alpha A x --------------------------
def gemver(
    A: pc.f64["N", "N"],
    u1: pc.f64["N"], v1: pc.f64["N"], u2: pc.f64["N"], v2: pc.f64["N"],
    w: pc.f64["N"], x: pc.f64["N"], y: pc.f64["N"], z: pc.f64["N"],
    alpha: float, beta: float,
):
    for i in range(N):
        for j in range(N):
            A[i, j] = A[i, j] + u1[i] * v1[j] + u2[i] * v2[j]
    for i in range(N):
        for j in range(N):
            x[i] = x[i] + beta * A[j, i] * y[j]
    for i in range(N):
        x[i] = x[i] + z[i]
    for i in range(N):
        for j in range(N):
            w[i] = w[i] + alpha * A[i, j] * x[j]


def _init_gemver(N):
    vec = lambda scale: fill((N,), lambda i: (i + 1) / N / scale)  # noqa: E731
    return dict(
        A=fill((N, N), lambda i, j: (i * j % N) / N),
        u1=fill((N,), lambda i: i / N), v1=vec(4.0), u2=vec(2.0), v2=vec(6.0),
        w=np.zeros(N), x=np.zeros(N), y=vec(8.0), z=vec(9.0),
        alpha=ALPHA, beta=BETA,
    )


# --- gesummv: y = alpha A x + beta B x ------------------------------------------------------------
def gesummv(
    A: pc.f64["N", "N"], B: pc.f64["N", "N"], tmp: pc.f64["N"], x: pc.f64["N"], y: pc.f64["N"],
    alpha: float, beta: float,
):
    for i in range(N):
        tmp[i] = 0.0
        y[i] = 0.0
        for j in range(N):
            tmp[i] += A[i, j] * x[j]
            y[i] += B[i, j] * x[j]
        y[i] = alpha * tmp[i] + beta * y[i]


def _init_gesummv(N):
    return dict(
        A=fill((N, N), lambda i, j: ((i * j + 1) % N) / N),
        B=fill((N, N), lambda i, j: ((i * j + 2) % N) / N),
        tmp=np.zeros(N),
        x=fill((N,), lambda i: (i % N) / N),
        y=np.zeros(N),
        alpha=ALPHA, beta=BETA,
    )


# --- symm: C = alpha A B + beta C, A symmetric with only its lower triangle stored ----------------
def symm(C: pc.f64["M", "N"], A: pc.f64["M", "M"], B: pc.f64["M", "N"], alpha: float, beta: float):
    for i in range(M):
        for j in range(N):
            acc = 0.0
            for k in range(i):
                # the mirrored upper element A[k, i] == A[i, k] contributes to row k
                C[k, j] += alpha * B[i, j] * A[i, k]
                acc += B[k, j] * A[i, k]
            C[i, j] = beta * C[i, j] + alpha * B[i, j] * A[i, i] + alpha * acc


def _init_symm(M, N):
    # The strict upper triangle of A is never read; it holds a sentinel as in PolyBench.
    return dict(
        C=fill((M, N), lambda i, j: ((i + j) % 100) / M),
        A=fill((M, M), lambda i, j: np.where(j <= i, ((i + j) % 100) / M, -999.0)),
        B=fill((M, N), lambda i, j: ((N + i - j) % 100) / M),
        alpha=ALPHA, beta=BETA,
    )


# --- syr2k: lower(C) = alpha A B^T + alpha B A^T + beta C -----------------------------------------
def syr2k(C: pc.f64["N", "N"], A: pc.f64["N", "M"], B: pc.f64["N", "M"], alpha: float, beta: float):
    for i in range(N):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(M):
            for j in range(i + 1):
                C[i, j] += A[j, k] * alpha * B[i, k] + B[j, k] * alpha * A[i, k]


def _init_syr2k(M, N):
    return dict(
        C=fill((N, N), lambda i, j: ((i * j + 3) % N) / M),
        A=fill((N, M), lambda i, j: ((i * j + 1) % N) / N),
        B=fill((N, M), lambda i, j: ((i * j + 2) % M) / M),
        alpha=ALPHA, beta=BETA,
    )


# --- syrk: lower(C) = alpha A A^T + beta C --------------------------------------------------------
def syrk(C: pc.f64["N", "N"], A: pc.f64["N", "M"], alpha: float, beta: float):
    for i in range(N):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(M):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * A[j, k]


def _init_syrk(M, N):
    return dict(
        C=fill((N, N), lambda i, j: ((i * j + 2) % M) / M),
        A=fill((N, M), lambda i, j: ((i * j + 1) % N) / N),
        alpha=ALPHA, beta=BETA,
    )


# --- trmm: B = alpha A^T B, A unit lower triangular (diagonal and upper triangle not read) --------
def trmm(A: pc.f64["M", "M"], B: pc.f64["M", "N"], alpha: float):
    for i in range(M):
        for j in range(N):
            for k in range(i + 1, M):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]


def _init_trmm(M, N):
    return dict(
        A=fill((M, M), lambda i, j: np.where(j < i, ((i + j) % M) / M, np.where(i == j, 1.0, 0.0))),
        B=fill((M, N), lambda i, j: ((N + i - j) % N) / N),
        alpha=ALPHA,
    )


_MN = presets("M N", (20, 30), (60, 80), (200, 240), (1000, 1200), (2000, 2600))

KERNELS = [
    polybench_kernel("gemm", gemm, _init_gemm, presets(
        "NI NJ NK", (20, 25, 30), (60, 70, 80), (200, 220, 240), (1000, 1100, 1200), (2000, 2300, 2600))),
    polybench_kernel("gemver", gemver, _init_gemver, presets("N", (40,), (120,), (400,), (2000,), (4000,))),
    polybench_kernel("gesummv", gesummv, _init_gesummv, presets("N", (30,), (90,), (250,), (1300,), (2800,))),
    polybench_kernel("symm", symm, _init_symm, _MN),
    polybench_kernel("syr2k", syr2k, _init_syr2k, _MN),
    polybench_kernel("syrk", syrk, _init_syrk, _MN),
    polybench_kernel("trmm", trmm, _init_trmm, _MN),
]
