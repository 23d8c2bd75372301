"""Operator programs side by side: polyc `@pc.program` against numpy, PyTorch eager and
`torch.compile` (which fuses too), 1 and 2 threads, each contender in its own process
(`benchmarks._harness`), medians over interleaved rounds; plus the peak memory of intermediates,
planned vs unfused, from the program's memory plan.

    python -m benchmarks.programs [--quick] [--threads 1,2] [--rounds 3] [--only attention]
"""
from __future__ import annotations

import argparse
import math
from typing import Any, Dict, List

import numpy as np

from benchmarks import _harness as H

#: name -> (builder in kernels.programs, sizes, quick sizes)
BENCHMARKS = {
    "attention": ("attention", dict(S=1024, D=64), dict(S=256, D=64)),
    "mlp": ("mlp", dict(B=4096, D=1024, H=4096), dict(B=512, D=256, H=1024)),
    "ln_residual_gelu": ("ln_residual_gelu", dict(M=4096, N=1024), dict(M=512, N=1024)),
}


def _threads() -> int:
    import os
    return int(os.environ.get("OMP_NUM_THREADS", "1"))


def _inputs(bench: str, quick: bool, **options):
    from kernels import programs as P
    builder, sizes, small = BENCHMARKS[bench]
    prog = getattr(P, builder)(**options)
    return prog, P.inputs(prog, small if quick else sizes)


def _gelu_np(x):
    c = np.float32(0.7978845608028654)
    return np.float32(0.5) * x * (1 + np.tanh(c * (x + np.float32(0.044715) * x * x * x)))


def setup_polyc(bench: str, quick: bool = False, vendor: Any = "auto") -> Any:
    prog, inputs = _inputs(bench, quick, vendor=vendor)
    out = prog(**inputs)
    # numpy's composition, not prog.reference: the Einstein interpreter's index grids would need
    # 128 GiB for the MLP's 4096 x 4096 x 1024 product (tests compare with prog.reference)
    ref = setup_numpy(bench, quick)()

    def check():
        err = float(np.max(np.abs(out - ref) / (1 + np.abs(ref))))
        m = prog.memory
        return {"max_rel_err": err, "planned_peak": m.planned_peak, "unfused_peak": m.unfused_peak,
                "plan": prog.explain()}

    return {"run": lambda: prog(**inputs), "check": check}


def setup_numpy(bench: str, quick: bool = False) -> Any:
    _, a = _inputs(bench, quick)
    if bench == "attention":
        def run():
            s = (a["Q"] @ a["K"].T) * np.float32(0.125)
            e = np.exp(s - s.max(axis=1, keepdims=True))
            return (e / e.sum(axis=1, keepdims=True)) @ a["V"]
        return run
    if bench == "mlp":
        return lambda: _gelu_np(a["x"] @ a["w1"] + a["b1"]) @ a["w2"]

    def ln():
        x = a["x"] + a["r"]
        mean = x.mean(axis=1, keepdims=True)
        xc = x - mean
        var = (xc * xc).mean(axis=1, keepdims=True)
        return _gelu_np(xc / np.sqrt(var + np.float32(1e-5)) * a["g"] + a["b"])
    return ln


def _torch_fn(bench: str):
    import torch
    F = torch.nn.functional
    if bench == "attention":
        return lambda Q, K, V: torch.softmax((Q @ K.T) * 0.125, dim=1) @ V
    if bench == "mlp":
        return lambda x, w1, b1, w2: F.gelu(x @ w1 + b1, approximate="tanh") @ w2
    return lambda x, r, g, b: F.gelu(F.layer_norm(x + r, (x.shape[1],), g, b, eps=1e-5), approximate="tanh")


def setup_torch(bench: str, quick: bool = False, compiled: bool = False) -> Any:
    import torch
    torch.set_num_threads(_threads())
    _, a = _inputs(bench, quick)
    t = {k: torch.from_numpy(v) for k, v in a.items()}
    return H.torch_inference(_torch_fn(bench), t, compiled=compiled)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, 3 rounds")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",") if t]
    rounds = args.rounds or (3 if args.quick else 5)
    names = [n for n in BENCHMARKS if not args.only or any(p in n for p in args.only.split(","))]
    print(f"operator programs, threads {threads}, {rounds} rounds{' (quick sizes)' if args.quick else ''}")
    rows: List[List[Any]] = []
    memory: Dict[str, Any] = {}
    failures: List[str] = []
    payload: Dict[str, Any] = {"machine": H.machine_info(), "results": {}}
    for bench in names:
        for t in threads:
            env = H.thread_env(t)
            kw = dict(bench=bench, quick=args.quick)
            cs = [H.Contender("polyc", "benchmarks.programs:setup_polyc", kw, env, bench),
                  H.Contender("polyc+BLAS", "benchmarks.programs:setup_polyc", dict(kw, vendor=True), env, bench),
                  H.Contender("numpy", "benchmarks.programs:setup_numpy", kw, env, bench),
                  H.Contender("torch", "benchmarks.programs:setup_torch", kw, env, bench)]
            if not args.no_compile:
                cs.append(H.Contender("torch.compile", "benchmarks.programs:setup_torch",
                                      dict(kw, compiled=True), env, bench))
            res = H.measure(cs, rounds=rounds, min_sample_s=0.2, max_calls=20, label=f"{bench} {t}t", timeout=900)
            payload["results"][f"{bench} / {t}t"] = [H.asdict(r) for r in res]
            by = {r.name: r for r in res}
            for r in res:
                if not r.ok:
                    failures.append(f"{bench} {t}t {r.name}: {(r.error or '').strip().splitlines()[-1][:300]}")
            p = by["polyc"]
            info = p.info if p.ok and isinstance(p.info, dict) else {}
            if info:   # per thread count: the plan depends on it (row blocks run on one thread)
                memory[f"{bench} {t}t"] = info
            pb = by["polyc+BLAS"]
            if pb.ok and isinstance(pb.info, dict):
                memory[f"{bench} {t}t (vendor=True)"] = pb.info
            row = [bench, t] + [H.fmt_time(by[n].median) if n in by and by[n].ok else "-"
                                for n in ("polyc", "polyc+BLAS", "numpy", "torch", "torch.compile")]
            row += [H.ratio(p, by[n]) if n in by else float("nan") for n in ("numpy", "torch", "torch.compile")]
            row.append(f"{info['max_rel_err']:.1e}" if info else "-")
            rows.append(row)
    print(H.format_table(["program", "thr", "polyc", "polyc+BLAS", "numpy", "torch", "torch.compile", "vs numpy", "vs torch",
                          "vs compile", "err"], rows))
    print("\n(ratios: how many times faster polyc (default plan) is; > 1 is faster; polyc+BLAS: every matrix "
          "product bound to BLAS)\n")
    for bench, info in memory.items():
        ratio = info["unfused_peak"] / info["planned_peak"] if info["planned_peak"] else math.inf
        print(f"{bench}: peak intermediates planned {info['planned_peak'] / 2**20:.3f} MiB vs unfused "
              f"{info['unfused_peak'] / 2**20:.3f} MiB ({ratio:.1f}x smaller)")
        print("   " + info["plan"].replace("\n", "\n   "))
    for f in failures:
        print("FAILED", f)
    path = H.write_results("programs", payload)
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
