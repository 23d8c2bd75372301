"""`parallel("i")`: run a loop's iterations in parallel (OpenMP `parallel for`).

Before::

    for i:
      for j:
        S(i, j)

After `parallel("i")`::

    for i [parallel]:       # omp parallel for
      for j:
        S(i, j)

Illegal when `i` carries a dependence.  `reduction=True` also accepts a loop that carries only a
reduction's updates (`X[..] += f(..)` with f not reading X; likewise `*=`, max, min): the loop is
then marked as reassociating that reduction (per-thread accumulators combined at the end, or
atomic updates).  Reassociating a floating-point reduction changes rounding.
"""
from __future__ import annotations

from ...poly.islutil import isl_budget
from ..integers import require_bool
from ..legality import carried_at, check_parallel
from ..params import Param, Primitive
from ..rewrite import dependences_of, is_reduction_dependence, loop_index, mark_loop, step
from ..state import LoopKind, ScheduleState
from . import obligations


def parallel(s: ScheduleState, loop: str, reduction: bool = False) -> ScheduleState:
    """Run the iterations of `loop` in parallel; `reduction=True` allows reduction-only dependences."""
    require_bool(reduction, "parallel's reduction")
    st = step("parallel", loop, reduction=True if reduction else None)
    k = loop_index(s, loop)
    needs_reduction = False
    if reduction:
        deps = dependences_of(s.model)
        with isl_budget(f"checking {st.call_text()}"):
            check_parallel(s, deps, loop, st.call_text(), ignore=lambda d: is_reduction_dependence(s.model, d))
            needs_reduction = bool(carried_at(s, deps, k))
    return mark_loop(s, loop, st, s.dims[k].with_kind(LoopKind.PARALLEL, reduction=needs_reduction))


def parallel_reduction(s: ScheduleState, loop: str) -> ScheduleState:
    """Same as `parallel(loop, reduction=True)`."""
    return parallel(s, loop, reduction=True)


PRIMITIVE = Primitive(
    name="parallel",
    params=(Param("loop", "loop", "the loop to run in parallel"),
            Param("reduction", "bool", "allow a loop carrying only reduction updates (reassociates it)",
                  default=False)),
    apply=parallel,
    doc=__doc__,
    obligations=obligations.COMMON + (obligations.NOT_CARRIED, obligations.REDUCTION_ONLY),
    targets=frozenset({"c"}),
)

#: `parallel_reduction(loop)`: an alias kept for saved files and the Schedule method.
ALIAS = Primitive(
    name="parallel_reduction",
    params=(Param("loop", "loop", "the loop to run in parallel, reassociating its reduction"),),
    apply=parallel_reduction,
    doc="Same as `parallel(loop, reduction=True)`.",
    obligations=PRIMITIVE.obligations,
    targets=PRIMITIVE.targets,
)
