"""Compile, verify and time every kernel of the library; print one table.

    python -m benchmarks.demo                     # the `make demo` job
    python -m benchmarks.demo --schedule source   # the loops as written (default: schedule="auto")
    python -m benchmarks.demo --suite core --dtypes all

For every `LibraryKernel` of `kernels.all_kernels()`: compile it with `pc.compile`, run it on the
kernel's own inputs, compare with its reference (within the kernel's tolerance), and time it.
The core suite runs at its "typical" preset and is timed against its numpy reference; PolyBench
runs at `--polybench-preset` (SMALL by default) and its reference is the kernel's own Python loop
nest run once by the interpreter -- the very run that verified it, so "ref ms" there is the time of
plain Python, not of numpy.

"compile s" is the time to generate and build the C for this dtype (near zero on a hit in polyc's
on-disk cache).  "polyc ms" and "ref ms" are medians over several runs; "speedup" is ref / polyc.
A progress line per kernel goes to stderr, the table to stdout.  The exit status is 1 when any
kernel FAILs its check or raises (ERROR), 0 otherwise.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

import polyc as pc
from kernels import LibraryKernel, all_kernels

#: Timing: at least MIN_RUNS runs, more until TIME_BUDGET seconds are spent, at most MAX_RUNS.
MIN_RUNS, MAX_RUNS, TIME_BUDGET = 3, 15, 0.3


@dataclass
class Row:
    kernel: str
    suite: str
    sizes: str
    dtype: str
    max_err: Optional[float] = None
    status: str = "?"
    compile_s: Optional[float] = None
    polyc_ms: Optional[float] = None
    ref_ms: Optional[float] = None
    note: str = ""
    detail: List[str] = field(default_factory=list)

    @property
    def speedup(self) -> Optional[float]:
        if self.polyc_ms and self.ref_ms:
            return self.ref_ms / self.polyc_ms
        return None


# -- helpers --------------------------------------------------------------------------------------

def _copy(inputs: Mapping[str, Any]) -> Dict[str, Any]:
    """Fresh copies of the arrays: compiled kernels update inout arrays in place."""
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}


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


def median_time(fn: Callable[[], Any], prepare: Callable[[], Any] = None) -> float:
    """Median seconds of `fn(prepared)` over a few runs; `prepare` (untimed) builds each argument."""
    times: List[float] = []
    spent = 0.0
    while len(times) < MIN_RUNS or (spent < TIME_BUDGET and len(times) < MAX_RUNS):
        arg = prepare() if prepare is not None else None
        t0 = time.perf_counter()
        fn(arg)
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
    return statistics.median(times)


def _compile_variant(compiled: Any, inputs: Mapping[str, Any]) -> None:
    """Build the C of `compiled` for the dtypes of `inputs` without running it, when the runtime
    exposes that (the C runtime does); otherwise the first call compiles, outside the timings."""
    typing_for = getattr(compiled, "typing_for", None)
    variant = getattr(compiled, "variant", None)
    if typing_for is not None and variant is not None:
        variant(typing_for(inputs))


# -- one kernel -----------------------------------------------------------------------------------

def run_kernel(lk: LibraryKernel, preset: str, dtype: str, schedule: Optional[str], seed: int = 0) -> Row:
    sizes = lk.sizes[preset]
    row = Row(lk.name, lk.suite, " ".join(f"{k}={v}" for k, v in sizes.items()), dtype)
    try:
        inputs = lk.make_inputs(sizes, dtype, np.random.default_rng(seed))
        t0 = time.perf_counter()
        compiled = pc.compile(lk.kernel, schedule) if schedule else pc.compile(lk.kernel)
        _compile_variant(compiled, inputs)
        row.compile_s = time.perf_counter() - t0
        got = compiled(**_copy(inputs))
        t0 = time.perf_counter()
        expected = lk.expected(inputs)
        ref_once = time.perf_counter() - t0
        rtol, atol = lk.tol(dtype)
        row.max_err, ok, msg = compare(got, expected, rtol, atol)
        row.status = "OK" if ok else "FAIL"
        row.note = msg
        row.polyc_ms = 1e3 * median_time(lambda args: compiled(**args), lambda: _copy(inputs))
        if lk.suite == "core":
            row.ref_ms = 1e3 * median_time(lambda args: lk.reference(**args), lambda: _copy(inputs))
        else:
            # The Python loop nest is slow: time only the run that verified the kernel.
            row.ref_ms = 1e3 * ref_once
    except Exception as e:  # noqa: BLE001 - the demo reports every failure in its row and goes on
        row.status = "ERROR"
        row.note = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        row.detail = traceback.format_exc().splitlines()
    return row


# -- table ----------------------------------------------------------------------------------------

def _fmt(v: Optional[float], spec: str) -> str:
    return "-" if v is None else format(v, spec)


def format_table(rows: List[Row]) -> str:
    header = ("kernel", "suite", "sizes", "dtype", "max err", "check", "compile s", "polyc ms", "ref ms", "speedup")
    body = [(r.kernel, r.suite, r.sizes, r.dtype, _fmt(r.max_err, ".2e"), r.status, _fmt(r.compile_s, ".2f"),
             _fmt(r.polyc_ms, ".3f"), _fmt(r.ref_ms, ".3f"),
             "-" if r.speedup is None else f"{r.speedup:.3g}x") for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
    right = {4, 6, 7, 8, 9}

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


# -- main -----------------------------------------------------------------------------------------

def plan(suites: List[str], dtypes: str, polybench_preset: str, names: List[str]) -> List[Tuple[LibraryKernel, str, str]]:
    jobs = []
    for lk in all_kernels():
        if suites and lk.suite not in suites:
            continue
        if names and lk.name not in names:
            continue
        preset = "typical" if lk.suite == "core" else polybench_preset
        if preset not in lk.sizes:
            preset = next(iter(lk.sizes))
        chosen = lk.dtypes if dtypes == "all" else [d for d in lk.dtypes if d == dtypes] or [lk.dtypes[0]]
        if dtypes == "first":
            chosen = [lk.dtypes[0]]
        for dt in chosen:
            jobs.append((lk, preset, dt))
    return jobs


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedule", choices=("source", "auto"), default="auto",
                    help="schedule passed to pc.compile (default: auto, polyc's automatic schedule)")
    ap.add_argument("--suite", action="append", default=[],
                    help="only this suite (core, polybench); repeatable; default: all")
    ap.add_argument("--kernel", action="append", default=[], help="only this kernel; repeatable")
    ap.add_argument("--dtypes", default="first",
                    help="'first' (each kernel's first dtype: f32 for core, f64 for PolyBench), 'all', "
                         "or one dtype name (kernels without it run in their first)")
    ap.add_argument("--polybench-preset", default="SMALL",
                    help="PolyBench dataset (MINI ... EXTRALARGE); the reference is the Python loop "
                         "nest, so MEDIUM and above take minutes")
    ap.add_argument("--traceback", action="store_true", help="print the traceback of every ERROR")
    args = ap.parse_args(argv)

    schedule = None if args.schedule == "source" else args.schedule
    jobs = plan(args.suite, args.dtypes, args.polybench_preset, args.kernel)
    if not jobs:
        print("no kernels matched", file=sys.stderr)
        return 1
    rows: List[Row] = []
    start = time.perf_counter()
    for n, (lk, preset, dtype) in enumerate(jobs, 1):
        print(f"[{n:>2}/{len(jobs)}] {lk.suite}/{lk.name} {preset} {dtype} ...", end=" ", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        row = run_kernel(lk, preset, dtype, schedule)
        rows.append(row)
        extra = f" ({row.note})" if row.status != "OK" and row.note else ""
        print(f"{row.status} in {time.perf_counter() - t0:.1f} s{extra}", file=sys.stderr, flush=True)
        if row.status == "ERROR" and args.traceback:
            print("\n".join(row.detail), file=sys.stderr)

    print()
    print(f"polyc demo: {len(rows)} kernels, schedule={args.schedule}, "
          f"{time.perf_counter() - start:.1f} s in all")
    print(format_table(rows))
    bad = [r for r in rows if r.status != "OK"]
    counts = {s: sum(r.status == s for r in rows) for s in ("OK", "FAIL", "ERROR")}
    print(f"\n{counts['OK']} OK, {counts['FAIL']} FAIL, {counts['ERROR']} ERROR")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
