"""Which loops each statement really runs in a schedule, and where it accumulates: the facts the
steps of `schedule="auto"` after the isl scheduler (marks, jamming, row repairs) all read."""
from __future__ import annotations

from typing import Dict, List

import islpy as isl

from .auto_cost import access_delta
from .auto_reduce import direction_of
from .auto_tree import is_constant
from .state import ScheduleState as Schedule


def schedule_columns(schedule: Schedule):
    """Per statement: each dimension's expression (PwAff), and the positions that are real loops."""
    cols: Dict[str, Dict[int, isl.PwAff]] = {}
    loops_of: Dict[str, List[int]] = {}
    for name in schedule.statements:
        pma = isl.PwMultiAff.from_map(schedule.statement_map(name).intersect_domain(schedule.model.domains[name]))
        cols[name] = {p: pma.get_pw_aff(p) for p in range(len(schedule.dims))}
        loops_of[name] = [p for p, d in enumerate(schedule.dims)
                          if d.name is not None and not is_constant(cols[name][p])]
    return cols, loops_of


def real_loops(schedule: Schedule):
    """`schedule_columns`, with each statement's loops less the fully unrolled ones (register
    lanes, which are no loops in the generated code)."""
    cols, all_loops = schedule_columns(schedule)
    return cols, {s: [p for p in ps if not schedule.dims[p].unroll.is_full] for s, ps in all_loops.items()}


def accumulates_inside(model, name: str, cols, loops: List[int]) -> bool:
    """Statement `name` accumulates into one element along its innermost loop (`y[i] += ...` over
    j).  Inside an OpenMP-outlined parallel loop gcc no longer knows the arrays do not alias, so it
    keeps such an accumulator in memory instead of a register: several times slower than the same
    loop run sequentially (see `codegen_keeps_restrict`)."""
    st = model.program.statement(name)
    if not st.update or not loops:
        return False
    v = direction_of(model, name, cols, loops, loops[-1])
    return v is not None and not any(access_delta(st.target, st.iterators, v))
