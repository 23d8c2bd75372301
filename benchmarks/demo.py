"""Compile, verify and time every kernel of the library against what a user would otherwise run.

    python -m benchmarks.demo                     # the `make demo` job
    python -m benchmarks.demo --schedule source   # polyc's loops as written (default: schedule="auto")
    python -m benchmarks.demo --suite core --dtypes all

For every `LibraryKernel` of `kernels.all_kernels()`: compile it with `pc.compile`, run it on the
kernel's own inputs, compare with its reference (within the kernel's tolerance), and time it
against a *baseline*, the code a user would run without polyc:

- **numpy** where a numpy formulation exists: the core suite's references, and for 20 of the 30
  PolyBench kernels the formulations of `benchmarks/numpy_baselines.py`;
- **C -O3** otherwise (triangular solvers, in-place factorisations, recurrences): the same loops in
  source order, compiled by gcc with the same flags as polyc's own C (`-O3 -march=native`).

Honest timing: polyc, numpy and the source-order C each run in their own long-lived worker
process (`benchmarks._harness`), so an idle OpenBLAS or OpenMP thread pool of one cannot steal
cycles from another; rounds alternate between polyc and the baseline; times are medians.  All
contenders see the same environment (thread counts included).  "compile s" is the time to generate
and build the C (near zero on a hit in polyc's on-disk cache).  "speedup" is baseline / polyc.
A progress bar goes to stderr, the table and a one-line summary (geometric means) to stdout.  The
exit status is 1 when any kernel FAILs its check or raises (ERROR), 0 otherwise.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from benchmarks import _harness as H
from benchmarks._harness import stop_worker

#: Per kernel: ROUNDS rounds alternating polyc and baseline; a sample lasts >= MIN_SAMPLE_S (at most
#: MAX_CALLS calls).  Sized so that `make demo` stays within about two minutes on two cores.
ROUNDS, MIN_SAMPLE_S, MAX_CALLS = 3, 0.03, 50
#: Pause before each sample: an OpenBLAS pool keeps spinning for up to ~0.1 s after a call (an OpenMP
#: pool for less), and on 2 cores a spinning pool of the other contender's process takes a core from
#: the one being timed (gemm SMALL on 2 threads: 26 ms instead of 0.2 ms).
PAUSE_S = 0.15
BASELINES = {"numpy": "setup_numpy", "C -O3": "setup_source_c"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Row:
    kernel: str
    suite: str
    sizes: str
    dtype: str
    baseline: str
    max_err: Optional[float] = None
    status: str = "?"
    compile_s: Optional[float] = None
    polyc_ms: Optional[float] = None
    baseline_ms: Optional[float] = None
    note: str = ""
    detail: List[str] = field(default_factory=list)

    @property
    def speedup(self) -> Optional[float]:
        if self.polyc_ms and self.baseline_ms:
            return self.baseline_ms / self.polyc_ms
        return None


def baseline_of(lk: Any) -> str:
    """What a user would run instead of polyc: numpy where a numpy formulation exists (the core
    suite's references; `numpy_baselines` for 20 of the 30 PolyBench kernels), else the
    source-order C at -O3 (a Python loop nest is no baseline anyone would run)."""
    from benchmarks.numpy_baselines import FORMULATIONS
    return "numpy" if lk.suite == "core" or lk.name in FORMULATIONS else "C -O3"


# -- comparison (used inside the polyc worker) ------------------------------------------------------

def _as_dict(result: Any) -> Dict[str, np.ndarray]:
    if isinstance(result, dict):
        return {k: np.asarray(v) for k, v in result.items()}
    return {"": np.asarray(result)}


def compare(got: Any, expected: Any, rtol: float, atol: float) -> Tuple[float, bool, str]:
    """(max abs error, within tolerance?, message) of a result against its reference.

    One output compares array to array; several compare by name (every name of the reference
    must be among the kernel's outputs).
    """
    g, e = _as_dict(got), _as_dict(expected)
    if set(g) == {""} and set(e) != {""} and len(e) == 1:
        e = {"": next(iter(e.values()))}
    missing = sorted(set(e) - set(g))
    if missing:
        return float("nan"), False, f"outputs missing: {', '.join(missing)} (got {', '.join(sorted(g))})"
    worst, ok, notes = 0.0, True, []
    for name, want in e.items():
        have = g[name]
        if have.shape != want.shape:
            return float("nan"), False, f"{name or 'output'} has shape {have.shape}, expected {want.shape}"
        if have.size == 0:
            continue
        err = float(np.max(np.abs(have.astype(np.float64) - want.astype(np.float64))))
        worst = max(worst, err) if not np.isnan(err) else float("nan")
        if not np.allclose(have, want, rtol=rtol, atol=atol, equal_nan=False):
            ok = False
            notes.append(f"{name or 'output'} off by {err:.3g}")
    return worst, ok, "; ".join(notes)


# -- worker setups (each runs inside its own worker process) ---------------------------------------

def _library_kernel(suite: str, name: str) -> Any:
    from kernels import all_kernels
    for lk in all_kernels(suite):
        if lk.name == name:
            return lk
    raise KeyError(f"{suite}/{name}")


def _job(suite: str, name: str, preset: str, dtype: str, seed: int) -> Tuple[Any, Dict[str, Any]]:
    lk = _library_kernel(suite, name)
    return lk, lk.make_inputs(lk.sizes[preset], dtype, np.random.default_rng(seed))


def setup_polyc(suite: str, name: str, preset: str, dtype: str, schedule: Optional[str], seed: int = 0) -> Dict[str, Any]:
    """Compile (timed), verify against the reference, then time polyc's kernel."""
    import polyc as pc
    lk, inputs = _job(suite, name, preset, dtype, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        f = pc.compile(lk.kernel, schedule) if schedule else pc.compile(lk.kernel)
        if hasattr(f, "typing_for") and hasattr(f, "variant"):
            f.variant(f.typing_for(inputs))  # code generation + gcc, outside the timings
        compile_s = time.perf_counter() - t0
    work, prepare = H.refilled(inputs, lk.kernel)

    def check() -> Dict[str, Any]:
        got = f(**H.copied(inputs))
        max_err, ok, note = compare(got, lk.expected(inputs), *lk.tol(dtype))
        return {"compile_s": compile_s, "max_err": max_err, "ok": ok, "note": note}

    return {"run": lambda: f(**work), "prepare": prepare, "check": check}


def setup_numpy(suite: str, name: str, preset: str, dtype: str, seed: int = 0) -> Dict[str, Any]:
    """The kernel's numpy formulation (a core kernel's reference, else `numpy_baselines`)."""
    from benchmarks.numpy_baselines import FORMULATIONS
    lk, inputs = _job(suite, name, preset, dtype, seed)
    work, prepare = H.refilled(inputs, lk.kernel)
    fn = lk.reference if suite == "core" else FORMULATIONS[name]
    return {"run": lambda: fn(**work), "prepare": prepare}


def setup_source_c(suite: str, name: str, preset: str, dtype: str, seed: int = 0) -> Dict[str, Any]:
    """The kernel's loops in source order, compiled by gcc with polyc's flags (-O3 -march=native)."""
    import polyc as pc
    lk, inputs = _job(suite, name, preset, dtype, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = pc.compile(lk.kernel)
    work, prepare = H.refilled(inputs, lk.kernel)
    return {"run": lambda: f(**work), "prepare": prepare}


# -- parent side: long-lived workers ---------------------------------------------------------------

class Worker:
    """One long-lived `benchmarks._harness` worker that sets up and times one kernel after another.

    Its stderr goes to a temporary file (never a pipe that could fill up and block it); a worker
    that dies is started again for the next kernel.
    """

    def __init__(self, label: str):
        self.label = label
        self.proc: Optional[subprocess.Popen] = None
        self.log = tempfile.TemporaryFile(mode="w+")

    def _start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarks._harness", "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, env=env, cwd=ROOT)

    def _ask(self, line: str) -> Optional[dict]:
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            answer = ""
        return json.loads(answer) if answer else None

    def setup(self, setup: str, args: Dict[str, Any]) -> dict:
        """Set up the next kernel; the reply is the harness's (`ok`, `info` or `error`, `trace`)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        reply = self._ask(json.dumps({"setup": f"benchmarks.demo:{setup}", "args": args}))
        if reply is None:
            self.log.seek(0)
            tail = self.log.read()[-3000:]
            self.proc = None
            return {"ok": False, "error": f"the {self.label} worker died", "trace": tail}
        if not reply.get("ok"):
            self.proc.poll()
        return reply

    def sample(self) -> Optional[float]:
        reply = self._ask(f"run {MAX_CALLS} {MIN_SAMPLE_S} wall")
        return None if reply is None else reply.get("time")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_worker(self.proc)
        self.log.close()


def _error_note(reply: dict) -> Tuple[str, List[str]]:
    error = reply.get("error", "error")
    return error.splitlines()[0] if error else "error", (reply.get("trace") or "").splitlines()


def run_kernel(lk: Any, preset: str, dtype: str, schedule: Optional[str], workers: Mapping[str, Worker],
               rounds: int = ROUNDS, seed: int = 0) -> Row:
    """Verify one kernel in the polyc worker, then time it against its baseline, rounds alternating."""
    sizes = lk.sizes[preset]
    base = baseline_of(lk)
    row = Row(lk.name, lk.suite, " ".join(f"{k}={v}" for k, v in sizes.items()), dtype, base)
    common = dict(suite=lk.suite, name=lk.name, preset=preset, dtype=dtype, seed=seed)
    mine = workers["polyc"].setup("setup_polyc", dict(common, schedule=schedule))
    if not mine.get("ok"):
        row.status = "ERROR"
        row.note, row.detail = _error_note(mine)
        return row
    info = mine.get("info") or {}
    row.compile_s, row.max_err = info.get("compile_s"), info.get("max_err")
    row.status, row.note = ("OK" if info.get("ok") else "FAIL"), info.get("note", "")
    theirs = workers[base].setup(BASELINES[base], common)
    if not theirs.get("ok"):
        row.note = f"baseline {base}: {_error_note(theirs)[0]}"
        theirs = None
    mine_t: List[float] = []
    theirs_t: List[float] = []
    for r in range(rounds):
        order = [(workers["polyc"], mine_t), (workers[base], theirs_t)] if theirs else [(workers["polyc"], mine_t)]
        for w, times in (order if r % 2 == 0 else order[::-1]):
            time.sleep(PAUSE_S)
            t = w.sample()
            if t is not None:
                times.append(t)
    row.polyc_ms = 1e3 * statistics.median(mine_t) if mine_t else None
    row.baseline_ms = 1e3 * statistics.median(theirs_t) if theirs_t else None
    return row


# -- table and summary ---------------------------------------------------------------------------

def _fmt(v: Optional[float], spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def format_table(rows: List[Row]) -> str:
    header = ("kernel", "suite", "sizes", "dtype", "check", "max err", "compile s", "polyc ms",
              "baseline", "baseline ms", "speedup")
    body = [(r.kernel, r.suite, r.sizes, r.dtype, r.status, _fmt(r.max_err, ".2e"), _fmt(r.compile_s, ".2f"),
             _fmt(r.polyc_ms, ".3f"), r.baseline, _fmt(r.baseline_ms, ".3f"),
             "-" if r.speedup is None else f"{r.speedup:.2f}x") for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
    right = {5, 6, 7, 9, 10}

    def line(cells) -> str:
        return "  ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [line(header), line("-" * w for w in widths)]
    out += [line(b) for b in body]
    notes = [r for r in rows if r.note]
    if notes:
        out.append("")
        out += [f"{r.kernel} ({r.dtype}): {r.status}: {r.note}" for r in notes]
    return "\n".join(out)


def geomean(xs: List[float]) -> float:
    vals = [x for x in xs if x and x > 0 and not math.isnan(x)]
    return math.exp(sum(math.log(x) for x in vals) / len(vals)) if vals else float("nan")


def summary_line(rows: List[Row], schedule: str, seconds: float) -> str:
    """One line: geometric-mean speedup over each baseline (verified kernels only) and the counts."""
    parts = []
    for base, words in (("numpy", "numpy"), ("C -O3", "source-order C at -O3")):
        speedups = [r.speedup for r in rows if r.baseline == base and r.status == "OK" and r.speedup]
        if speedups:
            n = len(speedups)
            parts.append(f"{geomean(speedups):.2f}x over {words} ({n} kernel{'s' if n != 1 else ''})")
    counts = {s: sum(r.status == s for r in rows) for s in ("OK", "FAIL", "ERROR")}
    speed = "geomean speedup of polyc " + f"(schedule={schedule}): " + ("; ".join(parts) or "nothing timed")
    return (f"{speed}. {counts['OK']} OK, {counts['FAIL']} FAIL, {counts['ERROR']} ERROR "
            f"in {seconds:.0f} s")


# -- main -----------------------------------------------------------------------------------------

def plan(suites: List[str], dtypes: str, core_preset: str, polybench_preset: str,
         names: List[str]) -> List[Tuple[Any, str, str]]:
    from kernels import all_kernels
    jobs = []
    for lk in all_kernels():
        if suites and lk.suite not in suites:
            continue
        if names and lk.name not in names:
            continue
        preset = core_preset if lk.suite == "core" else polybench_preset
        if preset not in lk.sizes:
            preset = next(iter(lk.sizes))
        chosen = lk.dtypes if dtypes == "all" else [d for d in lk.dtypes if d == dtypes] or [lk.dtypes[0]]
        if dtypes == "first":
            chosen = [lk.dtypes[0]]
        for dt in chosen:
            jobs.append((lk, preset, dt))
    return jobs


def main(argv: Optional[List[str]] = None) -> int:
    from tqdm import tqdm

    ap = argparse.ArgumentParser(prog="python -m benchmarks.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedule", choices=("source", "auto"), default="auto",
                    help="schedule passed to pc.compile (default: auto, polyc's automatic schedule)")
    ap.add_argument("--suite", action="append", default=[],
                    help="only this suite (core, polybench); repeatable; default: all")
    ap.add_argument("--kernel", action="append", default=[], help="only this kernel; repeatable")
    ap.add_argument("--dtypes", default="first",
                    help="'first' (each kernel's first dtype: f32 for core, f64 for PolyBench), 'all', "
                         "or one dtype name (kernels without it run in their first)")
    ap.add_argument("--core-preset", default="typical", help="size preset of the core kernels (small, typical, bench)")
    ap.add_argument("--polybench-preset", default="SMALL",
                    help="PolyBench dataset (MINI ... EXTRALARGE); verification runs the Python loop "
                         "nest, so MEDIUM and above take minutes")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help=f"timing rounds per kernel (default {ROUNDS})")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for every contender (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, ...); "
                         "default: the environment's, i.e. all cores")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--traceback", action="store_true", help="print the traceback of every ERROR")
    args = ap.parse_args(argv)

    schedule = None if args.schedule == "source" else args.schedule
    jobs = plan(args.suite, args.dtypes, args.core_preset, args.polybench_preset, args.kernel)
    if not jobs:
        print("no kernels matched", file=sys.stderr)
        return 1
    if args.threads is not None:  # inherited by the workers, the same for every contender
        from benchmarks._harness import thread_env
        os.environ.update(thread_env(args.threads))
    workers = {"polyc": Worker("polyc"), "numpy": Worker("numpy"), "C -O3": Worker("source-order C")}
    rows: List[Row] = []
    start = time.perf_counter()
    try:
        bar = tqdm(jobs, desc="polyc demo", unit="kernel", file=sys.stderr, disable=args.no_progress,
                   dynamic_ncols=True, mininterval=0.5)
        for lk, preset, dtype in bar:
            bar.set_postfix_str(f"{lk.suite}/{lk.name} {dtype}", refresh=False)
            row = run_kernel(lk, preset, dtype, schedule, workers, rounds=args.rounds)
            rows.append(row)
            if row.status != "OK":
                bar.write(f"{lk.suite}/{lk.name} ({dtype}): {row.status}: {row.note}", file=sys.stderr)
                if row.status == "ERROR" and args.traceback:
                    bar.write("\n".join(row.detail), file=sys.stderr)
        bar.close()
    finally:
        for w in workers.values():
            w.close()
    seconds = time.perf_counter() - start
    threads = os.environ.get("OMP_NUM_THREADS") or f"all {os.cpu_count()} cores"
    print(f"polyc demo: {len(rows)} kernels, schedule={args.schedule}, threads: {threads}; baseline: numpy "
          f"where the kernel has a numpy formulation, else its source-order C at -O3; each in its own process")
    print(format_table(rows))
    print()
    print(summary_line(rows, args.schedule, seconds))
    return 1 if any(r.status != "OK" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
