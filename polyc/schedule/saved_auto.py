"""Saving and re-deriving an automatic schedule's typed fields.

An automatic schedule is built from isl's schedule tree, not by primitive calls, so `to_json`
stores it as raw maps and dims; its pack plans, CUDA contraction plans and `AutoRequest` (the
knobs `auto_schedule` was called with) are not maps.  Nothing of those is trusted from a file:
the file keeps only the request (every field validated here), and `from_json` runs
`auto_schedule` again with it on the kernel.  The re-derived schedule is used only when its maps,
loops and marks are exactly the ones stored (so the reload is the saved schedule, with plans this
polyc proved itself); otherwise the stored maps are restored and proven as any raw schedule.
CUDA contraction plans (`auto_gpu`) are saved as (statement, init, tile) summaries and re-derived
the same way.  `auto` and `auto_gpu` register the re-derivers in `serialize.REDERIVERS` (they sit
above `serialize` in the import graph); `polyc` imports both, so loading always re-derives.
"""
from __future__ import annotations

import types
from dataclasses import replace
from typing import Any, Callable, Dict, Optional

import islpy as isl

from ..errors import IslBudgetError, PolycError, ScheduleFileError, TargetError
from . import schedule_file
from .state import ScheduleState as Schedule

_FIELDS = ("target", "tile", "budget", "tile_sizes", "register_blocking", "pack", "jam_rows", "deadline",
           "reassociate", "history")


def request_dict(request: Any) -> Dict[str, Any]:
    """The `AutoRequest` in its saved form (plain JSON values)."""
    return {"target": request.target.to_dict(), "tile": request.tile, "budget": request.budget,
            "tile_sizes": [[k, v] for k, v in request.tile_sizes],
            "register_blocking": request.register_blocking, "pack": request.pack,
            "jam_rows": request.jam_rows, "deadline": request.deadline,
            "reassociate": request.reassociate, "history": list(request.history)}


def _opt(value: Any, types_: tuple, where: str, what: str) -> Any:
    return None if value is None else schedule_file.expect(value, types_, where, what)


def check_request(data: Any) -> Dict[str, Any]:
    """The fields of the `AutoRequest` stored under "auto_request" (untrusted: every one checked),
    as `AutoRequest`'s positional arguments by name."""
    from ..target import Target
    w = "auto_request"
    schedule_file.expect(data, (dict,), w, "an object")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise ScheduleFileError(f"unknown field {unknown[0]!r}", f"{w}.{unknown[0]}")
    missing = [f for f in _FIELDS if f not in data]
    if missing:
        raise ScheduleFileError(f"missing field {missing[0]!r}", f"{w}.{missing[0]}")
    try:
        target = Target.from_dict(data["target"])
    except TargetError as e:
        raise ScheduleFileError(str(e), f"{w}.target.{e.field}" if e.field else f"{w}.target") from None
    for f in ("tile", "pack"):
        schedule_file.expect(data[f], (bool,), f"{w}.{f}", "true or false")
    for f in ("register_blocking", "jam_rows", "reassociate"):
        _opt(data[f], (bool,), f"{w}.{f}", "true, false or null")
    budget = _opt(data["budget"], (int,), f"{w}.budget", "an integer or null")
    if budget is not None and budget <= 0:
        raise ScheduleFileError("the isl budget must be positive", f"{w}.budget")
    deadline = _opt(data["deadline"], (int, float), f"{w}.deadline", "a number or null")
    if deadline is not None and not (0 <= deadline <= 3600):
        raise ScheduleFileError("the deadline must be between 0 and 3600 seconds", f"{w}.deadline")
    sizes = schedule_file.expect(data["tile_sizes"], (list,), f"{w}.tile_sizes", "a list")
    pairs = []
    for k, pair in enumerate(sizes):
        where = f"{w}.tile_sizes[{k}]"
        schedule_file.expect(pair, (list,), where, "a [name, size] pair")
        if len(pair) != 2:
            raise ScheduleFileError("not a [name, size] pair", where)
        name = schedule_file.check_identifier(pair[0], f"{where}[0]", "a loop name")
        size = schedule_file.expect(pair[1], (int,), f"{where}[1]", "an integer")
        if not 1 <= size <= 1 << 20:
            raise ScheduleFileError("a tile size must be between 1 and 1048576", f"{where}[1]")
        pairs.append((name, size))
    history = schedule_file.expect(data["history"], (list,), f"{w}.history", "a list")
    for k, h in enumerate(history):
        schedule_file.expect(h, (str,), f"{w}.history[{k}]", "a string")
    return {"target": target, "tile": data["tile"], "budget": budget, "tile_sizes": tuple(sorted(pairs)),
            "register_blocking": data["register_blocking"], "pack": data["pack"], "jam_rows": data["jam_rows"],
            "deadline": deadline, "reassociate": data["reassociate"], "history": tuple(history)}


def _same(a: Schedule, b: Schedule, saved_dims: Any, dim_form: Callable) -> bool:
    """Whether `a` has the loops and marks saved (`saved_dims`, packed loops included) and the
    maps of `b` (equal as relations, not just textually)."""
    if tuple(a.statements) != tuple(b.statements):
        return False
    if [dim_form(d, a.packed_loops()) for d in a.dims] != saved_dims:
        return False
    try:
        return all(a.statement_map(n).is_equal(b.statement_map(n)) for n in a.statements)
    except (PolycError, isl.Error):   # not provably the same
        return False


def rederive(restored: Schedule, request: Any, saved_dims: Any, auto_schedule: Callable,
             dim_form: Callable) -> Optional[Schedule]:
    """`auto_schedule` run again with the saved `request`, when it reproduces the `restored`
    (proven) raw schedule exactly; None otherwise (the kernel, polyc or the search changed).
    `auto_schedule` and `dim_form` (the saved form of a Dim) are passed in by `auto`, which
    registers this with `serialize` (the schedule layer below `auto` must not import it)."""
    kernel = types.SimpleNamespace(model=restored.model)
    try:
        again = auto_schedule(kernel, request.target, tile=request.tile, budget=request.budget,
                              tile_sizes=dict(request.tile_sizes) or None,
                              register_blocking=request.register_blocking, pack=request.pack,
                              jam_rows=request.jam_rows, deadline=request.deadline,
                              reassociate=request.reassociate)
    except (PolycError, IslBudgetError, isl.Error):
        return None
    if tuple(again.history) != request.history or not _same(again, restored, saved_dims, dim_form):
        return None
    return replace(restored, maps=again.maps, dims=again.dims, history=again.history, steps=again.steps,
                   packing=again.packing, gpu_contractions=again.gpu_contractions,
                   auto_request=again.auto_request, target=again.target)


# -- CUDA contraction plans (`auto_gpu.auto_gpu_schedule`) ----------------------------------------

def gpu_plans_list(schedule: Schedule) -> list:
    """The CUDA contraction plans in their saved form (statement, fused init, tile), read only as
    what the re-derived plans must match."""
    return [{"statement": p.statement, "init": p.init, "tile": list(p.tile)}   # type: ignore[attr-defined]
            for p in schedule.gpu_contractions]


def _check_gpu_plans(data: Any, names: Any) -> list:
    """The saved plan summaries (untrusted: shape, statement names and tile integers checked)."""
    w = "gpu_contractions"
    schedule_file.expect(data, (list,), w, "a list")
    for k, plan in enumerate(data):
        where = f"{w}[{k}]"
        schedule_file.expect(plan, (dict,), where, "an object")
        if set(plan) != {"statement", "init", "tile"}:
            raise ScheduleFileError("a plan has exactly 'statement', 'init' and 'tile'", where)
        if plan["statement"] not in names:
            raise ScheduleFileError(f"no statement {schedule_file._show(plan['statement'])}", f"{where}.statement")
        if plan["init"] is not None and plan["init"] not in names:
            raise ScheduleFileError(f"no statement {schedule_file._show(plan['init'])}", f"{where}.init")
        tile = schedule_file.expect(plan["tile"], (list,), f"{where}.tile", "a list")
        if len(tile) != 5 or not all(isinstance(t, int) and not isinstance(t, bool) and 0 < t <= 4096
                                     for t in tile):
            raise ScheduleFileError("a tile is five positive integers", f"{where}.tile")
    return data


def check_gpu_plans(data: Any, names: Any) -> list:
    """The saved plan summaries, checked (see `_check_gpu_plans`)."""
    return _check_gpu_plans(data, names)


def rederive_gpu(start: Schedule, restored: Schedule, summaries: list, saved_dims: Any,
                 auto_gpu_schedule: Callable, dim_form: Callable) -> Optional[Schedule]:
    """`auto_gpu_schedule` of the source order `start`, when its plans are the (checked) saved
    `summaries` and it reproduces the `restored` (proven) raw schedule exactly; None otherwise.
    Registered with `serialize` by `auto_gpu`, which passes itself in."""
    try:
        again = auto_gpu_schedule(start)
    except (PolycError, IslBudgetError, isl.Error):
        return None
    if gpu_plans_list(again) != summaries or not _same(again, restored, saved_dims, dim_form):
        return None
    return replace(restored, maps=again.maps, dims=again.dims, history=again.history, steps=again.steps,
                   gpu_contractions=again.gpu_contractions)
