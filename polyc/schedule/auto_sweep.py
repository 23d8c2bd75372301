"""In-place sweeps in `schedule="auto"`: rows that advance together, each lagging the one before.

A Gauss-Seidel sweep updates its array in place, and every point reads the new value of the
point before it on its row and of three points on the row above (PolyBench's seidel-2d)::

    for t:
      for i:
        for j:  A[i, j] = (A[i-1, j-1] + ... + A[i, j-1] + A[i, j] + ... + A[i+1, j+1]) / 9

Along `j` each point waits for the last: a chain of six additions and a division per point,
whatever the tiling, and no SIMD lane is free (written order kept, bit for bit).  Row `i + 1`
needs row `i` only up to column `j + 1`, so when row `i + 1` runs two columns behind row `i`
(`skew("j", "i", 2)`: the loop `j` becomes `j + 2i`) and `ROWS` rows are jammed into the body
(`unroll_and_jam("i", ROWS)`), the body holds `ROWS` independent chains, which the core overlaps.
Both steps are proven primitives; the smallest lag whose jammed copies depend on none of each
other is taken, and nothing is changed where there is none.

In a tiled schedule the rows are grouped along the tile's own row coordinate (seidel-2d's tiles
run along `t + i`: `skew("i", "t", 1)` first), so the groups of `ROWS` rows fit whole tiles and
need no guards (N=2000: 4.4x the source order on one thread, against 2.3x with the groups
misaligned with the tiles, and 1.06x with no jam).
"""
from __future__ import annotations

import math
import re
from typing import Dict, List, Optional, Tuple

import islpy as isl

from ..errors import IslBudgetError, PolycError
from .auto_loops import schedule_columns
from .auto_stride import own_dependences, recurrences
from .legality import carried_at, check_legal
from .state import ScheduleState as Schedule

#: Rows jammed into one body: independent chains the core overlaps (seidel-2d at N=1000, one
#: thread: 2.7x the source order with 4 rows, 3.7x with 8, 2.8x with 16, where registers run out).
ROWS = 8

#: The lags tried, smallest first (seidel-2d's rows need 2).
LAGS = (1, 2, 3, 4)

_TILE = re.compile(r"^(?:\[[^]]*\] -> )?\{ [^[]*\[[^]]*\] -> \[\(floor\(\(([^()]*)\)/(\d+)\)\)\]")


def sweep_chains(schedule: Schedule, deps) -> List[str]:
    """The `auto_stride.recurrences` whose chain runs through the whole domain (`_everywhere`)
    while the loop around the innermost one carries a dependence too (else
    `auto_stride.recurrence_lanes` runs the rows side by side)."""
    model = schedule.model
    return [name for name, (ps, chain) in recurrences(schedule, deps).items()
            if any(_everywhere(pairs, model.domains[name]) for _, pairs in chain)
            and carried_at(schedule, deps, ps[-2])]


def _equalities(s: isl.Set) -> int:
    return sum(1 for c in s.affine_hull().get_constraints() if c.is_equality())


def _everywhere(pairs: isl.Map, domain: isl.Set) -> bool:
    """Whether the instances that feed a later step, and those that wait on one, both span the
    statement's whole domain (as many dimensions): each of seidel-2d's points feeds the next and
    reads the one before; floyd-warshall's `j` carries dependences only from `j = k`, which
    `split_pinned_loops` peels off instead."""
    return max(_equalities(pairs.domain()), _equalities(pairs.range())) <= _equalities(domain)


def _tile_of(schedule: Schedule, cols, name: str, ps: List[int]) -> Optional[Tuple[Dict[str, int], int]]:
    """The tile along statement `name`'s row loop (`ps[-2]`, `ps` its real loops): the coefficients
    of the tile's coordinate on the point loops outside the row loop (by loop name; the row's own
    is 1) and the tile's size; None when no enclosing loop tiles the row."""
    space = cols[name][ps[0]].get_domain_space()   # isl's names of the iterators, not the user's
    iterators = [space.get_dim_name(isl.dim_type.set, k) for k in range(space.dim(isl.dim_type.set))]
    iterator_loop = {}                            # iterator -> the point loop that runs it alone
    for p in ps:
        for it in iterators:
            if re.search(r"\] -> \[\(" + re.escape(it) + r"\)\]", str(cols[name][p])):
                iterator_loop[it] = p
    by_position = {p: it for it, p in iterator_loop.items()}
    row_it, inner_it = by_position.get(ps[-2]), by_position.get(ps[-1])
    if row_it is None or inner_it is None:
        return None
    for p in ps[:-2]:
        m = _TILE.match(str(cols[name][p]))
        if not m:
            continue
        aff = isl.Aff(f"{{ [{', '.join(iterators)}] -> [({m.group(1)})] }}")
        coeff = {it: aff.get_coefficient_val(isl.dim_type.in_, k).to_python() for k, it in enumerate(iterators)}
        others = {it: c for it, c in coeff.items() if c and it != row_it}
        if coeff[row_it] != 1 or any(it not in iterator_loop or iterator_loop[it] >= ps[-2] for it in others):
            continue
        return {schedule.dims[iterator_loop[it]].name: c for it, c in others.items()}, int(m.group(2))
    return None


def _jammed(schedule: Schedule, deps, name: str, row: str, inner: str, rows: int) -> Optional[Schedule]:
    """`schedule` with `inner` lagging `row` by the smallest lag of `LAGS` for which `rows` rows
    jammed together are independent of each other; None when no lag is."""
    own = own_dependences(schedule.model, deps, name)
    for lag in LAGS:
        try:
            jammed = schedule.skew(inner, row, lag).unroll_and_jam(row, rows)
        except (PolycError, IslBudgetError, isl.Error):
            continue
        if not carried_at(jammed, own, jammed.dim_index(f"{row}_inner")):
            return jammed
    return None


def jammed_sweeps(decided: Schedule, deps) -> Schedule:
    """`decided`, or a repair of it in which the rows of each in-place sweep advance `ROWS` at a
    time, each lagging the one before (see the module docstring), proven against `deps`."""
    try:
        chains = sweep_chains(decided, deps)
        schedule = decided
        for name in chains:
            cols, all_loops = schedule_columns(schedule)
            ps = [p for p in all_loops[name] if not schedule.dims[p].unroll.is_full]
            if len(ps) < len(all_loops[name]):
                continue    # jammed already (with a statement sharing its loops), or unrolled
            row, inner = schedule.dims[ps[-2]].name, schedule.dims[ps[-1]].name
            rows = ROWS
            aligned = schedule
            tile = _tile_of(schedule, cols, name, ps)
            if tile is not None:
                along, size = tile
                common = math.gcd(size, ROWS)
                rows = common if common > 1 else ROWS
                for loop, c in along.items():
                    aligned = aligned.skew(row, loop, c)
            jammed = _jammed(aligned, deps, name, row, inner, rows)
            if jammed is None and aligned is not schedule:
                jammed = _jammed(schedule, deps, name, row, inner, rows)
            if jammed is not None:
                schedule = jammed
        if schedule is not decided:
            check_legal(schedule, deps, "running the rows of in-place sweeps together")
        return schedule
    except (PolycError, IslBudgetError, isl.Error):
        return decided
