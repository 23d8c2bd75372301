"""Index-set splitting in `schedule="auto"`: loops that carry dependences only through one plane.

Floyd-Warshall's step `k` reads row `k` and column `k` in every `(i, j)` and writes them at
`i == k` and `j == k`.  The loops `i` and `j` each carry dependences, so neither runs in parallel
nor as SIMD lanes, yet every pair they order has one end on the plane `i == k` (or `j == k`).
Split there (`Schedule.index_split`, which keeps the order of every instance), the parts below and
above the plane carry nothing: `"auto"` runs them in parallel and vectorised (2.5-2.7x over the
source order at PolyBench LARGE on this project's 2-core machine).

`pinned_plane` finds such a plane from the exact dependences: for each enclosing loop `m`, an
offset `c` taken from one carried pair, and a proof by isl that every pair the loop carries has its
source or its sink on `loop == m + c`.  `split_pinned_loops` splits a loop only when the marking
that follows then marks it (parallel or vector); otherwise the schedule stays as it was.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Set, Tuple

import islpy as isl

from ..errors import IllegalScheduleError, IslBudgetError, PolycError
from ..poly.dependences import Dependences
from ..poly.islutil import isl_budget
from .auto_cost import SearchBudget
from .legality import carried_at
from .rewrite import is_reduction_dependence, time_vars
from .schedule import LoopKind, Schedule

#: Offsets tried beyond those read off a carried pair are none; this bounds the ones read off it.
MAX_OFFSET = 64


def _time_pairs(schedule: Schedule, dep, pairs: isl.Map) -> isl.Map:
    """The carried instance pairs of `dep` as pairs of time points (source time -> sink time)."""
    src = schedule.statement_map(dep.source)
    snk = schedule.statement_map(dep.sink)
    pairs = pairs.align_params(src.get_space()).intersect_params(schedule.model.context)
    return pairs.apply_domain(src.align_params(pairs.get_space())).apply_range(snk.align_params(pairs.get_space()))


def _offsets(times: isl.Map, level: int, outer: int) -> List[int]:
    """`loop - m` at the source and at the sink of one pair of `times` (candidates for the plane)."""
    point = times.wrap().sample_point()
    if point.is_void():
        return []
    n = times.dim(isl.dim_type.in_)

    def coord(k: int) -> int:
        return point.get_coordinate_val(isl.dim_type.set, k).to_python()

    found = []
    for base in (0, n):
        c = coord(base + level) - coord(base + outer)
        if abs(c) <= MAX_OFFSET and c not in found:
            found.append(c)
    return found


def pinned_plane(schedule: Schedule, deps: Dependences, level: int) -> Optional[Tuple[str, int]]:
    """(enclosing loop `m`, offset `c`) such that every dependence pair that schedule dimension
    `level` carries has its source or its sink at `loop == m + c` (None: no such plane, or the loop
    carries nothing)."""
    outer_loops = [k for k, d in enumerate(schedule.dims[:level]) if d.name is not None]
    if not outer_loops:
        return None
    carried = carried_at(schedule, list(deps), level)
    if not carried or any(is_reduction_dependence(schedule.model, dep) for dep, _ in carried):
        return None  # a reduction's own chain runs along the loop: no plane pins it
    times = [_time_pairs(schedule, dep, pairs) for dep, pairs in carried]
    n = len(schedule.dims)
    t, u = time_vars(n), [f"u{k}" for k in range(n)]
    for m in reversed(outer_loops):  # the nearest enclosing loop first
        for c in _offsets(times[0], level, m):
            plane = isl.Map(f"{schedule.model.pstr} -> {{ [{', '.join(t)}] -> [{', '.join(u)}] : "
                            f"{t[level]} = {t[m]} + {c} or {u[level]} = {u[m]} + {c} }}")
            if all(pair.is_subset(plane.align_params(pair.get_space())) for pair in times):
                return schedule.dims[m].name, c
    return None


def _marked(schedule: Schedule, loop: str) -> bool:
    return any(d.name == loop and d.kinds & {LoopKind.PARALLEL, LoopKind.VECTORIZED} for d in schedule.dims)


def split_pinned_loops(schedule: Schedule, marked: Schedule, deps: Dependences,
                       mark: Callable[[Schedule], Schedule], markable: Callable[[Schedule], Set[str]],
                       search: Optional[SearchBudget] = None) -> Schedule:
    """`marked` (= `mark(schedule)`), or the marking of `schedule` with loops index-split where that
    lets `mark` make them parallel or vector (`pinned_plane`).  Loops are tried outermost first;
    each split is kept only if the loop it splits is then marked.  `markable(marked)`: the loops
    `mark` would mark at all were they free of dependences (no parallel loop around them already,
    or innermost loops); others are not looked at."""
    candidates = markable(marked)
    for loop in [d.name for d in schedule.dims if d.name is not None]:
        if _marked(marked, loop) or loop not in candidates:
            continue
        if search is not None and search.expired("splitting loops at pinned dependences"):
            break
        try:
            with isl_budget(f"looking for a plane that pins the dependences of loop {loop!r}"):
                plane = pinned_plane(schedule, deps, schedule.dim_index(loop))
            if plane is None:
                continue
            split = schedule.index_split(loop, at=plane[0], offset=plane[1])
            again = mark(split)
        except (IllegalScheduleError, IslBudgetError, PolycError, isl.Error):
            continue
        if _marked(again, loop):
            schedule, marked = split, again
            candidates = markable(marked)
    return marked
