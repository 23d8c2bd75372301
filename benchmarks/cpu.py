"""CPU benchmarks: polyc `schedule="auto"` against numpy/OpenBLAS, PyTorch (when importable) and
the same loops as naive C (polyc's source-order schedule at `-O3 -march=native`).

    python -m benchmarks.cpu            # everything, 1 and 2 threads
    python -m benchmarks.cpu --quick    # a short run: 1024^3 matmuls and the small benchmarks
    python -m benchmarks.cpu --only matmul --threads 2

Every contender runs in its own worker process, interleaved round by round (see `_harness`).
Before timing, each polyc result is compared with numpy's.  The table gives median times and
ratios: `vs BLAS` is OpenBLAS time / polyc-auto time (1.0 = as fast as OpenBLAS), `vs naive` is
naive time / auto time.  Target (reported, not asserted): matmul 1024^3 float32 at 2 threads >=
0.7x OpenBLAS.  Results go to `benchmarks/results/cpu-<time>.json`.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any, Dict, List

import numpy as np

from . import _harness as H

#: name -> (library module, kernel name, sizes, dtype)
BENCHMARKS: Dict[str, tuple] = {
    "matmul 1024 f32": ("kernels.linalg", "matmul", dict(I=1024, K=1024, J=1024), "f32"),
    "matmul 1024 f64": ("kernels.linalg", "matmul", dict(I=1024, K=1024, J=1024), "f64"),
    "matmul 2048 f32": ("kernels.linalg", "matmul", dict(I=2048, K=2048, J=2048), "f32"),
    "matmul 2048 f64": ("kernels.linalg", "matmul", dict(I=2048, K=2048, J=2048), "f64"),
    "batched matmul 16x256 f32": ("kernels.linalg", "batched_matmul", dict(N=16, I=256, K=256, J=256), "f32"),
    "conv2d 1x64x56x56 k3 f32": ("kernels.nn", "conv2d", dict(N=1, C=64, H=56, W=56, F=64, KH=3, KW=3), "f32"),
    "softmax 4096x4096 f32": ("kernels.nn", "softmax", dict(I=4096, J=4096), "f32"),
    "layernorm 4096x1024 f32": ("kernels.nn", "layernorm", dict(M=4096, N=1024), "f32"),
    "matvec 2048 f32": ("kernels.linalg", "matvec", dict(I=2048, J=2048), "f32"),
    "row sum 4096x4096 f32": ("benchmarks.cpu", "row_sum", dict(I=4096, J=4096), "f32"),
    "row max 4096x4096 f32": ("benchmarks.cpu", "row_max", dict(I=4096, J=4096), "f32"),
}
QUICK = ["matmul 1024 f32", "matmul 1024 f64", "batched matmul 16x256 f32", "conv2d 1x64x56x56 k3 f32",
         "softmax 4096x4096 f32", "layernorm 4096x1024 f32", "matvec 2048 f32", "row sum 4096x4096 f32",
         "row max 4096x4096 f32"]
#: Naive C at these sizes takes many seconds per call; timed only with --naive-all.
SLOW_NAIVE = ("matmul 2048 f32", "matmul 2048 f64")


def _row_reductions() -> list:
    """Row sum and row max (Einstein reductions along the contiguous axis), as library kernels."""
    import polyc as pc
    from kernels import LibraryKernel
    from kernels._core import input_maker
    make = input_maker({"A": lambda s: (s["I"], s["J"])})
    return [LibraryKernel(name="row_sum", kernel=pc.kernel("s[i] +=! A[i, j]", name="row_sum"), make_inputs=make,
                          reference=lambda A: A.sum(axis=1), sizes={"small": dict(I=5, J=37)}),
            LibraryKernel(name="row_max", kernel=pc.kernel("m[i] max=! A[i, j]", name="row_max"), make_inputs=make,
                          reference=lambda A: A.max(axis=1), sizes={"small": dict(I=5, J=37)})]


def _library_kernel(module: str, name: str):
    import importlib
    if module == "benchmarks.cpu":
        return next(k for k in _row_reductions() if k.name == name)
    for k in importlib.import_module(module).KERNELS:
        if k.name == name:
            return k
    raise KeyError(f"{name} in {module}")


def _inputs(bench: str) -> tuple:
    module, name, sizes, dtype = BENCHMARKS[bench]
    lk = _library_kernel(module, name)
    inputs = lk.make_inputs(sizes, dtype, np.random.default_rng(0))
    return lk, inputs, dtype


def _threads() -> int:
    return int(os.environ.get("OMP_NUM_THREADS", "1"))


# -- worker setups ------------------------------------------------------------------------------

def setup_polyc(bench: str, schedule: str) -> Dict[str, Any]:
    import polyc as pc
    lk, inputs, _ = _inputs(bench)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if schedule == "naive":
            f = pc.compile(lk.kernel, schedule=None)
        else:  # "auto", or "auto-ordered": every reduction in its written order (reassociate=False)
            f = pc.compile(lk.kernel, schedule="auto", reassociate=False if schedule == "auto-ordered" else None)
    first = f(**inputs)
    outs = {t.name for t in lk.kernel.program.tensors if t.role == "output"}
    if isinstance(first, dict):
        given = {k: v for k, v in first.items() if k in outs}
    else:
        given = {next(iter(outs)): first} if len(outs) == 1 else {}

    def check() -> Dict[str, Any]:
        expected = lk.expected(inputs)
        got = f(**inputs)
        if isinstance(expected, dict):
            errs = [float(np.max(np.abs(np.asarray(got[k], np.float64) - e) / (1 + np.abs(e))))
                    for k, e in expected.items()]
        else:
            g = got if not isinstance(got, dict) else next(iter(got.values()))
            errs = [float(np.max(np.abs(np.asarray(g, np.float64) - expected) / (1 + np.abs(expected))))]
        return {"max_rel_err": max(errs), "schedule": repr(f.schedule)}

    return {"run": lambda: f(**inputs, **given), "check": check}


def setup_numpy(bench: str) -> Any:
    _, name, sizes, _ = BENCHMARKS[bench]
    lk, inputs, _ = _inputs(bench)
    if name in ("matmul", "batched_matmul"):
        a, b = inputs["A"], inputs["B"]
        out = np.matmul(a, b)
        return lambda: np.matmul(a, b, out=out)
    if name == "matvec":
        a, x = inputs["A"], inputs["x"]
        out = a @ x
        return lambda: np.matmul(a, x, out=out)
    return lambda: lk.reference(**inputs)  # conv2d (im2col einsum on BLAS), softmax, layernorm


def setup_torch(bench: str) -> Any:
    import torch
    torch.set_num_threads(_threads())
    _, name, sizes, _ = BENCHMARKS[bench]
    lk, inputs, _ = _inputs(bench)
    t = {k: torch.from_numpy(v) for k, v in inputs.items() if isinstance(v, np.ndarray)}
    F = torch.nn.functional
    with torch.no_grad():
        if name in ("matmul", "batched_matmul"):
            out = torch.matmul(t["A"], t["B"])
            return lambda: torch.matmul(t["A"], t["B"], out=out)
        if name == "matvec":
            return lambda: torch.mv(t["A"], t["x"])
        if name == "row_sum":
            return lambda: t["A"].sum(dim=1)
        if name == "row_max":
            return lambda: t["A"].amax(dim=1)
        if name == "conv2d":
            return lambda: F.conv2d(t["X"], t["K"])
        if name == "softmax":
            return lambda: torch.softmax(t["X"], dim=1)
        if name == "layernorm":
            n = t["X"].shape[1]
            return lambda: F.layer_norm(t["X"], (n,), t["gamma"], t["beta"], eps=float(inputs["eps"]))
    raise KeyError(name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1024^3 matmuls and the small benchmarks, 3 rounds")
    ap.add_argument("--only", default="", help="run benchmarks whose name contains this text (comma-separated: any)")
    ap.add_argument("--ordered", action="store_true",
                    help="also time schedule='auto' with reassociate=False (reductions in written order)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--naive-all", action="store_true", help="also time naive C on the 2048^3 matmuls")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",") if t]
    rounds = args.rounds or (3 if args.quick else 5)
    names = QUICK if args.quick else list(BENCHMARKS)
    if args.only:
        names = [n for n in names if any(part in n for part in args.only.split(","))]
    loaded = H.preload()
    have_torch = H.torch_available()
    print(f"CPU benchmarks, threads {threads}, {rounds} rounds; PyTorch: {'yes' if have_torch else 'not importable'}"
          + (f"; OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']}" if os.environ.get("OPENBLAS_CORETYPE") else "")
          + (f"; preloaded {', '.join(loaded)}" if loaded else ""))

    all_results: Dict[str, List[H.Result]] = {}
    rows = []
    for bench in names:
        for t in threads:
            env = H.thread_env(t)
            cs = [H.Contender("polyc-auto", "benchmarks.cpu:setup_polyc", dict(bench=bench, schedule="auto"),
                              env, bench)]
            if args.ordered:
                cs.append(H.Contender("polyc-ordered", "benchmarks.cpu:setup_polyc",
                                      dict(bench=bench, schedule="auto-ordered"), env, bench))
            for nm, e in H.openblas_variants("numpy", env):
                cs.append(H.Contender(nm, "benchmarks.cpu:setup_numpy", dict(bench=bench), e, bench))
            if have_torch:
                cs.append(H.Contender("torch", "benchmarks.cpu:setup_torch", dict(bench=bench), env, bench))
            if bench not in SLOW_NAIVE or args.naive_all:
                cs.append(H.Contender("naive-C", "benchmarks.cpu:setup_polyc", dict(bench=bench, schedule="naive"),
                                      env, bench))
            res = H.measure(cs, rounds=rounds, min_sample_s=0.1 if args.quick else 0.3, max_calls=20,
                            label=f"{bench} {t}t")
            all_results[f"{bench} / {t}t"] = res
            by = {r.name: r for r in res}
            for r in res:
                if not r.ok:
                    print(f"  {bench} {t}t {r.name} FAILED: {(r.error or '').strip().splitlines()[0]}")
            auto = by.get("polyc-auto")
            blas = by.get("numpy")
            err = auto.info.get("max_rel_err") if auto is not None and isinstance(auto.info, dict) else None
            row = [bench, t, H.fmt_time(auto.median) if auto else "-"]
            for nm in ("polyc-ordered", "numpy", "torch", "naive-C"):
                r = by.get(nm)
                row.append(H.fmt_time(r.median) if r is not None and r.ok else "-")
            coretype = [r for n, r in by.items() if n.startswith("numpy[")]
            row.append(H.ratio(auto, blas) if auto and blas else float("nan"))
            row.append(H.ratio(auto, coretype[0]) if auto and coretype else float("nan"))
            row.append(H.ratio(auto, by["torch"]) if auto and "torch" in by else float("nan"))
            row.append(H.ratio(auto, by["naive-C"]) if auto and "naive-C" in by else float("nan"))
            row.append(H.ratio(auto, by["polyc-ordered"]) if auto and "polyc-ordered" in by else float("nan"))
            row.append(f"{err:.1e}" if err is not None else "-")
            rows.append(row)
    header = ["benchmark", "thr", "polyc auto", "ordered", "numpy", "torch", "naive C", "vs BLAS", "vs BLAS[CT]",
              "vs torch", "vs naive", "vs ordered", "max err"]
    print(H.format_table(header, rows))
    target = [r for r in rows if r[0] == "matmul 1024 f32" and r[1] == 2]
    if target:
        print(f"matmul 1024^3 f32, 2 threads: polyc auto at {target[0][7]:.2f}x OpenBLAS speed (target >= 0.7x)")
    path = H.write_results("cpu", {"threads": threads, "rounds": rounds, "table": {"header": header, "rows": rows},
                                   "results": all_results})
    print(f"results: {path.relative_to(H.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
