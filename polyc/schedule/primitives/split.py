"""`split("i", 4)`: strip-mine one loop into `i_outer` and `i_inner` (or the names given).

Before::

    for i:
      S(i)

After `split("i", 4)`::

    for i_outer:            # floor(i / 4)
      for i_inner:          # i, 4 values per i_outer
        S(i)
"""
from __future__ import annotations

from typing import Optional

from ..integers import positive_int
from ..params import Param, Primitive
from ..rewrite import step
from ..state import ScheduleState
from . import obligations
from .tile import strip_mine


def split(s: ScheduleState, loop: str, factor: int, outer: Optional[str] = None,
          inner: Optional[str] = None) -> ScheduleState:
    """Strip-mine one loop: `loop` -> `{loop}_outer` (floor(loop/factor)), `{loop}_inner` (loop)."""
    positive_int(factor, "the split factor")
    names = {loop: (outer or f"{loop}_outer", inner or f"{loop}_inner")}
    return strip_mine(s, [(loop, factor)], step("split", loop, factor, outer=outer, inner=inner), names)


PRIMITIVE = Primitive(
    name="split",
    params=(Param("loop", "loop", "the loop to strip-mine"),
            Param("factor", "positive_int", "iterations per outer iteration"),
            Param("outer", "name", "the name of the outer loop (default `{loop}_outer`)", default=None),
            Param("inner", "name", "the name of the inner loop (default `{loop}_inner`)", default=None)),
    apply=split,
    doc=__doc__,
    obligations=obligations.COMMON + (obligations.INSTANCES_ONCE,),
)
