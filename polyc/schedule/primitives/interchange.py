"""`interchange("i", "j")`: swap two loops.

Before::

    for i:
      for j:
        S(i, j)

After `interchange("i", "j")`::

    for j:
      for i:
        S(i, j)
"""
from __future__ import annotations

from ..params import Param, Primitive
from ..rewrite import loop_index, step
from ..state import ScheduleState
from . import obligations
from .reorder import permute


def interchange(s: ScheduleState, a: str, b: str) -> ScheduleState:
    """Swap loops `a` and `b`."""
    st = step("interchange", a, b)
    return permute(s, (b, a), st) if loop_index(s, a) < loop_index(s, b) else permute(s, (a, b), st)


PRIMITIVE = Primitive(
    name="interchange",
    params=(Param("a", "loop", "one loop"), Param("b", "loop", "the other loop")),
    apply=interchange,
    doc=__doc__,
    obligations=obligations.COMMON,
)
