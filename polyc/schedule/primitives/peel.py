"""`peel("i", front=1, back=0)`: run the first / last iterations of a loop as separate copies.

Before::

    for i in 0..N-1:
      S(i)

After `peel("i", 1, 1)`::

    S(0)                  # for i in 0..0
    for i in 1..N-2:
      S(i)
    S(N-1)                # for i in N-1..N-1

(e.g. to drop boundary conditions from the main loop; the statement maps become piecewise).
"""
from __future__ import annotations

import islpy as isl

from ...poly.islutil import isl_budget
from ..integers import schedule_int
from ..params import Param, Primitive
from ..rewrite import Step, finish, finish_in_parts, loop_index, time_set, time_vars
from ..state import ScheduleState as Schedule
from . import obligations

def peel(s: Schedule, loop: str, front: int = 1, back: int = 0) -> Schedule:
    """Execute the first `front` and the last `back` iterations of every instance of `loop` as
    separate copies of the loop body (e.g. to drop boundary conditions from the main loop)."""
    for v, what in ((front, "front"), (back, "back")):
        schedule_int(v, f"peel's {what}", minimum=0)
    st = Step("peel", (loop,), tuple((k, v) for k, v in (("front", front), ("back", back))))
    level = loop_index(s, loop)
    if front == 0 and back == 0:
        return finish(s, st)
    n = len(s.dims)
    t, u = time_vars(n), [f"u{k}" for k in range(n)]
    same_outer = [f"{t[j]} = {u[j]}" for j in range(level)]

    def having_neighbour(cond: str) -> isl.Set:
        rel = isl.Map(f"{s.model.pstr} -> {{ [{', '.join(t)}] -> [{', '.join(u)}] : "
                      f"{' and '.join(same_outer + [cond])} }}")
        return rel.intersect_domain(times).intersect_range(times).domain()

    with isl_budget(f"splitting loop {loop!r} for {st.call_text()}"):
        times = time_set(s)
        front_part = times.subtract(having_neighbour(f"{u[level]} <= {t[level]} - {front}")) if front \
            else times.subtract(times)
        back_part = times.subtract(having_neighbour(f"{u[level]} >= {t[level]} + {back}")) if back \
            else times.subtract(times)
        back_part = back_part.subtract(front_part)
        middle = times.subtract(front_part).subtract(back_part)
        return finish_in_parts(s, st, level, [(0, front_part), (1, middle), (2, back_part)])


PRIMITIVE = Primitive(
    name="peel",
    params=(Param("loop", "loop", "the loop to peel"),
            Param("front", "int", "iterations peeled at the start", default=1, minimum=0),
            Param("back", "int", "iterations peeled at the end", default=0, minimum=0)),
    apply=peel,
    doc=__doc__,
    obligations=obligations.COMMON + (obligations.INSTANCES_ONCE,),
)
