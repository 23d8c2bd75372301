"""`pack("S1")`: run a contraction `T[m, n] += X[m, k] * Y[k, n]` as BLAS does.

Before::

    for m:
      for n:
        for k:
          S1(m, n, k)

After `pack("S1")` (the loops the plan names; C code calls a packed-panel helper)::

    for n_block:                  # floor(n / nc)
      for k_block:                # floor(k / kc): the k-slice of Y copied into a panel
        for m_block:              # floor(m / mc): the m-slice of X copied into a panel
          for n_panel:            # floor(n / nr)
            for m_panel:          # floor(m / mr)
              for k_packed:
                for m_row:        # mr rows x nv vectors: the register tile
                  for n_lane:
                    S1(m, n, k)

The pack plan (`Schedule.packing`) records blocks `kc`, `mc`, `nc` and the `mr` x `nv`-vector
register tile (defaults from the caches).  See polyc.schedule.packing for the proof obligations.
"""
from __future__ import annotations

from typing import Optional, Union

from .. import packing
from ..params import Param, Primitive
from ..state import ScheduleState
from . import obligations


def pack(s: ScheduleState, statement: Union[str, int], *, mr: Optional[int] = None, nv: Optional[int] = None,
         kc: Optional[int] = None, mc: Optional[int] = None, nc: Optional[int] = None,
         vector_bytes: Optional[int] = None, lanes: Optional[str] = None, target=None) -> ScheduleState:
    """Run contraction `statement` with packed operand panels and a register tile.

    `target` (a `polyc.Target`, default the host) gives the defaults of the blocks and the vector
    width; the step records the values used, so a replay needs no Target (it is no parameter)."""
    return packing.pack(s, statement, mr=mr, nv=nv, kc=kc, mc=mc, nc=nc, vector_bytes=vector_bytes, lanes=lanes,
                        target=target)


PRIMITIVE = Primitive(
    name="pack",
    params=(Param("statement", "statement", "the contraction statement (name or position)"),
            Param("mr", "optional_int", "rows of the register tile", default=None, minimum=1,
                  maximum=packing.MAX_REGISTER_TILE),
            Param("nv", "optional_int", "vectors per row of the register tile", default=None, minimum=1,
                  maximum=packing.MAX_REGISTER_TILE),
            Param("kc", "optional_int", "the k block", default=None, minimum=1, maximum=packing.MAX_BLOCK),
            Param("mc", "optional_int", "the m block (a multiple of mr)", default=None, minimum=1,
                  maximum=packing.MAX_BLOCK),
            Param("nc", "optional_int", "the n block (a multiple of nv * lanes)", default=None, minimum=1,
                  maximum=packing.MAX_BLOCK),
            Param("vector_bytes", "optional_int", "the SIMD register width in bytes", default=None, minimum=16,
                  maximum=256),
            Param("lanes", "tensor", "a tensor one factor reads: SIMD lanes run along that factor's loops "
                  "(default: the loops the target is laid out along)", default=None),
            Param("target", "target", "the machine whose caches and SIMD width give the defaults", default=None)),
    apply=pack,
    doc=__doc__,
    obligations=obligations.COMMON + (obligations.CONTRACTION,),
    targets=frozenset({"c"}),
)
