"""PolyBench datamining: correlation and covariance of N observations of M attributes.

`data` is N x M (a row per observation).  The inputs differ from PolyBench's own `i*j/M + i`,
which makes every column a multiple of the row index and so every correlation exactly 1; a modular
pattern gives columns that are genuinely different.
"""

import math

import numpy as np

from ._common import fill, pc, polybench_kernel, presets


# --- correlation: Pearson correlation matrix of the columns ---------------------------------------
def correlation(
    data: pc.f64["N", "M"], corr: pc.f64["M", "M"], mean: pc.f64["M"], stddev: pc.f64["M"]
):
    eps = 0.1
    float_n = float(N)
    for j in range(M):
        mean[j] = 0.0
        for i in range(N):
            mean[j] += data[i, j]
        mean[j] /= float_n
    for j in range(M):
        stddev[j] = 0.0
        for i in range(N):
            stddev[j] += (data[i, j] - mean[j]) * (data[i, j] - mean[j])
        stddev[j] /= float_n
        stddev[j] = math.sqrt(stddev[j])
        # a (near-)constant column would divide by ~0: treat its spread as 1
        stddev[j] = 1.0 if stddev[j] <= eps else stddev[j]
    for i in range(N):
        for j in range(M):
            data[i, j] -= mean[j]
            data[i, j] /= math.sqrt(float_n) * stddev[j]
    for i in range(M - 1):
        corr[i, i] = 1.0
        for j in range(i + 1, M):
            corr[i, j] = 0.0
            for k in range(N):
                corr[i, j] += data[k, i] * data[k, j]
            corr[j, i] = corr[i, j]
    corr[M - 1, M - 1] = 1.0


# --- covariance: sample covariance matrix of the columns ------------------------------------------
def covariance(data: pc.f64["N", "M"], cov: pc.f64["M", "M"], mean: pc.f64["M"]):
    float_n = float(N)
    for j in range(M):
        mean[j] = 0.0
        for i in range(N):
            mean[j] += data[i, j]
        mean[j] /= float_n
    for i in range(N):
        for j in range(M):
            data[i, j] -= mean[j]
    for i in range(M):
        for j in range(i, M):
            cov[i, j] = 0.0
            for k in range(N):
                cov[i, j] += data[k, i] * data[k, j]
            cov[i, j] /= float_n - 1.0
            cov[j, i] = cov[i, j]


def _data(M, N):
    return fill((N, M), lambda i, j: ((i * (j + 1) + 3 * j) % N) / N)


def _init_correlation(M, N):
    return dict(data=_data(M, N), corr=np.zeros((M, M)), mean=np.zeros(M), stddev=np.zeros(M))


def _init_covariance(M, N):
    return dict(data=_data(M, N), cov=np.zeros((M, M)), mean=np.zeros(M))


_MN = presets("M N", (28, 32), (80, 100), (240, 260), (1200, 1400), (2600, 3000))

KERNELS = [
    polybench_kernel("correlation", correlation, _init_correlation, _MN),
    polybench_kernel("covariance", covariance, _init_covariance, _MN),
]
