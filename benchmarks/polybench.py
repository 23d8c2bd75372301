"""PolyBench/C 4.2 on polyc: `schedule="auto"` against the source-order ("naive") C.

    python -m benchmarks.polybench                 # LARGE, 1 and 2 threads
    python -m benchmarks.polybench --quick         # MEDIUM, fewer rounds
    python -m benchmarks.polybench --preset SMALL --kernels gemm,jacobi-2d --threads 1
    python -m benchmarks.polybench --preset MINI,SMALL,MEDIUM --cpu-time   # where does auto lose?
    python -m benchmarks.polybench --polybench-src ~/PolyBenchC-4.2.1   # also PolyBench/C's own code

Steps: (1) for every kernel, build the automatic schedule and record its compile time
(scheduling, code generation and gcc, with a private cache so gcc really runs), then check the
auto-scheduled kernel against the reference at a small preset; (2) time naive and auto per kernel
and thread count in separate worker processes, interleaved (see `_harness`); (3) print a table with
speedups and their geometric means, and write everything to `benchmarks/results/`.

Every kernel runs in PolyBench/C's own data type (int for floyd-warshall and nussinov, float for
deriche, double for the rest).  With a PolyBench/C 4.2 copy at hand (`--polybench-src DIR` or
$POLYBENCH_SRC; fetched by you, never part of polyc), PolyBench's own program for each kernel is
timed too (see `polybench_c`): built with `gcc -O3 -march=native` at the same sizes, run in its own
process, sequential, interleaved with the 1-thread rounds; the `x PB-C` columns are how many times
faster polyc auto is than it.

Targets (reported, not asserted): geomean >= 2x over naive sequentially, no kernel more than 10%
slower than naive, compile-time median <= 0.5 s.
"""
from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import tempfile
import time
import warnings
from typing import Any, Dict, List, Tuple

import numpy as np

from . import _harness as H
from . import polybench_c as PBC

MODULES = ("blas", "datamining", "linear_algebra", "medley", "solvers", "stencils")
PB_C = "polybench-c/1t"  # the contender name of PolyBench/C's own program


def polybench_kernels() -> Dict[str, Any]:
    """The 30 PolyBench library entries by name (imported directly: other suites may be in flux)."""
    out = {}
    for m in MODULES:
        mod = importlib.import_module("kernels.polybench." + m)
        for k in mod.KERNELS:
            out[k.name] = k
    return out


def compare(lk, got: Any, expected: Any) -> float:
    """Largest relative error of `got` against `expected`, scaled by the kernel's tolerance (<= 1 passes)."""
    rtol, atol = lk.tol(lk.dtypes[0])
    if not isinstance(expected, dict):
        expected = {"_": expected}
        got = {"_": got}
    worst = 0.0
    for k, e in expected.items():
        g = np.asarray(got[k])
        e = np.asarray(e)
        if g.shape != e.shape:
            return float("inf")
        if not np.all(np.isfinite(g) == np.isfinite(e)):
            return float("inf")
        err = np.abs(g.astype(np.float64) - e.astype(np.float64))
        bound = atol + rtol * np.abs(e.astype(np.float64))
        fin = np.isfinite(e)
        if fin.any():
            # Integer kernels have no tolerance (bound 0): any difference fails, none passes.
            scaled = np.divide(err[fin], bound[fin], out=np.where(err[fin] > 0, np.inf, 0.0), where=bound[fin] > 0)
            worst = max(worst, float(np.max(scaled)))
    return worst


# -- worker setup (runs inside a harness worker) -------------------------------------------------

def setup(kernel: str, preset: str, schedule: str) -> Dict[str, Any]:
    import polyc as pc
    lk = polybench_kernels()[kernel]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = pc.compile(lk.kernel, schedule="auto" if schedule == "auto" else None)
    inputs = lk.make_inputs(lk.sizes[preset], lk.dtypes[0])  # PolyBench's own data type
    return fresh_inputs_contender(f, inputs, lk.kernel)


def fresh_inputs_contender(f, inputs: Dict[str, Any], kernel: Any) -> Dict[str, Any]:
    """A harness contender running `f` on copies of `inputs`, those `kernel` writes restored before
    every call (`_harness.refilled`); arrays only read are copied once."""
    work, prepare = H.refilled(inputs, kernel)
    return {"run": lambda: f(**work), "prepare": prepare}


# -- compile times and correctness (in this process) ---------------------------------------------

def compile_and_check(names: List[str], check_preset: str, progress: bool = True) -> Dict[str, Dict[str, Any]]:
    import polyc as pc
    from polyc.schedule.auto import auto_schedule
    kernels = polybench_kernels()
    out: Dict[str, Dict[str, Any]] = {}
    cache = tempfile.mkdtemp(prefix="polyc-bench-cache-")
    old = os.environ.get("POLYC_CACHE_DIR")
    os.environ["POLYC_CACHE_DIR"] = cache
    try:
        for n, name in enumerate(names):
            if progress and sys.stderr.isatty():
                sys.stderr.write(f"\r[compile+check {n + 1}/{len(names)}] {name:20s}")
                sys.stderr.flush()
            lk = kernels[name]
            k = lk.kernel
            rec: Dict[str, Any] = {}
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t0 = time.perf_counter()
                k.dependences()
                t1 = time.perf_counter()
                sched = auto_schedule(k)
                t2 = time.perf_counter()
                f = pc.compile(k, sched, specialise=True)  # as schedule="auto": decided per size class
                inputs = lk.make_inputs(lk.sizes[check_preset], lk.dtypes[0])
                f.variant(f.typing_for(inputs))  # code generation + gcc
                t3 = time.perf_counter()
            rec.update(dependences_s=t1 - t0, schedule_s=t2 - t1, build_s=t3 - t2, compile_s=t3 - t0,
                       warnings=[str(w.message) for w in caught], history=list(sched.history),
                       marks=[f"{m}:{d.name}" for d in sched.dims for m in sorted(d.marks)])
            expected = lk.expected(inputs)
            got = f(**H.copied(inputs))
            err = compare(lk, got, expected)
            rec["check_error"] = err
            rec["correct"] = bool(err <= 1.0)
            out[name] = rec
    finally:
        if old is None:
            os.environ.pop("POLYC_CACHE_DIR", None)
        else:
            os.environ["POLYC_CACHE_DIR"] = old
    if progress and sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 60 + "\r")
    return out


def run_preset(args: argparse.Namespace, preset: str, rounds: int, threads: List[int], kernels: Dict[str, Any],
               names: List[str], pb_root: Any) -> Tuple[int, Dict[str, Any]]:
    """Check, time and report one preset; (exit status, summary)."""
    loaded = H.preload()
    print(f"PolyBench {preset}: polyc auto vs naive (source order), threads {threads}, {rounds} rounds"
          + (f"; preloaded {', '.join(loaded)}" if loaded else "")
          + (f"; PolyBench/C's own code from {pb_root}" if pb_root else ""))
    checks = compile_and_check(names, args.check_preset)
    compile_times = [checks[n]["compile_s"] for n in names]
    sched_times = [checks[n]["schedule_s"] for n in names]
    wrong = [n for n in names if not checks[n]["correct"]]
    print(f"correctness at {args.check_preset}: {len(names) - len(wrong)}/{len(names)} match the reference"
          + (f"; WRONG: {', '.join(wrong)}" if wrong else ""))
    print(f"compile time (deps + schedule + codegen + gcc): median {statistics.median(compile_times):.2f} s, "
          f"max {max(compile_times):.2f} s ({names[compile_times.index(max(compile_times))]}); "
          f"auto scheduling alone: median {statistics.median(sched_times):.2f} s, max {max(sched_times):.2f} s")

    timings: Dict[str, Dict[str, H.Result]] = {}
    if not args.no_timing:
        for n, name in enumerate(names):
            timings[name] = {}
            for t in threads:
                contenders = [H.Contender(f"{sched}/{t}t", "benchmarks.polybench:setup",
                                          dict(kernel=name, preset=preset, schedule=sched),
                                          env=H.thread_env(t), group=name) for sched in ("naive", "auto")]
                if pb_root is not None and t == threads[0]:  # sequential: timed once, in the first rounds
                    contenders.append(H.Contender(PB_C, "benchmarks.polybench_c:setup",
                                                  dict(kernel=name, preset=preset, sizes=kernels[name].sizes[preset],
                                                       root=str(pb_root)), env=H.thread_env(1), group=name))
                res = H.measure(contenders, rounds=rounds, min_sample_s=0.05 if args.quick else 0.2,
                                max_calls=20, label=f"{n + 1}/{len(names)} {name} {t}t",
                                timer="cpu" if (args.cpu_time and t == 1) else "wall")
                timings[name].update({r.name: r for r in res})
            for r in timings[name].values():
                if not r.ok:
                    print(f"  {name} {r.name} FAILED: {r.error.strip().splitlines()[0] if r.error else ''}")

    with_pbc = pb_root is not None and bool(timings)
    header = ["kernel", "sched s"] + (["PB-C 1t"] if with_pbc else [])
    for t in threads:
        header += [f"naive {t}t", f"auto {t}t", f"speedup {t}t"] + ([f"x PB-C {t}t"] if with_pbc else [])
    rows, speedups = [], {t: [] for t in threads}
    vs_pbc: Dict[int, List[float]] = {t: [] for t in threads}
    for name in names:
        r = timings.get(name, {})
        row: List[Any] = [name + ("" if checks[name]["correct"] else " (WRONG)"), checks[name]["schedule_s"]]
        pbc = r.get(PB_C)
        if with_pbc:
            row.append(H.fmt_time(pbc.median) if pbc and pbc.ok else "-")
        for t in threads:
            naive, auto = r.get(f"naive/{t}t"), r.get(f"auto/{t}t")
            if naive and auto:
                sp = H.ratio(auto, naive)
                speedups[t].append(sp)
                row += [H.fmt_time(naive.median), H.fmt_time(auto.median), sp]
            else:
                row += ["-", "-", float("nan")]
            if with_pbc:
                against = H.ratio(auto, pbc) if (auto and pbc) else float("nan")
                vs_pbc[t].append(against)
                row.append(against)
        rows.append(row)
    if timings:
        geo = ["geomean", ""] + ([""] if with_pbc else [])
        for t in threads:
            geo += ["", "", H.geomean(speedups[t])] + ([H.geomean(vs_pbc[t])] if with_pbc else [])
        rows.append(geo)
    print(H.format_table(header, rows))
    summary: Dict[str, Any] = {"preset": preset, "threads": threads, "rounds": rounds,
                               "timer_1t": "cpu" if args.cpu_time else "wall",
                               "compile_median_s": statistics.median(compile_times),
                               "compile_max_s": max(compile_times),
                               "schedule_median_s": statistics.median(sched_times),
                               "schedule_max_s": max(sched_times), "wrong": wrong}
    for t in threads:
        if with_pbc and vs_pbc[t]:
            summary[f"geomean_vs_polybench_c_{t}t"] = H.geomean(vs_pbc[t])
        if speedups[t]:
            summary[f"geomean_{t}t"] = H.geomean(speedups[t])
            slow = [(n, s) for n, s in zip(names, speedups[t]) if s < 0.9]
            summary[f"slower_than_naive_{t}t"] = slow
    if timings:
        for t in threads:
            if speedups[t]:
                slow = summary[f"slower_than_naive_{t}t"]
                target = " (target >= 2x)" if t == 1 else ""
                print(f"{t} thread(s): geomean speedup over naive {summary[f'geomean_{t}t']:.2f}x{target}; "
                      f"kernels > 10% slower than naive: {', '.join(f'{n} {s:.2f}x' for n, s in slow) or 'none'}")
    print(f"compile-time median {summary['compile_median_s']:.2f} s (target <= 0.5 s)")
    path = H.write_results(f"polybench-{preset}", {"summary": summary, "checks": checks,
                                                    "timings": {n: list(r.values()) for n, r in timings.items()}})
    print(f"results: {path.relative_to(H.ROOT)}")
    return (0 if not wrong else 1), summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default=None,
                    help="PolyBench dataset, or several comma-separated (MINI,SMALL,MEDIUM: a sweep that lists "
                         "every preset where auto loses); default LARGE, MEDIUM with --quick")
    ap.add_argument("--quick", action="store_true", help="smaller preset and fewer rounds")
    ap.add_argument("--kernels", default="", help="comma-separated subset")
    ap.add_argument("--threads", default="1,2", help="thread counts to time (default 1,2)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--check-preset", default="SMALL")
    ap.add_argument("--no-timing", action="store_true", help="only compile times and correctness")
    ap.add_argument("--polybench-src", default=None, metavar="DIR",
                    help=f"a PolyBench/C 4.2 copy whose own programs are timed too (default ${PBC.ENV_VAR})")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time 1-thread runs by CPU time (robust on a busy machine); 2 threads stay wall-clock")
    args = ap.parse_args(argv)
    preset = args.preset or ("MEDIUM" if args.quick else "LARGE")
    rounds = args.rounds or (3 if args.quick else 5)
    threads = [int(t) for t in args.threads.split(",") if t]
    kernels = polybench_kernels()
    names = sorted(kernels) if not args.kernels else [n.strip() for n in args.kernels.split(",")]
    try:
        pb_root = PBC.source_root(args.polybench_src)
    except PBC.PolyBenchSourceError as e:
        ap.error(str(e))

    presets = [p.strip().upper() for p in preset.split(",") if p.strip()]
    results = [(p, *run_preset(args, p, rounds, threads, kernels, names, pb_root)) for p in presets]
    if len(presets) > 1:
        print("\nwhere auto is more than 10% slower than naive (source order):")
        for p, _, summary in results:
            for t in threads:
                slow = summary.get(f"slower_than_naive_{t}t", [])
                print(f"  {p} {t}t: {', '.join(f'{n} {sp:.2f}x' for n, sp in slow) or 'none'}")
    return max(status for _, status, _ in results)


if __name__ == "__main__":
    sys.exit(main())
