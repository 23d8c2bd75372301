"""Time the SGEMM variants of sgemm_variants.cu against cuBLAS (CuPy, TF32 off) on a lent GPU.

    PYTHONPATH=$PWD python3 benchmarks/gpu/experiments/sgemm_variants.py [N ...]

Prints, per size and variant: relative error against cuBLAS, median ms of interleaved rounds
(CUDA events) and the ratio cuBLAS time / variant time.  Inputs are fresh random data per size;
the output is poisoned (NaN) before each checked run so unwritten elements show."""
import os
import statistics
import sys

import cupy as cp
import numpy as np

from benchmarks.gpu.verify_and_bench import Timer

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = open(os.path.join(HERE, "sgemm_variants.cu")).read()
NAMES = ["v0", "v1", "v2", "v3", "v4"]


def modules():
    out = {}
    for minb in (2, 1):
        mod = cp.RawModule(code=SRC, backend="nvcc", options=("-O3", "-arch=sm_90", f"-DMINB={minb}"))
        for n in NAMES:
            out[f"{n}/{minb}"] = mod.get_function(n)
    return out


def main():
    sizes = [int(s) for s in sys.argv[1:]] or [4096, 2048, 4000]
    fns = modules()
    timer = Timer("cupy")
    for n in sizes:
        rng = np.random.default_rng(n)
        A = cp.asarray(rng.standard_normal((n, n), dtype=np.float32))
        B = cp.asarray(rng.standard_normal((n, n), dtype=np.float32))
        C = cp.empty((n, n), cp.float32)
        ref = cp.matmul(A.astype(cp.float64), B.astype(cp.float64))
        grid = ((n + 127) // 128, (n + 127) // 128)
        args = (C, A, B, np.int64(n), np.int64(n), np.int64(n))
        contenders = {"cublas": lambda: cp.matmul(A, B, out=C)}
        for name, f in fns.items():
            contenders[name] = (lambda f=f: f(grid, (256,), args))
        errs = {}
        for name, fn in contenders.items():
            C.fill(np.nan)
            fn()
            cp.cuda.Device().synchronize()
            errs[name] = float(cp.linalg.norm(C - ref) / cp.linalg.norm(ref))
        samples = {k: [] for k in contenders}
        names = list(contenders)
        for r in range(12):
            for name in names[r % len(names):] + names[:r % len(names)]:
                samples[name].append(timer.time_ms(contenders[name], 3))
        med = {k: statistics.median(v) for k, v in samples.items()}
        for name in names:
            print(f"N={n:5d} {name:<8} err {errs[name]:.1e}  {med[name]:8.3f} ms  "
                  f"{2 * n ** 3 / med[name] / 1e9:6.1f} TFLOP/s  ratio {med['cublas'] / med[name]:.3f}", flush=True)


if __name__ == "__main__":
    main()
