"""`skew("j", "i", 1)`: `j += factor * i` (the wavefront enabler for stencils).

Before::

    for i:
      for j:             # j
        S(i, j)

After `skew("j", "i")`::

    for i:
      for j:             # j + i
        S(i, j)

The loop keeps its name `j`, now running over `j + factor * i`.
"""
from __future__ import annotations

from ...errors import PolycError
from ..integers import schedule_int
from ..params import Param, Primitive
from ..rewrite import finish, loop_index, remap, step, time_vars
from ..state import ScheduleState
from . import obligations


def skew(s: ScheduleState, loop: str, by_loop: str, factor: int = 1) -> ScheduleState:
    """`loop += factor * by_loop`."""
    k, j = loop_index(s, loop), loop_index(s, by_loop)
    if k == j:
        raise PolycError("skew needs two different loops")
    schedule_int(factor, "the skew factor", nonzero=True)
    t = time_vars(len(s.dims))
    exprs = list(t)
    exprs[k] = f"{t[k]} + {factor}*{t[j]}"
    return finish(s, step("skew", loop, by_loop, factor), maps=remap(s, exprs))


PRIMITIVE = Primitive(
    name="skew",
    params=(Param("loop", "loop", "the loop that is skewed"),
            Param("by_loop", "loop", "the loop it is skewed by"),
            Param("factor", "int", "the skew factor (non-zero)", default=1)),
    apply=skew,
    doc=__doc__,
    obligations=obligations.COMMON,
)
