"""`unroll_and_jam("i", 4)`: unroll a loop by a factor and jam the copies into the innermost loop.

Before::

    for i:
      for j:
        S(i, j)

After `unroll_and_jam("i", 4)`::

    for i_outer:                  # floor(i / 4)
      for j:
        for i_inner [unroll]:     # i: 4 copies of the body, written out
          S(i, j)

`separate=True` runs the last, partial group of iterations after the full ones (an ordering
dimension just outside `i_outer`, computed exactly by isl), so the jammed copies of full groups
carry no guards and stay vectorisable.
"""
from __future__ import annotations

from dataclasses import replace

import islpy as isl

from ...poly.islutil import isl_budget
from ..integers import MAX_UNROLL_FACTOR, positive_int
from ..params import Param, Primitive
from ..rewrite import finish, loop_index, remap, statement_varies, step, time_vars
from ..state import Dim, ScheduleState, Unroll
from . import obligations
from .split import split


def unroll_and_jam(s: ScheduleState, loop: str, factor: int, separate: bool = False) -> ScheduleState:
    """Split `loop` by `factor`, move the point loop `{loop}_inner` innermost and unroll it fully."""
    positive_int(factor, "the unroll-and-jam factor", MAX_UNROLL_FACTOR)
    st = step("unroll_and_jam", loop, factor, separate=True if separate else None)
    split_s = split(s, loop, factor)
    inner = f"{loop}_inner"
    k = split_s.dim_index(inner)
    last_loop = max((j for j, d in enumerate(split_s.dims) if d.is_loop and j != k), default=-1)
    n = len(split_s.dims)
    order = list(range(n))
    if last_loop > k:  # move the point loop just inside the innermost other loop
        order.remove(k)
        order.insert(order.index(last_loop) + 1, k)
    t = time_vars(n)
    dims = [split_s.dims[j] for j in order]
    dims[order.index(k)] = replace(split_s.dims[k], unroll=Unroll.full())
    moved = replace(split_s, maps=remap(split_s, [t[j] for j in order]), dims=tuple(dims))
    if separate:
        outer_pos = split_s.dim_index(f"{loop}_outer")
        moved = _separate_partial_groups(s, moved, loop_index(s, loop), outer_pos, factor)
    # Record one step for the whole primitive (the split is part of it).
    base = replace(moved, history=s.history, steps=s.steps)
    return finish(base, st)


def _separate_partial_groups(s: ScheduleState, moved: ScheduleState, k: int, pos: int, factor: int) -> ScheduleState:
    """`moved` with a scalar dimension inserted at `pos`: 0 for instances whose group of `factor`
    iterations of loop dimension `k` (of `s`) is complete, 1 for the rest."""
    n = len(s.dims)
    t = time_vars(k + 1)
    head = ", ".join(t)
    to_group = isl.Map(f"{s.model.pstr} -> {{ [{head}] -> [{', '.join(t[:k] + ['g0'])}] : "
                       f"{factor}g0 <= {t[k]} < {factor}g0 + {factor} }}")

    def at(m: isl.Map, value: int) -> isl.Map:
        return m.fix_val(isl.dim_type.out, pos, isl.Val.int_from_si(m.get_ctx(), value))

    maps = []
    with isl_budget(f"separating the partial groups of loop {s.dims[k].name!r}"):
        for name, m in moved.maps:
            new = m.insert_dims(isl.dim_type.out, pos, 1)
            if not statement_varies(s, name, k):
                maps.append((name, at(new, 0)))
                continue
            dom = s.model.domains[name]
            prefix = s.statement_map(name).intersect_domain(dom).project_out(isl.dim_type.out, k + 1, n - k - 1)
            points = prefix.range()
            groups = points.apply(to_group)
            missing = points.complement().apply(to_group).intersect(groups)
            full = prefix.apply_range(to_group).intersect_range(groups.subtract(missing)).domain()
            rest = dom.subtract(full)
            both = at(new.intersect_domain(full), 0).union(at(new.intersect_domain(rest), 1))
            maps.append((name, both.coalesce()))
    dims = list(moved.dims)
    dims.insert(pos, Dim(None))
    return replace(moved, maps=tuple(maps), dims=tuple(dims))


PRIMITIVE = Primitive(
    name="unroll_and_jam",
    params=(Param("loop", "loop", "the loop whose iterations are jammed"),
            Param("factor", "positive_int", "iterations per jammed copy", maximum=MAX_UNROLL_FACTOR),
            Param("separate", "bool", "run the last, partial group separately (no guards)", default=False)),
    apply=unroll_and_jam,
    doc=__doc__,
    obligations=obligations.COMMON + (obligations.SMALL_TRIP_COUNT, obligations.INSTANCES_ONCE),
)
