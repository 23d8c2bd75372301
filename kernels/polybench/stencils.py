"""PolyBench stencils: adi, fdtd-2d, heat-3d, jacobi-1d, jacobi-2d, seidel-2d.

The number of time steps is the int parameter `TSTEPS` (a preset key, as in PolyBench), except in
fdtd-2d, where it is the length `TMAX` of the source array `fict`.
"""

import numpy as np

from ._common import fill, pc, polybench_kernel, presets


# --- adi: alternating-direction implicit heat solver; each half step solves tridiagonal systems ---
def adi(u: pc.f64["N", "N"], v: pc.f64["N", "N"], p: pc.f64["N", "N"], q: pc.f64["N", "N"], TSTEPS: int):
    DX = 1.0 / N
    DY = 1.0 / N
    DT = 1.0 / TSTEPS
    B1 = 2.0
    B2 = 1.0
    mul1 = B1 * DT / (DX * DX)
    mul2 = B2 * DT / (DY * DY)
    a = -mul1 / 2.0
    b = 1.0 + mul1
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d
    for t in range(TSTEPS):
        # column sweep: Thomas algorithm along the first index of v, one system per column i
        for i in range(1, N - 1):
            v[0, i] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = v[0, i]
            for j in range(1, N - 1):
                p[i, j] = -c / (a * p[i, j - 1] + b)
                q[i, j] = (-d * u[j, i - 1] + (1.0 + 2.0 * d) * u[j, i] - f * u[j, i + 1]
                           - a * q[i, j - 1]) / (a * p[i, j - 1] + b)
            v[N - 1, i] = 1.0
            for jj in range(1, N - 1):  # back substitution, j = N - 1 - jj runs downwards
                v[N - 1 - jj, i] = p[i, N - 1 - jj] * v[N - jj, i] + q[i, N - 1 - jj]
        # row sweep: the same along the second index of u, one system per row i
        for i in range(1, N - 1):
            u[i, 0] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = u[i, 0]
            for j in range(1, N - 1):
                p[i, j] = -f / (d * p[i, j - 1] + e)
                q[i, j] = (-a * v[i - 1, j] + (1.0 + 2.0 * a) * v[i, j] - c * v[i + 1, j]
                           - d * q[i, j - 1]) / (d * p[i, j - 1] + e)
            u[i, N - 1] = 1.0
            for jj in range(1, N - 1):
                u[i, N - 1 - jj] = p[i, N - 1 - jj] * u[i, N - jj] + q[i, N - 1 - jj]


def _init_adi(TSTEPS, N):
    return dict(
        u=fill((N, N), lambda i, j: (i + N - j) / N),
        v=np.zeros((N, N)), p=np.zeros((N, N)), q=np.zeros((N, N)),
        TSTEPS=TSTEPS,
    )


# --- fdtd-2d: 2-D finite-difference time-domain (Yee) update of E_x, E_y, H_z ---------------------
def fdtd_2d(ex: pc.f64["NX", "NY"], ey: pc.f64["NX", "NY"], hz: pc.f64["NX", "NY"], fict: pc.f64["TMAX"]):
    for t in range(TMAX):
        for j in range(NY):
            ey[0, j] = fict[t]
        for i in range(1, NX):
            for j in range(NY):
                ey[i, j] = ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])
        for i in range(NX):
            for j in range(1, NY):
                ex[i, j] = ex[i, j] - 0.5 * (hz[i, j] - hz[i, j - 1])
        for i in range(NX - 1):
            for j in range(NY - 1):
                hz[i, j] = hz[i, j] - 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])


def _init_fdtd_2d(TMAX, NX, NY):
    return dict(
        ex=fill((NX, NY), lambda i, j: i * (j + 1) / NX),
        ey=fill((NX, NY), lambda i, j: i * (j + 2) / NY),
        hz=fill((NX, NY), lambda i, j: i * (j + 3) / NX),
        fict=fill((TMAX,), lambda t: t),
    )


# --- heat-3d: explicit 7-point heat equation, ping-pong between A and B ---------------------------
def heat_3d(A: pc.f64["N", "N", "N"], B: pc.f64["N", "N", "N"], TSTEPS: int):
    for t in range(TSTEPS):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                for k in range(1, N - 1):
                    B[i, j, k] = (0.125 * (A[i + 1, j, k] - 2.0 * A[i, j, k] + A[i - 1, j, k])
                                  + 0.125 * (A[i, j + 1, k] - 2.0 * A[i, j, k] + A[i, j - 1, k])
                                  + 0.125 * (A[i, j, k + 1] - 2.0 * A[i, j, k] + A[i, j, k - 1])
                                  + A[i, j, k])
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                for k in range(1, N - 1):
                    A[i, j, k] = (0.125 * (B[i + 1, j, k] - 2.0 * B[i, j, k] + B[i - 1, j, k])
                                  + 0.125 * (B[i, j + 1, k] - 2.0 * B[i, j, k] + B[i, j - 1, k])
                                  + 0.125 * (B[i, j, k + 1] - 2.0 * B[i, j, k] + B[i, j, k - 1])
                                  + B[i, j, k])


def _init_heat_3d(TSTEPS, N):
    grid = fill((N, N, N), lambda i, j, k: (i + j + (N - k)) * 10.0 / N)
    return dict(A=grid, B=grid.copy(), TSTEPS=TSTEPS)


# --- jacobi-1d: 3-point averaging, ping-pong ------------------------------------------------------
def jacobi_1d(A: pc.f64["N"], B: pc.f64["N"], TSTEPS: int):
    for t in range(TSTEPS):
        for i in range(1, N - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, N - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])


def _init_jacobi_1d(TSTEPS, N):
    return dict(A=fill((N,), lambda i: (i + 2.0) / N), B=fill((N,), lambda i: (i + 3.0) / N), TSTEPS=TSTEPS)


# --- jacobi-2d: 5-point averaging, ping-pong ------------------------------------------------------
def jacobi_2d(A: pc.f64["N", "N"], B: pc.f64["N", "N"], TSTEPS: int):
    for t in range(TSTEPS):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])


def _init_jacobi_2d(TSTEPS, N):
    return dict(
        A=fill((N, N), lambda i, j: (i * (j + 2) + 2.0) / N),
        B=fill((N, N), lambda i, j: (i * (j + 3) + 3.0) / N),
        TSTEPS=TSTEPS,
    )


# --- seidel-2d: 9-point Gauss-Seidel sweep, in place ----------------------------------------------
def seidel_2d(A: pc.f64["N", "N"], TSTEPS: int):
    for t in range(TSTEPS):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1]
                           + A[i, j - 1] + A[i, j] + A[i, j + 1]
                           + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0


def _init_seidel_2d(TSTEPS, N):
    return dict(A=fill((N, N), lambda i, j: (i * (j + 2) + 2.0) / N), TSTEPS=TSTEPS)


KERNELS = [
    polybench_kernel("adi", adi, _init_adi, presets(
        "TSTEPS N", (20, 20), (40, 60), (100, 200), (500, 1000), (1000, 2000))),
    polybench_kernel("fdtd-2d", fdtd_2d, _init_fdtd_2d, presets(
        "TMAX NX NY", (20, 20, 30), (40, 60, 80), (100, 200, 240), (500, 1000, 1200), (1000, 2000, 2600))),
    polybench_kernel("heat-3d", heat_3d, _init_heat_3d, presets(
        "TSTEPS N", (20, 10), (40, 20), (100, 40), (500, 120), (1000, 200))),
    polybench_kernel("jacobi-1d", jacobi_1d, _init_jacobi_1d, presets(
        "TSTEPS N", (20, 30), (40, 120), (100, 400), (500, 2000), (1000, 4000))),
    polybench_kernel("jacobi-2d", jacobi_2d, _init_jacobi_2d, presets(
        "TSTEPS N", (20, 30), (40, 90), (100, 250), (500, 1300), (1000, 2800))),
    polybench_kernel("seidel-2d", seidel_2d, _init_seidel_2d, presets(
        "TSTEPS N", (20, 40), (40, 120), (100, 400), (500, 2000), (1000, 4000))),
]
