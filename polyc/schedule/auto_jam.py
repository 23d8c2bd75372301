"""Independent reduction chains in `schedule="auto"`: distributed out of loops they share with
elementwise work, and jammed several rows at a time (`unroll_and_jam`, proven)."""
from __future__ import annotations

from typing import Iterable, Tuple

import islpy as isl

from ..errors import IslBudgetError, PolycError
from .auto_loops import accumulates_inside, real_loops
from .state import ScheduleState as Schedule


#: Rows whose reductions run side by side after `jam_reductions` (enough to cover an add's latency).
JAM_ROWS = 8


def split_reduction_chains(schedule: Schedule) -> Schedule:
    """Distribute a reduction chain out of an innermost loop it shares with other statements (as
    `s[i] += e[i, j]` beside `e[i, j] = exp(...)`): a float chain keeps its whole loop scalar, on
    its own it leaves the others to run as SIMD lanes.  Each step is the proven `distribute`."""
    cols, loops_of = real_loops(schedule)
    model = schedule.model
    fixed = schedule.fixed_positions
    chains = []
    for s, ps in loops_of.items():
        if not ps or not accumulates_inside(model, s, cols, ps):
            continue
        p = ps[-1]
        # Statements in the very same innermost loop: same constants before it, iterating it too.
        partners = [o for o, qs in loops_of.items() if o != s and qs and qs[-1] == p
                    and fixed[o][:p] == fixed[s][:p] and not accumulates_inside(model, o, cols, qs)]
        if partners:
            chains.append((s, schedule.dims[p].name))
    for s, loop in chains:
        try:
            schedule = schedule.distribute(s, loop=loop)
        except (PolycError, IslBudgetError, isl.Error):
            continue
    return schedule


def packable_statements(program) -> Tuple[str, ...]:
    """The statements `Schedule.pack` recognises as contractions (`packing.contraction_form`)."""
    from .packing import contraction_form
    return tuple(st.name for st in program.statements if not isinstance(contraction_form(program, st.name), str))


def _rows_alike(schedule: Schedule, name: str, row: int, inner: int) -> bool:
    """Whether statement `name`'s loop at position `inner` runs over the same values for every
    value of its loop at `row` (a box, not a triangle's `j <= i`): jammed rows of unequal length
    need guards inside the inner loop, which then loses its vector accumulators."""
    points = schedule.statement_map(name).intersect_domain(schedule.model.domains[name]).range()
    n = points.dim(isl.dim_type.set)
    both = points.project_out(isl.dim_type.set, inner + 1, n - inner - 1) \
        .project_out(isl.dim_type.set, row + 1, inner - row - 1).project_out(isl.dim_type.set, 0, row)
    rows = both.project_out(isl.dim_type.set, 1, 1)
    values = both.project_out(isl.dim_type.set, 0, 1)
    return both.is_equal(rows.flat_product(values).reset_space(both.get_space()))


def jam_reductions(schedule: Schedule, skip: Iterable[str] = (), lone_only: bool = False) -> Schedule:
    """Unroll-and-jam the loop around each reduction chain (`m[i] = max(m[i], X[i, j])` over j): a
    floating-point chain runs one operation per its latency (not reassociated, so not vectorised);
    `JAM_ROWS` rows' chains side by side keep the units busy, each row still in its own order.
    A reassociated chain is one vector accumulator, as latency-bound, and jammed rows share the
    loads of operands that do not move with the row (matvec's `x[j]`).  The `unroll_and_jam`
    primitive proves each step; one that is illegal is skipped.  Chains of the statements in `skip`
    (those packing will take) and the loops around them stay as they are.  With `lone_only`, only
    a loop that holds nothing but chains is jammed: rows of elementwise work beside a chain
    (softmax's `exp`) gain nothing and lose their vector loops (softmax 4096² 6x slower)."""
    cols, loops_of = real_loops(schedule)
    model = schedule.model
    skip = set(skip)
    kept = {schedule.dims[p].name for s in skip for p in loops_of.get(s, ())}
    chains = {s for s, ps in loops_of.items() if len(ps) >= 2 and accumulates_inside(model, s, cols, ps)}

    def alone(s: str, p: int) -> bool:
        """Whether every statement in chain `s`'s loop at position `p` is a chain too."""
        fixed = schedule.fixed_positions
        return all(o in chains for o, qs in loops_of.items() if p in qs and fixed[o][:p] == fixed[s][:p])
    around = [schedule.dims[ps[-2]].name for s, ps in loops_of.items()
              if s in chains and s not in skip and schedule.dims[ps[-2]].name not in kept
              and (not lone_only or (alone(s, ps[-2]) and _rows_alike(schedule, s, ps[-2], ps[-1])))]
    for name in dict.fromkeys(around):
        try:
            schedule = schedule.unroll_and_jam(name, JAM_ROWS, separate=True)
        except (PolycError, IslBudgetError, isl.Error):
            continue
    return schedule
