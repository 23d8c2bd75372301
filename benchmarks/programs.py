"""Operator programs side by side: polyc `@pc.program` against numpy, PyTorch eager and
`torch.compile` (which fuses too), 1 and 2 threads, each contender in its own process
(`benchmarks._harness`), medians over interleaved rounds; plus the peak memory of intermediates,
planned vs unfused, from the program's memory plan.

    python -m benchmarks.programs [--quick] [--threads 1,2] [--rounds 3] [--only attention]
    python -m benchmarks.programs --backward     # the backward passes (gradients of every input)

`--backward` times each program's gradient with respect to all its inputs, the forward values
recomputed (the programs take only their inputs and the output's adjoint): `polyc program` is
`prog.grad(...)`, the backward as an operator program (groups, BLAS calls, memory plan);
`polyc kernel` is `pc.grad(prog, ...)` compiled with `schedule="auto"` (one kernel); against
PyTorch's forward and backward (`torch f+b`, eager and `torch.compile`), and its backward alone
on a graph built once (`torch bwd`, reusing what autograd saved).  Ratios: torch time / polyc
program time.
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


def _backward_inputs(bench: str, quick: bool):
    prog, a = _inputs(bench, quick)
    ybar = np.random.default_rng(7).standard_normal(setup_numpy(bench, quick)().shape).astype(np.float32)
    return prog, a, ybar


def setup_polyc_backward(bench: str, quick: bool = False, one_kernel: bool = False) -> Any:
    """The gradient of every input: the backward program, or (`one_kernel`) the traced kernel's
    gradient compiled with "auto"."""
    import polyc as pc
    prog, a, ybar = _backward_inputs(bench, quick)
    wrt = list(prog.inputs)
    if one_kernel:
        f = pc.compile(pc.grad(prog, of="out", wrt=wrt), schedule="auto")
    else:
        f = prog.grad(of="out", wrt=wrt)
    got = f(**a, out_grad=ybar)

    def check():
        info: Dict[str, Any] = {}
        if H.torch_available():
            want = _torch_grads(bench, a, ybar)
            info["max_rel_err"] = max(float(np.max(np.abs(got[f"{x}_grad"] - w)) / (1 + np.max(np.abs(w))))
                                      for x, w in want.items())
        if not one_kernel:
            info.update(planned_peak=f.memory.planned_peak, unfused_peak=f.memory.unfused_peak, plan=f.explain())
        return info

    return {"run": lambda: f(**a, out_grad=ybar), "check": check}


def _torch_grads(bench: str, a: Dict[str, np.ndarray], ybar: np.ndarray) -> Dict[str, np.ndarray]:
    import torch
    t = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in a.items()}
    y = _torch_fn(bench)(**t)
    grads = torch.autograd.grad(y, list(t.values()), torch.tensor(ybar.astype(np.float64)))
    return {k: g.numpy() for k, g in zip(t, grads)}


def setup_torch_backward(bench: str, quick: bool = False, forward: bool = True, compiled: bool = False) -> Any:
    import torch
    torch.set_num_threads(_threads())
    _, a, ybar = _backward_inputs(bench, quick)
    t = {k: torch.tensor(v, requires_grad=True) for k, v in a.items()}
    return H.torch_backward(_torch_fn(bench), t, list(t.values()), torch.tensor(ybar), forward, compiled)


def backward_main(names: List[str], threads: List[int], rounds: int, quick: bool, no_compile: bool) -> int:
    """`--backward`: the table of gradient timings (see the module docstring)."""
    print(f"operator programs, backward (every input's gradient), threads {threads}, {rounds} rounds"
          f"{' (quick sizes)' if quick else ''}")
    rows: List[List[Any]] = []
    plans: Dict[str, Any] = {}
    payload: Dict[str, Any] = {"machine": H.machine_info(), "results": {}}
    peers = ["torch f+b", "torch bwd"] + ([] if no_compile else ["torch.compile f+b"])
    for bench in names:
        for t in threads:
            env = H.thread_env(t)
            kw = dict(bench=bench, quick=quick)
            cs = [H.Contender("polyc program", "benchmarks.programs:setup_polyc_backward", kw, env, bench),
                  H.Contender("polyc kernel", "benchmarks.programs:setup_polyc_backward", dict(kw, one_kernel=True),
                              env, bench)]
            if H.torch_available():
                cs += [H.Contender("torch f+b", "benchmarks.programs:setup_torch_backward", kw, env, bench),
                       H.Contender("torch bwd", "benchmarks.programs:setup_torch_backward", dict(kw, forward=False),
                                   env, bench)]
                if not no_compile:
                    cs.append(H.Contender("torch.compile f+b", "benchmarks.programs:setup_torch_backward",
                                          dict(kw, compiled=True), env, bench))
            res = H.measure(cs, rounds=rounds, min_sample_s=0.2, max_calls=20, label=f"{bench} backward {t}t",
                            timeout=900)
            payload["results"][f"{bench} backward / {t}t"] = [H.asdict(r) for r in res]
            by = {r.name: r for r in res}
            p = by["polyc program"]
            info = p.info if p.ok and isinstance(p.info, dict) else {}
            if info.get("plan"):
                plans[f"{bench} {t}t"] = info
            for r in res:
                if not r.ok:
                    print(f"  {bench} {t}t {r.name} FAILED: {(r.error or '').strip().splitlines()[-1][:300]}")
            row = [bench, t] + [H.time_cell(by.get(n)) for n in ["polyc program", "polyc kernel"] + peers]
            row += [H.ratio(p, by[n]) if n in by else float("nan") for n in ["polyc kernel"] + peers]
            row.append(f"{info['max_rel_err']:.1e}" if "max_rel_err" in info else "-")
            rows.append(row)
    print(H.format_table(["program", "thr", "polyc program", "polyc kernel"] + peers
                         + ["vs kernel"] + [f"vs {n}" for n in peers] + ["err"], rows))
    print("\n(ratios: time / polyc program time; > 1: the backward program is faster)\n")
    for key, info in plans.items():
        ratio = info["unfused_peak"] / info["planned_peak"] if info["planned_peak"] else math.inf
        print(f"{key}: peak intermediates planned {info['planned_peak'] / 2**20:.3f} MiB vs unfused "
              f"{info['unfused_peak'] / 2**20:.3f} MiB ({ratio:.1f}x smaller)")
        print("   " + info["plan"].replace("\n", "\n   "))
    path = H.write_results("programs-backward", payload)
    print(f"\nresults: {path}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, 3 rounds")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--backward", action="store_true", help="time the backward passes instead")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",") if t]
    rounds = args.rounds or (3 if args.quick else 5)
    names = [n for n in BENCHMARKS if not args.only or any(p in n for p in args.only.split(","))]
    if args.backward:
        return backward_main(names, threads, rounds, args.quick, args.no_compile)
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
