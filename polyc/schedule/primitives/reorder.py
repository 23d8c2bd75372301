"""`reorder("k", "i", "j")`: permute loops among the positions they occupy together.

Before::

    for i:
      for j:
        for k:
          S(i, j, k)

After `reorder("k", "i", "j")`::

    for k:
      for i:
        for j:
          S(i, j, k)

Scalar (ordering) dimensions stay in place; loops keep their names and kinds.
"""
from __future__ import annotations

from ...errors import PolycError
from ..params import Param, Primitive
from ..rewrite import Step, finish, loop_index, remap, step, time_vars
from ..state import ScheduleState
from . import obligations


def permute(s: ScheduleState, loops, st: Step) -> ScheduleState:
    """`loops` put, in this order, into the positions they occupy together (recorded as `st`)."""
    if len(loops) < 2:
        raise PolycError(f"{st.call_text()} needs at least two loops")
    ks = [loop_index(s, l) for l in loops]
    if len(set(ks)) != len(ks):
        raise PolycError(f"{st.call_text()} names a loop twice")
    slots = sorted(ks)
    perm = list(range(len(s.dims)))
    for slot, k in zip(slots, ks):
        perm[slot] = k
    t = time_vars(len(s.dims))
    dims = [s.dims[perm[k]] for k in range(len(s.dims))]
    return finish(s, st, maps=remap(s, [t[perm[k]] for k in range(len(s.dims))]), dims=dims)


def reorder(s: ScheduleState, *loops: str) -> ScheduleState:
    """Permute the named loops among their own positions."""
    return permute(s, loops, step("reorder", *loops))


PRIMITIVE = Primitive(
    name="reorder",
    params=(Param("loops", "loops", "the loops in their new order (at least two)"),),
    apply=reorder,
    doc=__doc__,
    obligations=obligations.COMMON,
)
