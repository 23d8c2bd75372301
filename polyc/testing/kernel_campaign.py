"""Fuzzing campaigns over `kernel_fuzz`'s cases: counts, triage of failures, the command line.

    python -m polyc.testing.kernel_campaign --cases 10000 --seed 1 --log failures.txt
    python -m polyc.testing.kernel_campaign --show 17 --seed 1 --minimise

Kept apart from `kernel_fuzz` (cases and how one runs) because campaigns use the triage and the
minimiser, which themselves run cases: one direction of imports.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

from .kernel_fuzz import CaseResult, _trace, make_case, run_case


@dataclass
class CampaignSummary:
    """Counts over many cases."""

    cases: int = 0
    seconds: float = 0.0
    counts: Counter = field(default_factory=Counter)
    failures: List[CaseResult] = field(default_factory=list)

    def add(self, r: CaseResult) -> None:
        c = self.counts
        self.cases += 1
        c["kernels:" + r.case.kernel.language] += 1
        c["schedule:" + r.case.schedule_kind] += 1
        c["status:" + r.status] += 1
        if r.status == "refused":
            c[f"refused:{r.stage}:{r.detail.split(':')[0]}"] += 1
        if r.status == "discarded":
            c["discarded:" + r.stage] += 1
        c["runs:" + r.case.target] += r.runs
        c["compiled:" + r.case.target] += int(r.stage not in ("kernel", "schedule", "compile"))
        for k, v in r.steps.items():
            c["steps:" + k] += v
        if r.status in ("mismatch", "crash"):
            from .kernel_triage import classify
            r.triage = classify(r)
            c[f"failure:{r.status}:{r.triage}"] += 1
            self.failures.append(r)

    def __str__(self) -> str:
        c = self.counts
        rate = self.cases / self.seconds * 60 if self.seconds else 0.0
        lines = [f"{self.cases} cases in {self.seconds:.0f} s ({rate:.1f} cases/min): "
                 f"{c['kernels:einstein']} Einstein + {c['kernels:loops']} loop kernels; schedules "
                 f"source {c['schedule:source']}, auto {c['schedule:auto']}, random {c['schedule:random']} "
                 f"(primitive steps: {c['steps:legal']} legal, {c['steps:illegal']} illegal, "
                 f"{sum(v for k, v in c.items() if k.startswith('steps:invalid'))} invalid, "
                 f"{c['steps:budget']} over budget)",
                 f"compiled and run: c {c['compiled:c']} kernels / {c['runs:c']} runs, cuda-emu "
                 f"{c['compiled:cuda-emu']} kernels / {c['runs:cuda-emu']} runs",
                 f"outcomes: ok {c['status:ok']}, refused {c['status:refused']}, discarded "
                 f"{c['status:discarded']}, MISMATCH {c['status:mismatch']}, CRASH {c['status:crash']}"
                 + (f", GENERATOR ERRORS {c['generator-error']} (cases never built)" if c['generator-error'] else "")]
        refusals = sorted((k, v) for k, v in c.items() if k.split(":")[0] in ("refused", "discarded", "failure"))
        lines += [f"  {k}: {v}" for k, v in refusals]
        return "\n".join(lines)


def run_campaign(cases: int, seed: int = 0, start: int = 0, log=None, verbose: bool = False) -> CampaignSummary:
    """Run cases start .. start+cases-1 of `seed`; failures are kept (and written to `log`)."""
    summary = CampaignSummary()
    t0 = time.time()
    for index in range(start, start + cases):
        try:
            case = make_case(seed, index)
        except Exception as e:  # noqa: BLE001 - a generator bug must not stop a campaign
            summary.counts["generator-error"] += 1
            if log is not None:
                print(f"=== case {index}: generator error {_trace(e)}", file=log, flush=True)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = run_case(case)
        summary.add(r)
        if r.status in ("mismatch", "crash") and log is not None:
            print(f"=== case {index}\nclass: {r.triage}\n{r.report()}\n", file=log, flush=True)
        elif r.status in ("refused", "discarded") and log is not None:
            first = r.detail.splitlines()[0] if r.detail else ""
            print(f"--- {r.status} case {index} at {r.stage}: {first[:300]}", file=log, flush=True)
        if verbose:
            print(f"{index}: {r.status} {r.stage} {r.detail[:150]}", flush=True)
    summary.seconds = time.time() - t0
    return summary


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m polyc.testing.kernel_campaign",
                                description="Differential fuzzing of random kernels under random legal schedules.")
    p.add_argument("--cases", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="first case index (campaigns in chunks)")
    p.add_argument("--show", type=int, default=None, help="print case INDEX (and run it) instead")
    p.add_argument("--minimise", action="store_true", help="with --show: minimise a failing case first")
    p.add_argument("--log", default=None, help="append failing cases to this file")
    p.add_argument("--counts", default=None, help="write the counts as JSON to this file")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    if a.show is not None:
        r = run_case(make_case(a.seed, a.show))
        if a.minimise and r.status in ("mismatch", "crash"):
            from .kernel_minimise import minimise
            _, r = minimise(r.case, r)
        print(r.case.describe(r.schedule_json))
        print(f"# outcome: {r.status} {r.stage} {r.detail}")
        return 0
    log = open(a.log, "a") if a.log else sys.stdout
    summary = run_campaign(a.cases, a.seed, a.start, log=log, verbose=a.verbose)
    print(f"seed {a.seed}, cases {a.start}..{a.start + a.cases - 1}")
    print(summary)
    if a.counts:
        import json
        with open(a.counts, "w") as f:
            json.dump({"cases": summary.cases, "seconds": summary.seconds, **summary.counts}, f)
    return 1 if summary.failures or summary.counts["generator-error"] else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
