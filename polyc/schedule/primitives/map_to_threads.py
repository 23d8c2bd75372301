"""`map_to_threads("j")`: run a loop's iterations on different threads of a CUDA block.

Before::

    for i [block]:
      for j:
        S(i, j)

After `map_to_threads("j")`::

    for i [block]:          # blockIdx.x
      for j [thread]:       # threadIdx.x
        S(i, j)

Illegal when the loop carries a dependence.  See polyc.schedule.gpu.
"""
from __future__ import annotations

from .. import gpu
from ..params import Param, Primitive
from ..state import ScheduleState
from . import obligations
from .map_to_blocks import recorded


def map_to_threads(s: ScheduleState, *loops: str) -> ScheduleState:
    """Map loops to CUDA threads."""
    return recorded(s, gpu.map_to_threads(s, *loops), "map_to_threads", loops)


PRIMITIVE = Primitive(
    name="map_to_threads",
    params=(Param("loops", "loops", "the loops to run on threads (innermost -> threadIdx.x)"),),
    apply=map_to_threads,
    doc=__doc__,
    obligations=(obligations.NOT_CARRIED,),
    targets=frozenset({"cuda", "cuda-emu"}),
)
