"""`map_to_blocks("i")`: run a loop's iterations on different CUDA blocks.

Before::

    for i:
      for j:
        S(i, j)

After `map_to_blocks("i")`::

    for i [block]:          # blockIdx.x (the innermost mapped loop)
      for j:
        S(i, j)

Illegal when the loop carries a dependence (blocks cannot synchronise).  See polyc.schedule.gpu.
"""
from __future__ import annotations

from dataclasses import replace

from .. import gpu
from ..params import Param, Primitive
from ..rewrite import step
from ..state import ScheduleState
from . import obligations


def recorded(old: ScheduleState, new: ScheduleState, name: str, loops) -> ScheduleState:
    """`new` with its history replaced by old's history plus the one step (serialisable)."""
    st = step(name, *loops)
    return replace(new, history=old.history + (st.call_text(),), steps=old.steps + (st,))


def map_to_blocks(s: ScheduleState, *loops: str) -> ScheduleState:
    """Map loops to CUDA blocks."""
    return recorded(s, gpu.map_to_blocks(s, *loops), "map_to_blocks", loops)


PRIMITIVE = Primitive(
    name="map_to_blocks",
    params=(Param("loops", "loops", "the loops to run on blocks (innermost -> blockIdx.x)"),),
    apply=map_to_blocks,
    doc=__doc__,
    obligations=(obligations.NOT_CARRIED,),
    targets=frozenset({"cuda", "cuda-emu"}),
)
