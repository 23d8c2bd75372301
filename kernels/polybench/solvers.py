"""PolyBench linear-algebra/solvers: cholesky, durbin, gramschmidt, lu, ludcmp, trisolv.

None of these pivots, so the inputs are chosen to make that safe: strictly diagonally dominant
matrices (symmetric for cholesky), a positive-definite Toeplitz system for durbin, a full-column-rank
matrix for gramschmidt.  Loops that run downwards are written over an upward counter `ii` with the
index `N - 1 - ii` substituted into the subscripts, which keeps every loop a unit-stride `range`.
"""

import math

import numpy as np

from ._common import fill, pc, polybench_kernel, presets

_N = presets("N", (40,), (120,), (400,), (2000,), (4000,))


def _dominant(N, off_diagonal):
    """Off-diagonal entries in [0, 1) from `off_diagonal(i, j)`, diagonal N: every row sum of the
    off-diagonal part is below N, so the matrix is strictly diagonally dominant."""
    return fill((N, N), lambda i, j: np.where(i == j, float(N), off_diagonal(i, j)))


# --- cholesky: A = L L^T, L overwrites the lower triangle of A (upper triangle untouched) ---------
def cholesky(A: pc.f64["N", "N"]):
    for i in range(N):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[j, k]
            A[i, j] /= A[j, j]
        for k in range(i):
            A[i, i] -= A[i, k] * A[i, k]
        A[i, i] = math.sqrt(A[i, i])


def _init_cholesky(N):
    # symmetric and strictly diagonally dominant with a positive diagonal => positive definite
    return dict(A=_dominant(N, lambda i, j: ((i + j) % N) / N))


# --- durbin: Levinson-Durbin recursion for the Yule-Walker system T y = -r ------------------------
def durbin(r: pc.f64["N"], y: pc.f64["N"], z: pc.f64["N"]):
    y[0] = -r[0]
    beta = 1.0
    alpha = -r[0]
    for k in range(1, N):
        beta = (1.0 - alpha * alpha) * beta
        acc = 0.0
        for i in range(k):
            acc += r[k - i - 1] * y[i]
        alpha = -(r[k] + acc) / beta
        for i in range(k):
            z[i] = y[i] + alpha * y[k - i - 1]
        for i in range(k):
            y[i] = z[i]
        y[k] = alpha


def _init_durbin(N):
    # r[k] = 1 / (k + 2): the Toeplitz matrix T[i, j] = 1 / (|i - j| + 1) (with r as its first row
    # after the unit diagonal) is a mixture of x^|i-j|, x in (0, 1), hence positive definite, so
    # every reflection coefficient stays inside (-1, 1).
    return dict(r=fill((N,), lambda k: 1.0 / (k + 2)), y=np.zeros(N), z=np.zeros(N))


# --- gramschmidt: A = Q R, modified Gram-Schmidt; A is left holding the residuals -----------------
def gramschmidt(A: pc.f64["M", "N"], R: pc.f64["N", "N"], Q: pc.f64["M", "N"]):
    for k in range(N):
        nrm = 0.0
        for i in range(M):
            nrm += A[i, k] * A[i, k]
        R[k, k] = math.sqrt(nrm)
        for i in range(M):
            Q[i, k] = A[i, k] / R[k, k]
        for j in range(k + 1, N):
            R[k, j] = 0.0
            for i in range(M):
                R[k, j] += Q[i, k] * A[i, j]
            for i in range(M):
                A[i, j] = A[i, j] - Q[i, k] * R[k, j]


def _init_gramschmidt(M, N):
    # A modular pattern in [0, 1) plus M/4 on the top diagonal: full column rank (needs M >= N) and
    # a condition number of about 3 at every preset, so Q and R are insensitive to rounding.
    return dict(
        A=fill((M, N), lambda i, j: ((i * (j + 1) + 1) % M) / M + np.where(i == j, M / 4.0, 0.0)),
        R=np.zeros((N, N)),
        Q=np.zeros((M, N)),
    )


# --- lu: A = L U in place (Doolittle, L unit lower), no pivoting ----------------------------------
def lu(A: pc.f64["N", "N"]):
    for i in range(N):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[k, j]
            A[i, j] /= A[j, j]
        for j in range(i, N):
            for k in range(i):
                A[i, j] -= A[i, k] * A[k, j]


def _init_lu(N):
    return dict(A=_dominant(N, lambda i, j: ((i * j + 1) % N) / N))


# --- ludcmp: solve A x = b by LU (in place), forward and backward substitution --------------------
def ludcmp(A: pc.f64["N", "N"], b: pc.f64["N"], x: pc.f64["N"], y: pc.f64["N"]):
    for i in range(N):
        for j in range(i):
            w = A[i, j]
            for k in range(j):
                w -= A[i, k] * A[k, j]
            A[i, j] = w / A[j, j]
        for j in range(i, N):
            w = A[i, j]
            for k in range(i):
                w -= A[i, k] * A[k, j]
            A[i, j] = w
    for i in range(N):
        w = b[i]
        for j in range(i):
            w -= A[i, j] * y[j]
        y[i] = w
    # back substitution, i = N - 1 - ii runs downwards
    for ii in range(N):
        w = y[N - 1 - ii]
        for j in range(N - ii, N):
            w -= A[N - 1 - ii, j] * x[j]
        x[N - 1 - ii] = w / A[N - 1 - ii, N - 1 - ii]


def _init_ludcmp(N):
    return dict(
        A=_dominant(N, lambda i, j: ((i * j + 2) % N) / N),
        b=fill((N,), lambda i: (i + 1) / N / 2.0 + 4.0),
        x=np.zeros(N),
        y=np.zeros(N),
    )


# --- trisolv: forward substitution L x = b --------------------------------------------------------
def trisolv(L: pc.f64["N", "N"], x: pc.f64["N"], b: pc.f64["N"]):
    for i in range(N):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]


def _init_trisolv(N):
    # lower triangular, diagonal N dominating the off-diagonal entries in [0, 1): well conditioned
    return dict(
        L=fill((N, N), lambda i, j: np.where(j < i, ((i + N - j + 1) % N) / N,
                                             np.where(i == j, float(N), 0.0))),
        x=np.zeros(N),
        b=fill((N,), lambda i: float(N) * (1.0 + i % 7)),
    )


KERNELS = [
    polybench_kernel("cholesky", cholesky, _init_cholesky, _N),
    polybench_kernel("durbin", durbin, _init_durbin, _N),
    # PolyBench's gramschmidt presets have fewer rows than columns (M=20, N=30 at MINI): A then has
    # rank M, the columns after the M-th are pure rounding noise, and Q and R depend on the order
    # of floating-point operations.  The same numbers are used with rows and columns swapped
    # (M >= N), so the factorisation is well-defined and a compiled kernel can be compared.
    polybench_kernel("gramschmidt", gramschmidt, _init_gramschmidt, presets(
        "M N", (30, 20), (80, 60), (240, 200), (1200, 1000), (2600, 2000))),
    polybench_kernel("lu", lu, _init_lu, _N),
    polybench_kernel("ludcmp", ludcmp, _init_ludcmp, _N),
    polybench_kernel("trisolv", trisolv, _init_trisolv, _N),
]
