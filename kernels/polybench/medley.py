"""PolyBench medley: deriche, floyd-warshall, nussinov.

Each keeps PolyBench/C's data type: floyd-warshall's path lengths and nussinov's scores are `int`
(int32), nussinov's bases a `char` (here uint8, the 8-bit type polyc has; bases are 0..3), so
the compiled kernels do the integer work PolyBench times and must agree with the reference exactly.
"""

import math

import numpy as np

from ._common import fill, pc, polybench_kernel, presets


# --- deriche: recursive (IIR) Deriche edge-detection filter, causal + anti-causal, rows then columns ---
def deriche(
    imgIn: pc.f32["W", "H"], imgOut: pc.f32["W", "H"], y1: pc.f32["W", "H"], y2: pc.f32["W", "H"],
    alpha: float,
):
    # The filter coefficients, with PolyBench's normalisation k.
    k = ((1.0 - math.exp(-alpha)) * (1.0 - math.exp(-alpha))
         / (1.0 + 2.0 * alpha * math.exp(-alpha) - math.exp(2.0 * alpha)))
    a1 = k
    a2 = k * math.exp(-alpha) * (alpha - 1.0)
    a3 = k * math.exp(-alpha) * (alpha + 1.0)
    a4 = -k * math.exp(-2.0 * alpha)
    b1 = math.pow(2.0, -alpha)
    b2 = -math.exp(-2.0 * alpha)
    gain = 1.0  # PolyBench's c1 = c2 (named apart from generated loop counters c0, c1, ...)
    # PolyBench carries the recurrences in scalars (xm1, ym1, ym2, ...); here each is read back
    # from the arrays at an affine offset, and the first two points of every line, whose missing
    # neighbours are zero, are separate guarded statements.  No scalar carries a value across
    # iterations, and the kernel is defined for every W, H >= 1.
    # Horizontal pass, causal (left to right) into y1 ...
    for i in range(W):
        for j in range(H):
            if j == 0:
                y1[i, j] = a1 * imgIn[i, j]
            if j == 1:
                y1[i, j] = a1 * imgIn[i, j] + a2 * imgIn[i, j - 1] + b1 * y1[i, j - 1]
            if j >= 2:
                y1[i, j] = (a1 * imgIn[i, j] + a2 * imgIn[i, j - 1]
                            + b1 * y1[i, j - 1] + b2 * y1[i, j - 2])
    # ... and anti-causal (right to left: j = H - 1 - jj) into y2.
    for i in range(W):
        for jj in range(H):
            if jj == 0:
                y2[i, H - 1] = 0.0
            if jj == 1:
                y2[i, H - 2] = a3 * imgIn[i, H - 1]
            if jj >= 2:
                y2[i, H - 1 - jj] = (a3 * imgIn[i, H - jj] + a4 * imgIn[i, H + 1 - jj]
                                     + b1 * y2[i, H - jj] + b2 * y2[i, H + 1 - jj])
    for i in range(W):
        for j in range(H):
            imgOut[i, j] = gain * (y1[i, j] + y2[i, j])
    # Vertical pass over the horizontal result, causal (top to bottom) ...
    for j in range(H):
        for i in range(W):
            if i == 0:
                y1[i, j] = a1 * imgOut[i, j]
            if i == 1:
                y1[i, j] = a1 * imgOut[i, j] + a2 * imgOut[i - 1, j] + b1 * y1[i - 1, j]
            if i >= 2:
                y1[i, j] = (a1 * imgOut[i, j] + a2 * imgOut[i - 1, j]
                            + b1 * y1[i - 1, j] + b2 * y1[i - 2, j])
    # ... and anti-causal (bottom to top: i = W - 1 - ii).
    for j in range(H):
        for ii in range(W):
            if ii == 0:
                y2[W - 1, j] = 0.0
            if ii == 1:
                y2[W - 2, j] = a3 * imgOut[W - 1, j]
            if ii >= 2:
                y2[W - 1 - ii, j] = (a3 * imgOut[W - ii, j] + a4 * imgOut[W + 1 - ii, j]
                                     + b1 * y2[W - ii, j] + b2 * y2[W + 1 - ii, j])
    for i in range(W):
        for j in range(H):
            imgOut[i, j] = gain * (y1[i, j] + y2[i, j])


def _init_deriche(W, H):
    return dict(
        imgIn=fill((W, H), lambda i, j: ((313 * i + 991 * j) % 65536) / 65535.0, "f32"),
        imgOut=np.zeros((W, H), np.float32), y1=np.zeros((W, H), np.float32),
        y2=np.zeros((W, H), np.float32),
        alpha=0.25,
    )


# --- floyd-warshall: all-pairs shortest paths, relaxing through every intermediate vertex k -------
def floyd_warshall(paths: pc.i32["N", "N"]):
    for k in range(N):
        for i in range(N):
            for j in range(N):
                paths[i, j] = min(paths[i, j], paths[i, k] + paths[k, j])


def _init_floyd_warshall(N):
    # edge weights 1..13; about half of the pairs have no edge (weight 999)
    no_edge = lambda i, j: ((i + j) % 3 == 0) | ((i * j) % 11 == 5) | ((i + 2 * j) % 5 == 1)  # noqa: E731
    weight = lambda i, j: (i * j + i + 3 * j) % 13 + 1  # noqa: E731
    return dict(paths=fill((N, N), lambda i, j: np.where(no_edge(i, j), 999, weight(i, j)), "i32"))


# --- nussinov: RNA secondary structure, maximum number of nested base pairs (dynamic programming) ---
def nussinov(seq: pc.u8["N"], table: pc.i32["N", "N"]):
    # i = N - 1 - ii runs downwards, j upwards from i + 1; table[i, j] is the best score of seq[i..j].
    for ii in range(N):
        for j in range(N - ii, N):
            # j - 1 >= 0 and i + 1 < N always hold here, so PolyBench's guards on them vanish.
            table[N - 1 - ii, j] = max(table[N - 1 - ii, j], table[N - 1 - ii, j - 1])
            table[N - 1 - ii, j] = max(table[N - 1 - ii, j], table[N - ii, j])
            if j >= N + 1 - ii:  # i < j - 1: i and j may pair (bases b1, b2 pair iff b1 + b2 == 3)
                table[N - 1 - ii, j] = max(table[N - 1 - ii, j], table[N - ii, j - 1]
                                           + (1 if seq[N - 1 - ii] + seq[j] == 3 else 0))
            if j <= N - ii:  # j == i + 1: neighbours never pair
                table[N - 1 - ii, j] = max(table[N - 1 - ii, j], table[N - ii, j - 1])
            for k in range(N - ii, j):
                table[N - 1 - ii, j] = max(table[N - 1 - ii, j], table[N - 1 - ii, k] + table[k + 1, j])


def _init_nussinov(N):
    # bases 0..3 (A, C, G, U as PolyBench encodes them); the DP table starts at zero
    return dict(seq=fill((N,), lambda i: (i * i + 3 * i + (i // 5)) % 4, "u8"),
                table=np.zeros((N, N), dtype=np.int32))


KERNELS = [
    polybench_kernel("deriche", deriche, _init_deriche, presets(
        "W H", (64, 64), (192, 128), (720, 480), (4096, 2160), (7680, 4320)),
        dtype="f32", tolerance={"f32": (1e-4, 1e-5)}),
    polybench_kernel("floyd-warshall", floyd_warshall, _init_floyd_warshall, presets(
        "N", (60,), (180,), (500,), (2800,), (5600,)), dtype="i32"),
    polybench_kernel("nussinov", nussinov, _init_nussinov, presets(
        "N", (60,), (180,), (500,), (2500,), (5500,)), dtype="i32"),
]
