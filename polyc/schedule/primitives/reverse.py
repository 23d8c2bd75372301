"""`reverse("i")`: run a loop from its last iteration to its first.

Before::

    for i in 0..N-1:
      S(i)

After `reverse("i")`::

    for i in -(N-1)..0:    # -i
      S(i)
"""
from __future__ import annotations

from ..params import Param, Primitive
from ..rewrite import finish, loop_index, remap, step, time_vars
from ..state import ScheduleState
from . import obligations


def reverse(s: ScheduleState, loop: str) -> ScheduleState:
    """Run `loop` backwards."""
    k = loop_index(s, loop)
    t = time_vars(len(s.dims))
    exprs = list(t)
    exprs[k] = f"-{t[k]}"
    return finish(s, step("reverse", loop), maps=remap(s, exprs))


PRIMITIVE = Primitive(
    name="reverse",
    params=(Param("loop", "loop", "the loop to run backwards"),),
    apply=reverse,
    doc=__doc__,
    obligations=obligations.COMMON,
)
