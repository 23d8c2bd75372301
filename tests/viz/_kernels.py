"""Small kernels and hand-made schedules shared by the viz tests.

Tiled and skewed schedules are written here directly as isl maps (not through the schedule
primitives) so that the views are tested on known shapes, whatever the primitives name things.
"""
from dataclasses import replace

import polyc as pc
from polyc.schedule.schedule import Dim


def matmul():
    return pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")


@pc.kernel
def jacobi_1d(A: pc.f64["N"], B: pc.f64["N"], T: int):
    for t in range(T):
        for i in range(1, N - 1):  # noqa: F821 - N is a size symbol
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, N - 1):  # noqa: F821
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])


@pc.kernel
def wave(A: pc.f64["N", "N"]):
    for i in range(1, N):  # noqa: F821
        for j in range(1, N):  # noqa: F821
            A[i, j] = A[i - 1, j] + A[i, j - 1]


def scale():
    return pc.kernel("B[i, j] = A[i, j] * 2.0", name="scale", A=pc.f64["N", "M"], B=pc.f64["N", "M"])


def tiled(kernel, size: int):
    """`kernel`'s single 2-D statement tiled by size x size: [i_o, j_o, i, j]."""
    s = kernel.schedule()
    (name, text), = s.map_texts.items()
    params = text.split("->")[0].strip()
    its = kernel.program.statement(name).iterators
    a, b = its
    maps = ((name, f"{params} -> {{ {name}[{a}, {b}] -> [0, floor({a}/{size}), 0, floor({b}/{size}), 0, "
                   f"{a}, 0, {b}, 0] }}"),)
    dims = (Dim(None), Dim(f"{a}_o", origin=a), Dim(None), Dim(f"{b}_o", origin=b), Dim(None),
            Dim(a, origin=a), Dim(None), Dim(b, origin=b), Dim(None))
    return replace(s, maps=maps, dims=dims, history=(f"tile({a}={size}, {b}={size})",))


def skewed_wave():
    """`wave` skewed into wavefronts: [w = i + j, i]."""
    s = wave.schedule()
    (name, text), = s.map_texts.items()
    params = text.split("->")[0].strip()
    maps = ((name, f"{params} -> {{ {name}[i, j] -> [0, i + j, 0, i, 0] }}"),)
    dims = (Dim(None), Dim("w"), Dim(None), Dim("i", origin="i"), Dim(None))
    return replace(s, maps=maps, dims=dims, history=("skew",))


@pc.kernel
def seidel_1d(A: pc.f64["N"], T: int):
    for t in range(T):
        for i in range(1, N - 1):  # noqa: F821
            A[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0
