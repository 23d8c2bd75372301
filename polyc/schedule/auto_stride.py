"""Column walks in `schedule="auto"`: deepest statements whose innermost loop strides through memory.

isl's scheduler orders loops by dependences, not by memory layout, and the band decisions of
`auto_decide` can only permute the members of one band.  PolyBench's gramschmidt keeps its
heaviest statements walking columns of a row-major array::

    for k:                                   # sequential (each step needs the previous one)
      for j in k+1..N:
        for i:  R[k, j] += Q[i, k] * A[i, j] # one element per cache line, M lines per column
        for i:  A[i, j] -= Q[i, k] * R[k, j]

Distributed out of the loop they share (`Schedule.distribute`) and interchanged
(`Schedule.interchange`), both proven primitives, the same statements walk rows, and gcc
vectorises them (LARGE: 9 s -> about 1 s).  deriche's column sweeps (recurrences along i, each
column j independent) turn the same way into row sweeps.

`row_walking` tries the repair on the decided schedule, then on the source order, and keeps a
result only when it walks rows for some statement that walked a column and no statement that
walked rows now walks a column; the marks, jamming and packing of `auto` follow as usual.

`recurrence_lanes` applies the same repair to statements whose innermost loop carries a
recurrence (no SIMD lanes along it, one latency per step) inside a loop whose iterations are
independent: PolyBench's adi solves one tridiagonal system per row `i` along `j`
(`p[i, j] = -c / (a * p[i, j - 1] + b)`, a division per step).  With `j` outside and `i` inside in
strips of `ROW_STRIP` (the strips outermost, in parallel), the systems of a strip advance side by
side as SIMD lanes while the strip's lines stay in L1 (LARGE: 6.3 s -> 2.8 s on one thread).

`commuted_rows` handles the updates whose order is free (integer max/min, `poly.commutative`) and
whose loop cannot be distributed: nussinov's `table[i, j] = max(table[i, j], table[i, k] +
table[k + 1, j])` reads a column along its innermost `k`, and shares `j` with the statements that
finish `table[i, j]`.  Swapping `j` and `k` for that statement alone (`interchange(..., statements=)`)
makes `j` its inner loop, a row (LARGE: 7-10x on one thread).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Optional, Set, Tuple

import islpy as isl

from ..errors import IslBudgetError, PolycError
from ..poly.commutative import commutative_op
from .auto_cost import access_delta, access_kind, statement_accesses
from .auto_loops import real_loops
from .auto_reduce import direction_of
from .legality import carried_at, check_legal
from .nesting import separate_nests
from .rewrite import fresh_name, kernel_names
from .state import ScheduleState as Schedule


def _kinds(schedule: Schedule, cols, name: str, loops: List[int], p: int) -> Optional[Set[str]]:
    """The access kinds ("unit", "strided", "invariant") of statement `name` along loop position `p`."""
    v = direction_of(schedule.model, name, cols, loops, p)
    if v is None:
        return None
    program = schedule.model.program
    st = program.statement(name)
    return {access_kind(access_delta(a, st.iterators, v)) for a, _ in statement_accesses(program, name) if a.indices}


def _walks_column(kinds: Optional[Set[str]]) -> bool:
    return kinds is not None and "strided" in kinds and "unit" not in kinds


def column_walkers(schedule: Schedule) -> Dict[str, Tuple[str, Optional[str]]]:
    """The statements of the deepest nests whose innermost loop walks a column (a strided access,
    none unit-stride), each with (its innermost loop, the nearest enclosing loop along which its
    accesses are unit-stride or invariant, some unit; None when there is none)."""
    cols, loops_of = real_loops(schedule)
    depth = max((len(ps) for ps in loops_of.values()), default=0)
    out = {}
    for name, ps in loops_of.items():
        if len(ps) < 2 or len(ps) < depth or not _walks_column(_kinds(schedule, cols, name, ps, ps[-1])):
            continue
        along = None
        for p in reversed(ps[:-1]):
            kinds = _kinds(schedule, cols, name, ps, p)
            if kinds is not None and "unit" in kinds and "strided" not in kinds:
                along = schedule.dims[p].name
                break
        out[name] = (schedule.dims[ps[-1]].name, along)
    return out


def _repaired(schedule: Schedule, walkers: Dict[str, Tuple[str, Optional[str]]],
              walkers_only: bool = False) -> Optional[Schedule]:
    """`schedule` with each walker distributed out of its row loop, and the row loop and the column
    loop interchanged (for the walkers alone with `walkers_only`, else for every statement on
    them); None when a step is refused."""
    pairs: Dict[Tuple[str, str], List[str]] = {}
    for name, (inner, outer) in walkers.items():
        if outer is None:
            continue
        try:
            schedule = schedule.distribute(name, loop=outer)
        except PolycError:
            pass            # alone in that loop already
        pairs.setdefault((outer, inner), []).append(name)
    if not pairs:
        return None
    try:
        for (outer, inner), names in pairs.items():
            schedule = schedule.interchange(outer, inner, statements=names if walkers_only else None)
    except (PolycError, IslBudgetError, isl.Error):
        return None
    schedule = own_loops(schedule)
    for name in walkers:
        schedule = _rows_outside(schedule, name)
    return schedule


#: Row elements per strip when a row loop's strips move outside a reduction (`_rows_outside`).
ROW_STRIP = 128


def _rows_outside(schedule: Schedule, name: str) -> Schedule:
    """Where statement `name`'s new outer loop carries a dependence (gramschmidt's reduction
    `R[k, j] += ...` over `i`, now outside the row loop `j`), its row loop in strips of `ROW_STRIP`
    with the strips outermost (`split`, `interchange`: proven), so the strips can run in parallel
    while each strip's part of the row stays in the L1 cache; unchanged where that is refused or
    the outer loop is free already."""
    cols, loops_of = real_loops(schedule)
    ps = loops_of.get(name, [])
    if len(ps) < 2:
        return schedule
    outer, row = schedule.dims[ps[-2]].name, schedule.dims[ps[-1]].name
    try:
        schedule.parallel(outer)
        return schedule               # free: the marks will take it as it is
    except (PolycError, IslBudgetError, isl.Error):
        pass
    try:
        strips = schedule.split(row, ROW_STRIP)
        return strips.interchange(outer, f"{row}_outer")
    except (PolycError, IslBudgetError, isl.Error):
        return schedule


def own_loops(schedule: Schedule) -> Schedule:
    """`schedule` with every loop nest on loop dimensions of its own (`nesting.separate_nests`), so
    the marks that follow are proven per nest: after the repair gramschmidt's row updates share
    their loops with the column reduction `nrm += A[i, k] ** 2`, which no loop may run in parallel."""
    taken = set(schedule.loop_names) | kernel_names(schedule.model.program)

    def fresh(base: str) -> str:
        name = fresh_name(base, taken)
        taken.add(name)
        return name
    maps, dims = separate_nests(schedule, fresh)
    return replace(schedule, maps=maps, dims=dims, history=schedule.history + ("own loops per nest",))


def row_walking(decided: Schedule, source: Schedule, deps) -> Schedule:
    """`decided`, or a repair of it (or of the `source` order) in which statements that walked
    columns walk rows (see the module docstring), proven against `deps`."""
    before = column_walkers(decided)
    if not any(outer for _, outer in before.values()):
        return decided
    for start in (decided, source):
        try:
            walkers = before if start is decided else column_walkers(start)
            repaired = _repaired(start, walkers)
            if repaired is None:
                continue
            after = column_walkers(repaired)
        except (PolycError, IslBudgetError, isl.Error):
            continue
        if set(after) < set(before):
            check_legal(repaired, deps, "turning column walks into row walks")
            return repaired
    return decided


def _target_kind(schedule: Schedule, cols, name: str, loops: List[int]) -> Optional[str]:
    """How statement `name`'s target moves along its innermost loop ("unit", "strided", "invariant")."""
    v = direction_of(schedule.model, name, cols, loops, loops[-1])
    if v is None:
        return None
    st = schedule.model.program.statement(name)
    return access_kind(access_delta(st.target, st.iterators, v))


def own_dependences(model, deps, name: str) -> list:
    """The dependences of statement `name` on itself."""
    return [d for d in deps if d.source == d.sink and model.statement_by_isl_name(d.source).name == name]


def recurrences(schedule: Schedule, deps) -> Dict[str, Tuple[List[int], list]]:
    """The statements of the deepest nests whose innermost loop carries a dependence of the
    statement on itself (a recurrence: each step writes a new element from the ones before, not
    an accumulation into one), each with (its real loop positions, the carried dependences with
    their pairs, as `carried_at` gives them)."""
    cols, loops_of = real_loops(schedule)
    depth = max((len(ps) for ps in loops_of.values()), default=0)
    out = {}
    for name, ps in loops_of.items():
        if len(ps) < 2 or len(ps) < depth:
            continue
        if _target_kind(schedule, cols, name, ps) in (None, "invariant"):
            continue    # an accumulation into one element (a row sum): the reduction strategies' case
        own = own_dependences(schedule.model, deps, name)
        chain = carried_at(schedule, own, ps[-1]) if own else []
        if chain:
            out[name] = (ps, chain)
    return out


def recurrence_walkers(schedule: Schedule, deps) -> Dict[str, Tuple[str, str]]:
    """The `recurrences` inside a loop that carries no dependence at all, each with (its innermost
    loop, the nearest such enclosing loop)."""
    free: Dict[int, bool] = {}
    out = {}
    for name, (ps, _) in recurrences(schedule, deps).items():
        for p in reversed(ps[:-1]):
            if p not in free:
                free[p] = not carried_at(schedule, deps, p)
            if free[p]:
                out[name] = (schedule.dims[ps[-1]].name, schedule.dims[p].name)
                break
    return out


def recurrence_lanes(decided: Schedule, deps) -> Schedule:
    """`decided`, or a repair of it in which independent recurrences run side by side (see the
    module docstring): kept when some statement's innermost loop no longer carries a recurrence,
    and no statement but those newly walks a column."""
    try:
        before = recurrence_walkers(decided, deps)
        if not before:
            return decided
        repaired = _repaired(decided, before, walkers_only=True)
        if repaired is None:
            return decided
        # A repaired statement may walk a column now (adi's `p[i, j]` along `i`): its strip of
        # ROW_STRIP lines stays in L1 from one step of the recurrence to the next.  No other may.
        new_columns = set(column_walkers(repaired)) - set(column_walkers(decided))
        if not set(recurrence_walkers(repaired, deps)) < set(before) or not new_columns <= set(before):
            return decided
        check_legal(repaired, deps, "running independent recurrences side by side")
        return repaired
    except (PolycError, IslBudgetError, isl.Error):
        return decided


def commuted_rows(schedule: Schedule) -> Schedule:
    """`schedule` with each commutative update (`poly.commutative`) whose innermost loop walks a
    column (some access strided) while the loop around it walks rows (some unit-stride, none
    strided) running those two loops swapped, for itself alone, where that is proven legal (see the
    module docstring); unchanged otherwise."""
    program = schedule.model.program
    cols, loops_of = real_loops(schedule)
    for name, ps in loops_of.items():
        if len(ps) < 2 or commutative_op(program, program.statement(name)) is None:
            continue
        inner, outer = _kinds(schedule, cols, name, ps, ps[-1]), _kinds(schedule, cols, name, ps, ps[-2])
        if inner is None or outer is None or "strided" not in inner or "strided" in outer or "unit" not in outer:
            continue
        try:
            schedule = schedule.interchange(schedule.dims[ps[-2]].name, schedule.dims[ps[-1]].name,
                                            statements=[name])
        except (PolycError, IslBudgetError, isl.Error):
            continue
        cols, loops_of = real_loops(schedule)
    return schedule
