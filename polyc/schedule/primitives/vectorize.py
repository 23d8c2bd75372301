"""`vectorize("j")`: run the innermost loop as SIMD lanes (`omp simd`).

Before::

    for i:
      for j:
        S(i, j)

After `vectorize("j")`::

    for i:
      for j [vector]:       # omp simd
        S(i, j)

Needs no carried dependence and `j` innermost for every statement it iterates (fully unrolled
loops inside it are no loops).  `reduction=True` also accepts a loop carrying only a reduction's
updates of one element (`y[i] += A[i, j] * x[j]` along j; likewise `*`, max, min): the element
lives in a vector accumulator for the loop (`omp simd reduction`).  This reassociates the
reduction: a float result differs from the written order by rounding (relative error about
`n * eps` for `n` terms); max/min keep numpy's NaN propagation.
"""
from __future__ import annotations

from ...poly.islutil import isl_budget
from ..integers import require_bool
from ..legality import carried_at
from ..params import Param, Primitive
from ..rewrite import dependences_of, loop_index, mark_loop, step
from ..state import LoopKind, ScheduleState
from . import obligations


def vectorize(s: ScheduleState, loop: str, reduction: bool = False) -> ScheduleState:
    """Run the innermost loop `loop` as SIMD lanes; `reduction=True` allows a reduction's updates."""
    require_bool(reduction, "vectorize's reduction")
    st = step("vectorize", loop, reduction=True if reduction else None)
    k = loop_index(s, loop)
    needs_reduction = False
    if reduction:
        with isl_budget(f"checking {st.call_text()}"):
            needs_reduction = bool(carried_at(s, dependences_of(s.model), k))
    return mark_loop(s, loop, st, s.dims[k].with_kind(LoopKind.VECTORIZED, reduction=needs_reduction))


PRIMITIVE = Primitive(
    name="vectorize",
    params=(Param("loop", "loop", "the innermost loop to run as SIMD lanes"),
            Param("reduction", "bool", "allow a loop carrying only one element's reduction updates",
                  default=False)),
    apply=vectorize,
    doc=__doc__,
    obligations=obligations.COMMON + (obligations.NOT_CARRIED, obligations.INNERMOST, obligations.REDUCTION_ONLY,
                                      obligations.ONE_TARGET),
    targets=frozenset({"c"}),
)
