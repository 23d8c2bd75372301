"""`schedule="auto"` against the source order at every preset of the kernel library (issue #16, "every size").

    python -m benchmarks.auto_vs_source                       # every kernel, presets up to MEDIUM, 1 thread
    python -m benchmarks.auto_vs_source --threads 2
    python -m benchmarks.auto_vs_source --only seidel-2d,gemm --preset SMALL,MEDIUM
    python -m benchmarks.auto_vs_source --large               # also LARGE (PolyBench) and "bench" (core)

For every library kernel (`kernels.all_kernels()`) and every preset up to and including MEDIUM
(PolyBench's MINI, SMALL, MEDIUM; the core library's "small", "primes", "typical"; LARGE and the
core "bench" preset only with `--large`), the kernel is compiled with `schedule="auto"` (decided
again per size class, as a user's call gets it) and with its source order (`kernel.schedule()`),
both are checked, then timed in separate worker processes, interleaved round by round, median over
rounds (`_harness.measure`), with `OMP_NUM_THREADS` and friends set to `--threads` per worker as
`benchmarks.polybench` does.

Checking: both outputs are compared against the library's reference where running it is cheap
(numpy references, and PolyBench's Python loops up to `--check-limit` statement instances); above
that limit the auto output is compared against the source-order output (which the test-suite
checks against the reference at the small presets) and the row says `vs source`.

The table lists kernel, preset, source ms, auto ms and ratio = source / auto (above 1: auto is
faster), sorted by ratio; rows below 0.95 are flagged `<<`.  Every sample goes to
`benchmarks/results/auto-vs-source-<time>.json`.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from typing import Any, Dict, List, Optional, Tuple

from . import _harness as H
from .polybench import compare, fresh_inputs_contender

#: Presets timed by default, per suite (in increasing size); `--large` adds LARGE_PRESETS.
PRESETS = ("MINI", "SMALL", "MEDIUM", "small", "primes", "typical")
LARGE_PRESETS = ("LARGE", "bench")

#: Rows whose ratio (source / auto) falls below this are flagged: auto loses by more than noise.
FLAG_BELOW = 0.95

#: Statement instances up to which PolyBench's Python reference is run to check a row.
CHECK_LIMIT = 3_000_000


def library() -> Dict[str, Any]:
    """Every library kernel by name."""
    import kernels
    return {k.name: k for k in kernels.all_kernels()}


def presets_of(lk, wanted: Optional[List[str]], large: bool) -> List[str]:
    """The presets of `lk` to time: the ones asked for (case-insensitive), else the default ones."""
    if wanted:
        by_upper = {p.upper(): p for p in lk.sizes}
        return [by_upper[w.upper()] for w in wanted if w.upper() in by_upper]
    allowed = PRESETS + (LARGE_PRESETS if large else ())
    return [p for p in lk.sizes if p in allowed]


# -- worker setup (runs inside a harness worker) -------------------------------------------------

def compiled(lk, schedule: str):
    """`lk`'s kernel compiled with `schedule="auto"` or with its source order."""
    import polyc as pc
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if schedule == "auto":
            return pc.compile(lk.kernel, schedule="auto")
        return pc.compile(lk.kernel, lk.kernel.schedule())


def setup(kernel: str, preset: str, schedule: str) -> Dict[str, Any]:
    """A harness contender: `kernel` at `preset` under `schedule` ("auto" or "source"), on fresh
    copies of its inputs, those it writes restored before every call."""
    lk = library()[kernel]
    f = compiled(lk, schedule)
    return fresh_inputs_contender(f, lk.make_inputs(lk.sizes[preset], lk.dtypes[0]), lk.kernel)


# -- checking (in this process) ------------------------------------------------------------------

def reference_cost(lk, preset: str) -> int:
    """Statement instances a Python reference runs at `preset` (0 for numpy references)."""
    if lk.suite != "polybench":
        return 0
    from polyc.schedule.auto_size import instances
    model = lk.kernel.model
    return sum(instances(model, st.name, lk.sizes[preset]) or 0 for st in model.program.statements)


def check(lk, preset: str, fns: Dict[str, Any], limit: int) -> Tuple[str, float]:
    """(what was compared, worst scaled error: <= 1 passes) for `lk` at `preset`."""
    inputs = lk.make_inputs(lk.sizes[preset], lk.dtypes[0])
    got = {name: f(**H.copied(inputs)) for name, f in fns.items()}
    if reference_cost(lk, preset) <= limit:
        expected = lk.expected(inputs)
        return "reference", max(compare(lk, g, expected) for g in got.values())
    return "vs source", compare(lk, got["auto"], got["source"])


# -- main ----------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="",
                    help="comma-separated kernel names, each optionally with one preset (seidel-2d:SMALL)")
    ap.add_argument("--preset", default="", help="comma-separated presets (default: every one up to MEDIUM)")
    ap.add_argument("--threads", type=int, choices=(1, 2), default=1)
    ap.add_argument("--large", action="store_true", help="also LARGE (PolyBench) and bench (core library)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-sample", type=float, default=0.05, help="seconds each sample lasts at least")
    ap.add_argument("--cpu-time", action="store_true", help="time by CPU time (1 thread; busy machines)")
    ap.add_argument("--check-limit", type=int, default=CHECK_LIMIT,
                    help="statement instances up to which a Python reference is run")
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args(argv)

    lib = library()
    only = [n.strip().partition(":") for n in args.only.split(",") if n.strip()]
    names = list(dict.fromkeys(n for n, _, _ in only)) or sorted(lib)
    unknown = [n for n in names if n not in lib]
    if unknown:
        ap.error(f"unknown kernels: {', '.join(unknown)}")
    wanted = [p.strip() for p in args.preset.split(",") if p.strip()] or None
    pinned = {n: [p for m, _, p in only if m == n and p] for n in names}
    jobs = [(n, p) for n in names for p in presets_of(lib[n], pinned[n] or wanted, args.large)]
    if not jobs:
        ap.error("no kernel has the presets asked for")
    # One private compile cache for this run and its workers: gcc runs once per variant.
    os.environ.setdefault("POLYC_CACHE_DIR", tempfile.mkdtemp(prefix="polyc-auto-vs-source-"))
    print(f"auto vs source order: {len(jobs)} kernel/preset rows, {args.threads} thread(s), {args.rounds} rounds"
          f" ({'CPU' if args.cpu_time else 'wall'} time)")

    checks: Dict[Tuple[str, str], Tuple[str, float]] = {}
    if not args.no_check:
        for n in names:
            lk = lib[n]
            fns = {"auto": compiled(lk, "auto"), "source": compiled(lk, "source")}
            for p in presets_of(lk, pinned[n] or wanted, args.large):
                try:
                    checks[(n, p)] = check(lk, p, fns, args.check_limit)
                except Exception as e:  # noqa: BLE001 - reported in the table, never fatal
                    checks[(n, p)] = (f"FAILED {type(e).__name__}: {e}", float("inf"))

    results: Dict[Tuple[str, str], Dict[str, H.Result]] = {}
    for k, (n, p) in enumerate(jobs):
        contenders = [H.Contender(s, "benchmarks.auto_vs_source:setup", dict(kernel=n, preset=p, schedule=s),
                                  env=H.thread_env(args.threads), group=f"{n} {p}") for s in ("source", "auto")]
        res = H.measure(contenders, rounds=args.rounds, min_sample_s=args.min_sample, max_calls=200,
                        label=f"{k + 1}/{len(jobs)} {n} {p}", timer="cpu" if args.cpu_time else "wall")
        results[(n, p)] = {r.name: r for r in res}
        for r in res:
            if not r.ok:
                print(f"  {n} {p} {r.name} FAILED: {r.error.strip().splitlines()[0] if r.error else ''}")

    rows = []
    for (n, p), r in results.items():
        src, auto = r.get("source"), r.get("auto")
        ratio = H.ratio(auto, src) if src and auto else float("nan")
        what, err = checks.get((n, p), ("not checked", 0.0))
        status = "-" if what == "not checked" else ("ok" if err <= 1.0 else "WRONG")
        rows.append((ratio, [n, p, src.median * 1e3 if src and src.ok else float("nan"),
                             auto.median * 1e3 if auto and auto.ok else float("nan"), ratio,
                             "<<" if ratio < FLAG_BELOW else "", f"{status} ({what})"]))
    rows.sort(key=lambda r: (r[0] if r[0] == r[0] else -1.0))
    print(H.format_table(["kernel", "preset", "source ms", "auto ms", "ratio", "", "check"], [r for _, r in rows]))
    ratios = [r for r, _ in rows if r == r]
    flagged = [f"{row[0]} {row[1]} {r:.2f}" for r, row in rows if r < FLAG_BELOW]
    print(f"geomean source/auto {H.geomean(ratios):.2f}x over {len(ratios)} rows; "
          f"below {FLAG_BELOW}: {', '.join(flagged) or 'none'}")
    wrong = [f"{n} {p}" for (n, p), (_, err) in checks.items() if err > 1.0]
    if wrong:
        print(f"WRONG or failed checks: {', '.join(wrong)}")
    path = H.write_results("auto-vs-source", {
        "threads": args.threads, "rounds": args.rounds, "timer": "cpu" if args.cpu_time else "wall",
        "checks": {f"{n} {p}": c for (n, p), c in checks.items()},
        "timings": {f"{n} {p}": list(r.values()) for (n, p), r in results.items()}})
    print(f"results: {path.relative_to(H.ROOT)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
