"""CPU benchmarks: polyc `schedule="auto"` against numpy/OpenBLAS, PyTorch eager and
`torch.compile` (when PyTorch is importable) and the same loops as naive C (polyc's source-order
schedule at `-O3 -march=native`).

    python -m benchmarks.cpu            # everything, 1 and 2 threads
    python -m benchmarks.cpu --quick    # a short run: 1024^3 matmuls and the small benchmarks
    python -m benchmarks.cpu --only matmul --threads 2
    python -m benchmarks.cpu --no-compile   # without torch.compile (saves its compile time)

Every contender runs in its own worker process, interleaved round by round (see `_harness`).
Before timing, each polyc result is compared with numpy's.  The table gives median times and
ratios: `vs BLAS` is OpenBLAS time / polyc-auto time (1.0 = as fast as OpenBLAS), `vs naive` is
naive time / auto time, `vs compile` is torch.compile time / auto time (default inductor backend,
compiled in the worker's setup, outside timing; a contender that cannot compile here is reported
FAILED with its reason and the table still prints).  Target (reported, not asserted): matmul 1024^3 float32 at 2 threads >=
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
    "matmul 128 f32": ("kernels.linalg", "matmul", dict(I=128, K=128, J=128), "f32"),
    "matmul 256 f32": ("kernels.linalg", "matmul", dict(I=256, K=256, J=256), "f32"),
    "matmul 512 f32": ("kernels.linalg", "matmul", dict(I=512, K=512, J=512), "f32"),
    "matmul 768 f32": ("kernels.linalg", "matmul", dict(I=768, K=768, J=768), "f32"),
    "matmul skinny 4096x64x4096 f32": ("kernels.linalg", "matmul", dict(I=4096, K=64, J=4096), "f32"),
    "matmul skinny 64x4096x4096 f32": ("kernels.linalg", "matmul", dict(I=64, K=4096, J=4096), "f32"),
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


def _inputs(bench: str, small: bool = False) -> tuple:
    """The library kernel, its inputs and dtype; `small`: at the kernel's `small` sizes (a smoke test
    of the machinery, no measurement)."""
    module, name, sizes, dtype = BENCHMARKS[bench]
    lk = _library_kernel(module, name)
    if small:
        sizes = lk.sizes["small"]
    inputs = lk.make_inputs(sizes, dtype, np.random.default_rng(0))
    return lk, inputs, dtype


def _threads() -> int:
    return int(os.environ.get("OMP_NUM_THREADS", "1"))


# -- worker setups ------------------------------------------------------------------------------

def setup_polyc(bench: str, schedule: str, small: bool = False) -> Dict[str, Any]:
    import polyc as pc
    lk, inputs, _ = _inputs(bench, small)
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


def setup_numpy(bench: str, small: bool = False) -> Any:
    _, name, sizes, _ = BENCHMARKS[bench]
    lk, inputs, _ = _inputs(bench, small)
    if name in ("matmul", "batched_matmul"):
        a, b = inputs["A"], inputs["B"]
        out = np.matmul(a, b)
        return lambda: np.matmul(a, b, out=out)
    if name == "matvec":
        a, x = inputs["A"], inputs["x"]
        out = a @ x
        return lambda: np.matmul(a, x, out=out)
    return lambda: lk.reference(**inputs)  # conv2d (im2col einsum on BLAS), softmax, layernorm


def _torch_fn(name: str, inputs: Dict[str, Any]):
    """The PyTorch formulation of library kernel `name`, a function of its array inputs by name."""
    import torch
    F = torch.nn.functional
    if name == "layernorm":
        eps = float(inputs["eps"])
        return lambda X, gamma, beta: F.layer_norm(X, (X.shape[1],), gamma, beta, eps=eps)
    return {
        "matmul": lambda A, B: torch.matmul(A, B),
        "batched_matmul": lambda A, B: torch.matmul(A, B),
        "matvec": lambda A, x: torch.mv(A, x),
        "row_sum": lambda A: A.sum(dim=1),
        "row_max": lambda A: A.amax(dim=1),
        "conv2d": lambda X, K: F.conv2d(X, K),
        "softmax": lambda X: torch.softmax(X, dim=1),
    }[name]


def setup_torch(bench: str, compiled: bool = False, small: bool = False) -> Any:
    """PyTorch eager, or `torch.compile` (inductor, compiled here) when `compiled`."""
    import torch
    torch.set_num_threads(_threads())
    _, name, sizes, _ = BENCHMARKS[bench]
    lk, inputs, _ = _inputs(bench, small)
    t = {k: torch.from_numpy(v) for k, v in inputs.items() if isinstance(v, np.ndarray)}
    if name in ("matmul", "batched_matmul") and not compiled:  # eager into a preallocated output
        with torch.no_grad():
            out = torch.matmul(t["A"], t["B"])
        return lambda: torch.matmul(t["A"], t["B"], out=out)
    return H.torch_inference(_torch_fn(name, inputs), t, compiled=compiled)


#: the contenders whose times the table shows, in its column order
TIMED = ("polyc-ordered", "numpy", "torch", "torch.compile", "naive-C")
#: ratio columns: (header, contender) -- contender time / polyc-auto time
RATIOS = (("vs BLAS", "numpy"), ("vs BLAS[CT]", "numpy["), ("vs torch", "torch"), ("vs compile", "torch.compile"),
          ("vs naive", "naive-C"), ("vs ordered", "polyc-ordered"))
HEADER = ["benchmark", "thr", "polyc auto", "ordered", "numpy", "torch", "torch.compile", "naive C"] + \
    [h for h, _ in RATIOS] + ["max err"]


def table_row(bench: str, threads: int, results: List[H.Result]) -> list:
    """One table row from one benchmark's results (see HEADER)."""
    by = {r.name: r for r in results}
    auto = by.get("polyc-auto")
    err = auto.info.get("max_rel_err") if auto is not None and isinstance(auto.info, dict) else None
    row: list = [bench, threads, H.time_cell(auto)] + [H.time_cell(by.get(nm)) for nm in TIMED]
    for _, nm in RATIOS:
        peer = by.get(nm) if not nm.endswith("[") else next((r for n, r in by.items() if n.startswith(nm)), None)
        row.append(H.ratio(auto, peer) if auto is not None and peer is not None else float("nan"))
    row.append(f"{err:.1e}" if err is not None else "-")
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1024^3 matmuls and the small benchmarks, 3 rounds")
    ap.add_argument("--only", default="", help="run benchmarks whose name contains this text (comma-separated: any)")
    ap.add_argument("--ordered", action="store_true",
                    help="also time schedule='auto' with reassociate=False (reductions in written order)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--naive-all", action="store_true", help="also time naive C on the 2048^3 matmuls")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--small", action="store_true",
                    help="every benchmark at its kernel's small sizes: checks the machinery, measures nothing")
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
          + (f"; preloaded {', '.join(loaded)}" if loaded else "")
          + ("; SMALL SIZES (a check of the machinery, not a measurement)" if args.small else ""))

    all_results: Dict[str, List[H.Result]] = {}
    rows = []
    for bench in names:
        for t in threads:
            env = H.thread_env(t)
            kw = dict(bench=bench, small=True) if args.small else dict(bench=bench)
            cs = [H.Contender("polyc-auto", "benchmarks.cpu:setup_polyc", dict(kw, schedule="auto"), env, bench)]
            if args.ordered:
                cs.append(H.Contender("polyc-ordered", "benchmarks.cpu:setup_polyc",
                                      dict(kw, schedule="auto-ordered"), env, bench))
            for nm, e in H.openblas_variants("numpy", env):
                cs.append(H.Contender(nm, "benchmarks.cpu:setup_numpy", kw, e, bench))
            if have_torch:
                cs.append(H.Contender("torch", "benchmarks.cpu:setup_torch", kw, env, bench))
                if not args.no_compile:
                    cs.append(H.Contender("torch.compile", "benchmarks.cpu:setup_torch", dict(kw, compiled=True),
                                          env, bench))
            if bench not in SLOW_NAIVE or args.naive_all:
                cs.append(H.Contender("naive-C", "benchmarks.cpu:setup_polyc", dict(kw, schedule="naive"),
                                      env, bench))
            res = H.measure(cs, rounds=rounds, min_sample_s=0.1 if args.quick else 0.3, max_calls=20,
                            label=f"{bench} {t}t")
            all_results[f"{bench} / {t}t"] = res
            for r in res:
                if not r.ok:
                    print(f"  {bench} {t}t {r.name} FAILED: {(r.error or '').strip().splitlines()[0]}")
            rows.append(table_row(bench, t, res))
    header = HEADER
    print(H.format_table(header, rows))
    target = [r for r in rows if r[0] == "matmul 1024 f32" and r[1] == 2]
    if target:
        vs_blas = target[0][header.index("vs BLAS")]
        print(f"matmul 1024^3 f32, 2 threads: polyc auto at {vs_blas:.2f}x OpenBLAS speed (target >= 0.7x)")
    path = H.write_results("cpu", {"threads": threads, "rounds": rounds, "table": {"header": header, "rows": rows},
                                   "results": all_results})
    print(f"results: {os.path.relpath(path, H.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
