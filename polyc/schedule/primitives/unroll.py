"""`unroll("k_inner")` / `unroll("k", 4)`: unroll a loop fully, or by a factor.

Before::

    for k_inner in 0..3:
      S(k_inner)

After `unroll("k_inner")` (full: isl writes out every iteration)::

    S(0)
    S(1)
    S(2)
    S(3)

After `unroll("k", 4)` (a factor: a `#pragma GCC unroll 4` hint, the loop stays)::

    for k [unroll 4]:
      S(k)

Full unrolling needs a constant trip count of at most 1024 (split the loop first).  Reordering
nothing, unrolling is always legal.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ...errors import PolycError
from ..integers import MAX_UNROLL_FACTOR, positive_int
from ..params import Param, Primitive
from ..rewrite import MAX_FULL_UNROLL, loop_index, mark_loop, step, trip_count_bound
from ..state import ScheduleState, Unroll
from . import obligations


def unroll(s: ScheduleState, loop: str, factor: Optional[int] = None) -> ScheduleState:
    """Unroll `loop` fully (`factor=None`) or by `factor` (compiler hint)."""
    k = loop_index(s, loop)
    packed = [st for st, plan in s.valid_packing().items() if loop in plan.loops]  # type: ignore[attr-defined]
    if packed:
        raise PolycError(f"cannot unroll loop {loop!r}: it is a loop of the packed nest of {packed[0]}, whose "
                         f"code the packing generator writes itself (its micro-kernel is unrolled already); "
                         f"unroll a loop outside the packed nest")
    if factor is None:
        bound = trip_count_bound(s, k)
        if bound is None or bound > MAX_FULL_UNROLL:
            size = "grows with the sizes" if bound is None else f"has up to {bound} iterations"
            raise PolycError(f"cannot fully unroll loop {loop!r}: its trip count {size}; split it first "
                             f"(split({loop!r}, 4) then unroll({loop + '_inner'!r})), or unroll by a factor")
        return mark_loop(s, loop, step("unroll", loop), replace(s.dims[k], unroll=Unroll.full()))
    f = positive_int(factor, "the unroll factor", MAX_UNROLL_FACTOR)
    return mark_loop(s, loop, step("unroll", loop, factor=f), replace(s.dims[k], unroll=Unroll.by(f)))


PRIMITIVE = Primitive(
    name="unroll",
    params=(Param("loop", "loop", "the loop to unroll"),
            Param("factor", "optional_int", "unroll by this factor (a compiler hint); None: fully",
                  default=None, minimum=1, maximum=MAX_UNROLL_FACTOR)),
    apply=unroll,
    doc=__doc__,
    obligations=obligations.COMMON + (obligations.SMALL_TRIP_COUNT,),
)
