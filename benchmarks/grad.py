"""Backward passes: polyc gradient kernels (`pc.grad`, `schedule="auto"`) against PyTorch autograd.

    python -m benchmarks.grad                # matmul, conv2d, softmax, layernorm; 1 and 2 threads
    python -m benchmarks.grad --quick        # 3 rounds
    python -m benchmarks.grad --only softmax --threads 1
    python -m benchmarks.grad --small --rounds 1   # the kernels' small sizes: checks the machinery

Each contender runs in its own worker process, interleaved round by round, medians reported (see
`_harness`).  Contenders:

- `polyc`: the kernel `pc.grad(k, of=..., wrt=<all inputs>)` compiled with `schedule="auto"`; it
  takes the inputs and the output's adjoint and returns every input's gradient.  It recomputes the
  forward intermediates it needs (softmax's row maxima and sums, layernorm's mean and variance);
- `polyc saved`: the same gradient built with `saved=` the forward values PyTorch's autograd saves
  where they are not the inputs (softmax: its output `Y` and row sums `s`, from which the gradient
  recovers `exp(X - m) = Y * s`; layernorm: the row means and variances, `mean` and `var`), taken
  from the forward (`pc.returning`) in the worker's setup; only for those two;
- `torch bwd`: `torch.autograd.grad(y, inputs, ybar, retain_graph=True)` on a graph built once,
  i.e. the backward pass alone, reusing the intermediates autograd saved;
- `torch f+b`: forward and backward together (what the polyc kernel does, recomputation included);
- `torch.compile f+b`: the same through `torch.compile` (default inductor backend): the forward is
  compiled and `torch.autograd.grad` runs the backward graph AOTAutograd compiled with it.  Both
  are compiled in the worker's setup, outside timing; where compiling fails here the contender is
  reported FAILED with its reason (`--no-compile` skips it).

`vs bwd` / `vs f+b` / `vs compile` are torch time / polyc time (>= 1.0: polyc is faster).  Before timing, the
polyc worker checks its gradients against torch autograd (column `max err`, relative).  Results go to
`benchmarks/results/grad-<time>.json`.  PyTorch is required for the comparison columns.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any, Dict, List

import numpy as np

from . import _harness as H

#: What `polyc saved` saves, per library kernel: what autograd saves for its backward, where that is
#: not the inputs (matmul and conv2d save their inputs, which the gradient reads anyway).
SAVED = {"softmax": ("Y", "s"), "layernorm": ("mean", "var")}

#: name -> (library kernel, sizes); all float32.
BENCHMARKS: Dict[str, tuple] = {
    "matmul 512": ("matmul", dict(I=512, K=512, J=512)),
    "conv2d 1x32x56x56 k3": ("conv2d", dict(N=1, C=32, H=56, W=56, F=32, KH=3, KW=3)),
    "softmax 2048x2048": ("softmax", dict(I=2048, J=2048)),
    "layernorm 2048x1024": ("layernorm", dict(M=2048, N=1024)),
}


def _case(bench: str, small: bool = False):
    """(library kernel, output, inputs to differentiate, input values, output adjoint); `small`: at
    the kernel's small sizes."""
    from kernels import by_name
    name, sizes = BENCHMARKS[bench]
    lk = by_name(name)
    if small:
        sizes = lk.sizes["small"]
    prog = lk.kernel.program
    of = next(t.name for t in prog.tensors if t.role == "output")
    wrt = [t.name for t in prog.tensors if t.role == "input"]
    inputs = lk.make_inputs(sizes, "f32", np.random.default_rng(0))
    out = lk.expected(inputs)
    ybar = np.random.default_rng(1).standard_normal(np.shape(out)).astype(np.float32)
    # 64-byte aligned, as PyTorch's allocator places the tensors it copies them into: every
    # contender reads the same layout (numpy's 16-byte alignment costs a streaming kernel's vector
    # loads a cache-line split each, see polyc.runtime.aligned)
    inputs = {k: _aligned(v) for k, v in inputs.items()}
    return lk, of, wrt, inputs, _aligned(ybar)


def _aligned(v: Any) -> Any:
    from polyc.runtime.aligned import aligned_empty
    if not isinstance(v, np.ndarray):
        return v
    out = aligned_empty(v.shape, v.dtype)
    out[...] = v
    return out


def _torch_forward(name: str):
    import torch
    F = torch.nn.functional
    return {
        "matmul": lambda A, B: A @ B,
        "conv2d": lambda X, K: F.conv2d(X, K),
        "softmax": lambda X: torch.softmax(X, dim=1),
        "layernorm": lambda X, gamma, beta, eps: F.layer_norm(X, X.shape[1:], gamma, beta, eps),
    }[name]


def _threads() -> int:
    return int(os.environ.get("OMP_NUM_THREADS", "1"))


def _torch_grads(lk, wrt, inputs, ybar) -> Dict[str, np.ndarray]:
    import torch
    t = {k: torch.tensor(v, requires_grad=k in wrt) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    y = _torch_forward(lk.name)(**t)
    grads = torch.autograd.grad(y, [t[x] for x in wrt], torch.tensor(ybar))
    return {x: g.numpy() for x, g in zip(wrt, grads)}


# -- worker setups ------------------------------------------------------------------------------

def setup_polyc(bench: str, small: bool = False, saved: bool = False) -> Dict[str, Any]:
    """The gradient kernel compiled with "auto"; `saved`: built with `saved=SAVED[kernel]`, whose
    values the forward returns here (outside timing)."""
    import polyc as pc
    lk, of, wrt, inputs, ybar = _case(bench, small)
    keep = SAVED[lk.name] if saved else ()
    g = pc.grad(lk.kernel, of=of, wrt=wrt, saved=keep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = pc.compile(g, schedule="auto")
    names = {t.name for t in g.program.tensors} | {s.name for s in g.program.scalars}
    args = {k: v for k, v in inputs.items() if k in names}
    if keep:
        kept = pc.compile(pc.returning(lk.kernel, *keep), schedule="auto")(**inputs)
        args.update({t: kept[t] for t in keep})
    args[g.grad_names.seed] = ybar
    f(**args)

    def check() -> Dict[str, Any]:
        got = f(**args)
        got = got if isinstance(got, dict) else {g.grad_names[wrt[0]]: got}
        try:
            expected = _torch_grads(lk, wrt, inputs, ybar)
        except ImportError:
            return {"schedule": repr(f.schedule)}
        err = max(float(np.max(np.abs(got[g.grad_names[x]] - e)) / (np.max(np.abs(e)) + 1e-30))
                  for x, e in expected.items())
        return {"max_rel_err": err, "schedule": repr(f.schedule)}

    return {"run": lambda: f(**args), "check": check}


def setup_torch(bench: str, forward: bool, compiled: bool = False, small: bool = False) -> Any:
    """The backward alone on a graph built once, or (`forward`) forward and backward; `compiled`:
    forward and backward through `torch.compile`, compiled here."""
    import torch
    torch.set_num_threads(_threads())
    lk, of, wrt, inputs, ybar = _case(bench, small)
    t = {k: torch.tensor(v, requires_grad=k in wrt) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    fn = _torch_forward(lk.name)
    return H.torch_backward(fn, t, [t[x] for x in wrt], torch.tensor(ybar), forward, compiled)


#: (header, contender) for each time column after polyc's, then the ratio columns: contender / polyc
PEERS = (("torch bwd", "vs bwd"), ("torch f+b", "vs f+b"), ("torch.compile f+b", "vs compile"))
HEADER = (["backward", "thr", "polyc auto", "polyc saved"] + [n for n, _ in PEERS] + [h for _, h in PEERS]
          + ["saved vs bwd", "max err"])


def table_row(bench: str, threads: int, results: List[H.Result]) -> list:
    """One table row from one benchmark's results (see HEADER)."""
    by = {r.name: r for r in results}
    p = by.get("polyc")
    kept = by.get("polyc saved")
    row: list = [bench, threads, H.time_cell(p), H.time_cell(kept)] + [H.time_cell(by.get(nm)) for nm, _ in PEERS]
    row += [H.ratio(p, by[nm]) if p is not None and nm in by else float("nan") for nm, _ in PEERS]
    row.append(H.ratio(kept, by["torch bwd"]) if kept is not None and "torch bwd" in by else float("nan"))
    errs = [r.info.get("max_rel_err") for r in (p, kept) if r is not None and isinstance(r.info, dict)]
    err = max((e for e in errs if e is not None), default=None)
    row.append(f"{err:.1e}" if err is not None else "-")
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    ap.add_argument("--only", default="", help="benchmarks whose name contains this text (comma-separated: any)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--cpu-time", action="store_true", help="time by CPU time (robust on a busy machine, 1 thread)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--small", action="store_true",
                    help="every benchmark at its kernel's small sizes: checks the machinery, measures nothing")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",") if t]
    rounds = args.rounds or (3 if args.quick else 5)
    names = [n for n in BENCHMARKS if not args.only or any(p in n for p in args.only.split(","))]
    have_torch = H.torch_available()
    print(f"gradient benchmarks (float32), threads {threads}, {rounds} rounds; PyTorch: "
          f"{'yes' if have_torch else 'not importable (polyc times only)'}"
          + ("; SMALL SIZES (a check of the machinery, not a measurement)" if args.small else ""))
    rows: List[list] = []
    all_results: Dict[str, Any] = {}
    for bench in names:
        for t in threads:
            env = H.thread_env(t)
            kw = dict(bench=bench, small=True) if args.small else dict(bench=bench)
            cs = [H.Contender("polyc", "benchmarks.grad:setup_polyc", kw, env, bench)]
            if BENCHMARKS[bench][0] in SAVED:
                cs.append(H.Contender("polyc saved", "benchmarks.grad:setup_polyc", dict(kw, saved=True), env, bench))
            if have_torch:
                cs.append(H.Contender("torch bwd", "benchmarks.grad:setup_torch", dict(kw, forward=False), env, bench))
                cs.append(H.Contender("torch f+b", "benchmarks.grad:setup_torch", dict(kw, forward=True), env, bench))
                if not args.no_compile:
                    cs.append(H.Contender("torch.compile f+b", "benchmarks.grad:setup_torch",
                                          dict(kw, forward=True, compiled=True), env, bench))
            res = H.measure(cs, rounds=rounds, min_sample_s=0.1 if args.quick else 0.3, max_calls=20,
                            label=f"{bench} {t}t", timer="cpu" if args.cpu_time else "wall")
            all_results[f"{bench} / {t}t"] = res
            for r in res:
                if not r.ok:
                    print(f"  {bench} {t}t {r.name} FAILED: {(r.error or '').strip().splitlines()[0]}")
            rows.append(table_row(bench, t, res))
    header = HEADER
    print(H.format_table(header, rows))
    path = H.write_results("grad", {"threads": threads, "rounds": rounds, "table": {"header": header, "rows": rows},
                                    "results": all_results})
    print(f"results: {os.path.relpath(path, H.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
