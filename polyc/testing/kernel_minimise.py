"""Greedy minimisation of a failing kernel-fuzz case (in the spirit of C-Reduce, much simpler).

Starting from a failing case, it repeatedly tries a smaller variant and keeps it while the failure
persists (same status and stage): drop one size draw, one primitive step of the schedule, one
source line (an Einstein statement, a loop statement), then unused declarations and parameters.
The result is printable with `FuzzCase.describe` and usually a few lines long.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable, Optional, Tuple

from .kernel_fuzz import CaseResult, FuzzCase, run_case
from .kernel_gen_common import GeneratedKernel

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _same_failure(a: CaseResult, b: CaseResult) -> bool:
    return a.status == b.status and a.stage == b.stage


def _without_unused(k: GeneratedKernel, source: str) -> GeneratedKernel:
    """`k` with `source`, dropping declarations (Einstein) or parameters (loops) it no longer uses."""
    if k.language == "einstein":
        used = set(_NAME.findall(source))
        return replace(k, source=source, declared=tuple(d for d in k.declared if d[0] in used),
                       scalars=tuple(s for s in k.scalars if s[0] in used),
                       bounds=tuple(b for b in k.bounds if b[0] in used))
    head, _, body = source.partition("\n")
    used = set(_NAME.findall(body))
    head = re.sub(r"\((.*)\):", lambda m: "(" + _keep_params(m.group(1), used) + "):", head, count=1)
    return replace(k, source=head + "\n" + body,
                   declared=tuple(d for d in k.declared if d[0] in used),
                   scalars=tuple(s for s in k.scalars if s[0] in used))


def _keep_params(text: str, used: set) -> str:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "[("
        depth -= ch in "])"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return ", ".join(p for p in parts if p.split(":")[0].strip() in used)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _drop_line(lines, k: int, python: bool) -> str:
    """The source without line `k` (in Python: with the block it opens, and a `pass` where a
    block would be left empty)."""
    if not python:
        return "\n".join(lines[:k] + lines[k + 1:]) + "\n"
    end = k + 1
    while end < len(lines) and _indent(lines[end]) > _indent(lines[k]):
        end += 1
    out = lines[:k] + lines[end:]
    if k > 0 and lines[k - 1].rstrip().endswith(":") and (k >= len(out) or _indent(out[k]) <= _indent(lines[k - 1])):
        out.insert(k, " " * _indent(lines[k]) + "pass")
    return "\n".join(out) + "\n"


def minimise(case: FuzzCase, result: Optional[CaseResult] = None, max_runs: int = 150,
             still_fails: Optional[Callable[[CaseResult, CaseResult], bool]] = None
             ) -> Tuple[FuzzCase, CaseResult]:
    """The smallest variant of failing `case` found greedily within `max_runs` re-runs."""
    same = still_fails or _same_failure
    best = result or run_case(case)
    if best.status not in ("mismatch", "crash"):
        return case, best
    if best.schedule_json is not None and case.steps is None:
        import json
        case = replace(case, steps=tuple(json.loads(best.schedule_json).get("history", ())))
    runs = 0

    def attempt(candidate: FuzzCase) -> bool:
        nonlocal best, case, runs
        runs += 1
        try:
            r = run_case(candidate)
        except Exception:  # noqa: BLE001 - a variant that breaks the fuzzer itself is no reduction
            return False
        if same(r, best):
            case, best = candidate, r
            return True
        return False

    progress = True
    while progress and runs < max_runs:
        progress = False
        for k in range(len(case.sizes)):
            if len(case.sizes) > 1 and attempt(replace(case, sizes=case.sizes[:k] + case.sizes[k + 1:])):
                progress = True
                break
        for k in range(len(case.steps or ())):
            if attempt(replace(case, steps=case.steps[:k] + case.steps[k + 1:])):
                progress = True
                break
        lines = case.kernel.source.splitlines()
        first = 1 if case.kernel.language == "loops" else 0
        for k in range(len(lines) - 1, first - 1, -1):
            if runs >= max_runs:
                break
            text = _drop_line(lines, k, case.kernel.language == "loops")
            if attempt(replace(case, kernel=_without_unused(case.kernel, text))):
                progress = True
                lines = case.kernel.source.splitlines()
                break
    return case, best
