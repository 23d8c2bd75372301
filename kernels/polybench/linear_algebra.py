"""PolyBench linear-algebra/kernels: 2mm, 3mm, atax, bicg, doitgen, mvt."""

import numpy as np

from ._common import fill, pc, polybench_kernel, presets


# --- 2mm: tmp = alpha A B; D = tmp C + beta D -----------------------------------------------------
def two_mm(
    tmp: pc.f64["NI", "NJ"], A: pc.f64["NI", "NK"], B: pc.f64["NK", "NJ"], C: pc.f64["NJ", "NL"],
    D: pc.f64["NI", "NL"], alpha: float, beta: float,
):
    for i in range(NI):
        for j in range(NJ):
            tmp[i, j] = 0.0
            for k in range(NK):
                tmp[i, j] += alpha * A[i, k] * B[k, j]
    for i in range(NI):
        for l in range(NL):  # noqa: E741 - PolyBench's index name
            D[i, l] *= beta
            for j in range(NJ):
                D[i, l] += tmp[i, j] * C[j, l]


def _init_2mm(NI, NJ, NK, NL):
    return dict(
        tmp=np.zeros((NI, NJ)),
        A=fill((NI, NK), lambda i, k: ((i * k + 1) % NI) / NI),
        B=fill((NK, NJ), lambda k, j: (k * (j + 1) % NJ) / NJ),
        C=fill((NJ, NL), lambda j, l: ((j * (l + 3) + 1) % NL) / NL),
        D=fill((NI, NL), lambda i, l: (i * (l + 2) % NK) / NK),
        alpha=1.5,
        beta=1.2,
    )


# --- 3mm: E = A B; F = C D; G = E F ---------------------------------------------------------------
def three_mm(
    E: pc.f64["NI", "NJ"], A: pc.f64["NI", "NK"], B: pc.f64["NK", "NJ"],
    F: pc.f64["NJ", "NL"], C: pc.f64["NJ", "NM"], D: pc.f64["NM", "NL"],
    G: pc.f64["NI", "NL"],
):
    for i in range(NI):
        for j in range(NJ):
            E[i, j] = 0.0
            for k in range(NK):
                E[i, j] += A[i, k] * B[k, j]
    for i in range(NJ):
        for j in range(NL):
            F[i, j] = 0.0
            for k in range(NM):
                F[i, j] += C[i, k] * D[k, j]
    for i in range(NI):
        for j in range(NL):
            G[i, j] = 0.0
            for k in range(NJ):
                G[i, j] += E[i, k] * F[k, j]


def _init_3mm(NI, NJ, NK, NL, NM):
    return dict(
        E=np.zeros((NI, NJ)),
        A=fill((NI, NK), lambda i, k: ((i * k + 1) % NI) / (5 * NI)),
        B=fill((NK, NJ), lambda k, j: ((k * (j + 1) + 2) % NJ) / (5 * NJ)),
        F=np.zeros((NJ, NL)),
        C=fill((NJ, NM), lambda j, m: (j * (m + 3) % NL) / (5 * NL)),
        D=fill((NM, NL), lambda m, l: ((m * (l + 2) + 2) % NK) / (5 * NK)),
        G=np.zeros((NI, NL)),
    )


# --- atax: y = A^T (A x) --------------------------------------------------------------------------
def atax(A: pc.f64["M", "N"], x: pc.f64["N"], y: pc.f64["N"], tmp: pc.f64["M"]):
    for i in range(N):
        y[i] = 0.0
    for i in range(M):
        tmp[i] = 0.0
        for j in range(N):
            tmp[i] += A[i, j] * x[j]
        for j in range(N):
            y[j] += A[i, j] * tmp[i]


def _init_atax(M, N):
    return dict(
        A=fill((M, N), lambda i, j: ((i + j) % N) / (5 * M)),
        x=fill((N,), lambda j: 1.0 + j / N),
        y=np.zeros(N),
        tmp=np.zeros(M),
    )


# --- bicg: s = A^T r; q = A p (the two halves of BiCG's matrix products) --------------------------
def bicg(A: pc.f64["N", "M"], s: pc.f64["M"], q: pc.f64["N"], p: pc.f64["M"], r: pc.f64["N"]):
    for i in range(M):
        s[i] = 0.0
    for i in range(N):
        q[i] = 0.0
        for j in range(M):
            s[j] += r[i] * A[i, j]
            q[i] += A[i, j] * p[j]


def _init_bicg(M, N):
    return dict(
        A=fill((N, M), lambda i, j: (i * (j + 1) % N) / N),
        s=np.zeros(M),
        q=np.zeros(N),
        p=fill((M,), lambda j: (j % M) / M),
        r=fill((N,), lambda i: (i % N) / N),
    )


# --- doitgen: A[r, q, :] = A[r, q, :] C4 (multiresolution analysis); PolyBench's `sum` is `total` ---
def doitgen(A: pc.f64["NR", "NQ", "NP"], C4: pc.f64["NP", "NP"], total: pc.f64["NP"]):
    for r in range(NR):
        for q in range(NQ):
            for p in range(NP):
                total[p] = 0.0
                for s in range(NP):
                    total[p] += A[r, q, s] * C4[s, p]
            for p in range(NP):
                A[r, q, p] = total[p]


def _init_doitgen(NQ, NR, NP):
    return dict(
        A=fill((NR, NQ, NP), lambda r, q, p: ((r * q + p) % NP) / NP),
        C4=fill((NP, NP), lambda s, p: (s * p % NP) / NP),
        total=np.zeros(NP),
    )


# --- mvt: x1 += A y1; x2 += A^T y2 ----------------------------------------------------------------
def mvt(A: pc.f64["N", "N"], x1: pc.f64["N"], x2: pc.f64["N"], y_1: pc.f64["N"], y_2: pc.f64["N"]):
    for i in range(N):
        for j in range(N):
            x1[i] = x1[i] + A[i, j] * y_1[j]
    for i in range(N):
        for j in range(N):
            x2[i] = x2[i] + A[j, i] * y_2[j]


def _init_mvt(N):
    return dict(
        A=fill((N, N), lambda i, j: (i * j % N) / N),
        x1=fill((N,), lambda i: (i % N) / N),
        x2=fill((N,), lambda i: ((i + 1) % N) / N),
        y_1=fill((N,), lambda i: ((i + 3) % N) / N),
        y_2=fill((N,), lambda i: ((i + 4) % N) / N),
    )


_N = presets("N", (40,), (120,), (400,), (2000,), (4000,))
_MN_ATAX = presets("M N", (38, 42), (116, 124), (390, 410), (1900, 2100), (1800, 2200))

KERNELS = [
    polybench_kernel("2mm", two_mm, _init_2mm, presets(
        "NI NJ NK NL", (16, 18, 22, 24), (40, 50, 70, 80), (180, 190, 210, 220),
        (800, 900, 1100, 1200), (1600, 1800, 2200, 2400))),
    polybench_kernel("3mm", three_mm, _init_3mm, presets(
        "NI NJ NK NL NM", (16, 18, 20, 22, 24), (40, 50, 60, 70, 80), (180, 190, 200, 210, 220),
        (800, 900, 1000, 1100, 1200), (1600, 1800, 2000, 2200, 2400))),
    polybench_kernel("atax", atax, _init_atax, _MN_ATAX),
    polybench_kernel("bicg", bicg, _init_bicg, _MN_ATAX),
    polybench_kernel("doitgen", doitgen, _init_doitgen, presets(
        "NQ NR NP", (8, 10, 12), (20, 25, 30), (40, 50, 60), (140, 150, 160), (220, 250, 270))),
    polybench_kernel("mvt", mvt, _init_mvt, _N),
]
