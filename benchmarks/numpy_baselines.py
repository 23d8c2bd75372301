"""numpy formulations of the PolyBench kernels that have a natural one: what a numpy user would run.

Each function takes the kernel's own keyword arguments and updates the same arrays in place, as
the PolyBench loop nest does (tests/benchmarks/test_demo.py checks each against the reference).
`make demo` times PolyBench kernels against these where they exist and against the source-order C
at -O3 otherwise (triangular solvers, LU-style factorisations in place, Gauss-Seidel and other
recurrences have no faithful whole-array numpy form; writing them as Python loops would be the
1000x "baseline" the demo must not show).  Time loops of stencils stay Python loops over
whole-array steps, as a numpy user writes them.
"""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np


def gemm(C, A, B, alpha, beta):
    C *= beta
    C += alpha * (A @ B)


def gemver(A, u1, v1, u2, v2, w, x, y, z, alpha, beta):
    A += np.outer(u1, v1) + np.outer(u2, v2)
    x += beta * (A.T @ y) + z
    w += alpha * (A @ x)


def gesummv(A, B, tmp, x, y, alpha, beta):
    np.matmul(A, x, out=tmp)
    y[:] = alpha * tmp + beta * (B @ x)


def symm(C, A, B, alpha, beta):
    full = np.tril(A) + np.tril(A, -1).T  # only the lower triangle of A is stored
    C *= beta
    C += alpha * (full @ B)


def _lower_update(C, update, beta):
    lower = np.tril(np.ones(C.shape, dtype=bool))
    C[lower] = beta * C[lower] + update[lower]


def syr2k(C, A, B, alpha, beta):
    _lower_update(C, alpha * (A @ B.T + B @ A.T), beta)


def syrk(C, A, alpha, beta):
    _lower_update(C, alpha * (A @ A.T), beta)


def trmm(A, B, alpha):
    B[:] = alpha * (B + np.tril(A, -1).T @ B)  # A unit lower triangular, read transposed


def two_mm(tmp, A, B, C, D, alpha, beta):
    np.matmul(alpha * A, B, out=tmp)
    D *= beta
    D += tmp @ C


def three_mm(E, A, B, F, C, D, G):
    np.matmul(A, B, out=E)
    np.matmul(C, D, out=F)
    np.matmul(E, F, out=G)


def atax(A, x, y, tmp):
    np.matmul(A, x, out=tmp)
    np.matmul(A.T, tmp, out=y)


def bicg(A, s, q, p, r):
    np.matmul(r, A, out=s)
    np.matmul(A, p, out=q)


def mvt(A, x1, x2, y_1, y_2):
    x1 += A @ y_1
    x2 += A.T @ y_2


def doitgen(A, C4, total):
    A[:] = A @ C4
    total[:] = A[-1, -1]  # the loop nest leaves the last row's sums in `total`


def covariance(data, cov, mean):
    n = data.shape[0]
    mean[:] = data.mean(axis=0)
    data -= mean
    cov[:] = (data.T @ data) / (n - 1.0)


def correlation(data, corr, mean, stddev):
    n = data.shape[0]
    mean[:] = data.mean(axis=0)
    stddev[:] = np.sqrt(((data - mean) ** 2).mean(axis=0))
    stddev[stddev <= 0.1] = 1.0
    data -= mean
    data /= np.sqrt(n) * stddev
    corr[:] = data.T @ data
    np.fill_diagonal(corr, 1.0)


def floyd_warshall(paths):
    for k in range(paths.shape[0]):
        np.minimum(paths, paths[:, k, None] + paths[None, k, :], out=paths)


def jacobi_1d(A, B, TSTEPS):
    for _ in range(TSTEPS):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


def jacobi_2d(A, B, TSTEPS):
    for _ in range(TSTEPS):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])


def _heat_step(src, dst):
    c = src[1:-1, 1:-1, 1:-1]
    dst[1:-1, 1:-1, 1:-1] = (0.125 * (src[2:, 1:-1, 1:-1] - 2.0 * c + src[:-2, 1:-1, 1:-1])
                             + 0.125 * (src[1:-1, 2:, 1:-1] - 2.0 * c + src[1:-1, :-2, 1:-1])
                             + 0.125 * (src[1:-1, 1:-1, 2:] - 2.0 * c + src[1:-1, 1:-1, :-2])
                             + c)


def heat_3d(A, B, TSTEPS):
    for _ in range(TSTEPS):
        _heat_step(A, B)
        _heat_step(B, A)


def fdtd_2d(ex, ey, hz, fict):
    for t in range(fict.shape[0]):
        ey[0, :] = fict[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])


#: PolyBench name -> numpy formulation.
FORMULATIONS: Dict[str, Callable[..., None]] = {
    "gemm": gemm, "gemver": gemver, "gesummv": gesummv, "symm": symm, "syr2k": syr2k, "syrk": syrk,
    "trmm": trmm, "2mm": two_mm, "3mm": three_mm, "atax": atax, "bicg": bicg, "mvt": mvt,
    "doitgen": doitgen, "covariance": covariance, "correlation": correlation,
    "floyd-warshall": floyd_warshall, "jacobi-1d": jacobi_1d, "jacobi-2d": jacobi_2d, "heat-3d": heat_3d,
    "fdtd-2d": fdtd_2d,
}
