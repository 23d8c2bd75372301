"""`index_split("j", at="k")`: run a loop in three parts, before, at and after an enclosing loop's value.

Before::

    for k in 0..N-1:
      for j in 0..N-1:
        S(k, j)

After `index_split("j", at="k")`::

    for k in 0..N-1:
      for j in 0..k-1:        # j < k
        S(k, j)
      S(k, k)                 # j == k
      for j in k+1..N-1:      # j > k
        S(k, j)

Index-set splitting (the term of Pluto's and Griebl's papers).  The instances run in exactly the
order they did: for fixed outer loops, the part is a non-decreasing function of `j`.  What changes
is which loop carries a dependence: where every pair of instances that the loop `j` orders has one
end on the plane `j == k + offset` (Floyd-Warshall's row and column `k`, read by every `(i, j)` of
step `k` and written at `j == k`), the pairs now run between the parts, so the loops `j < k` and
`j > k` carry none and can be vectorised or run in parallel (`"auto"` splits where this pays:
`polyc.schedule.auto_split`).
"""
from __future__ import annotations

import islpy as isl

from ...errors import PolycError
from ...poly.islutil import isl_budget
from ..integers import schedule_int
from ..params import Param, Primitive
from ..rewrite import Step, finish_in_parts, loop_index, time_vars
from ..state import ScheduleState as Schedule
from . import obligations

#: The parts, in their order: before the plane, on it, after it.
PARTS = ("<", "=", ">")


def index_split(s: Schedule, loop: str, at: str, offset: int = 0) -> Schedule:
    """Run `loop` as three parts in order: its iterations below, equal to and above the value of the
    enclosing loop `at` plus `offset` (each part keeps the loop's name and marks)."""
    schedule_int(offset, "index_split's offset")
    st = Step("index_split", (loop,), (("at", at), ("offset", offset)))
    level, outer = loop_index(s, loop), loop_index(s, at)
    if outer >= level:
        enclosing = [d.name for d in s.dims[:level] if d.name is not None]
        raise PolycError(f"index_split: {at!r} must be a loop enclosing {loop!r} "
                         f"({'one of ' + ', '.join(enclosing) if enclosing else 'it has none'})")
    t = time_vars(len(s.dims))
    with isl_budget(f"splitting loop {loop!r} for {st.call_text()}"):
        parts = [(v, isl.Set(f"{s.model.pstr} -> {{ [{', '.join(t)}] : {t[level]} {rel} {t[outer]} + {offset} }}"))
                 for v, rel in enumerate(PARTS)]
        return finish_in_parts(s, st, level, parts)


PRIMITIVE = Primitive(
    name="index_split",
    params=(Param("loop", "loop", "the loop to split"),
            Param("at", "loop", "an enclosing loop: the split is where `loop` equals its value plus `offset`"),
            Param("offset", "int", "added to the enclosing loop's value", default=0)),
    apply=index_split,
    doc=__doc__,
    obligations=obligations.COMMON + (obligations.INSTANCES_ONCE,),
)
