"""`tile(i=32, j=32)`: rectangular tiling (strip-mining several loops, tile loops outside).

Before::

    for i:
      for j:
        S(i, j)

After `tile(i=32, j=32)`::

    for i_outer:            # floor(i / 32)
      for j_outer:          # floor(j / 32)
        for i_inner:        # i, 32 values per i_outer
          for j_inner:      # j
            S(i, j)

Tile loops go, in the order of the named loops, just outside the outermost named loop; point
loops stay where the loops were.  Parallel / block kinds move to the tile loop.
"""
from __future__ import annotations

from dataclasses import replace
from typing import List, Mapping, Optional, Sequence, Tuple

from ...errors import PolycError, ScheduleArgumentError
from ..integers import positive_int
from ..params import Param, Primitive
from ..rewrite import Step, check_new_names, finish, loop_index, remap, step, time_vars
from ..state import OUTER_KINDS, Dim, ScheduleState
from . import obligations


def strip_mine(s: ScheduleState, sizes: Sequence[Tuple[str, int]], st: Step,
               names: Optional[Mapping[str, Tuple[str, str]]] = None) -> ScheduleState:
    """Strip-mine the loops in `sizes` and put their tile loops outside the outermost of them
    (shared by tile, split and unroll_and_jam)."""
    if not sizes:
        raise PolycError(f"tile needs at least one loop and size, e.g. tile(i=32); "
                         f"loops: {', '.join(s.loop_names)}")
    positions = {}
    for loop, size in sizes:
        k = loop_index(s, loop)
        if not s.dims[k].is_loop:
            raise PolycError(f"{loop!r} is not a loop")
        if k in positions:
            raise PolycError(f"loop {loop!r} named twice in {st.call_text()}")
        positions[k] = positive_int(size, f"the tile size of {loop!r}")
    order = sorted(positions)
    names = dict(names or {})
    outer_inner = {k: names.get(s.dims[k].name, (f"{s.dims[k].name}_outer", f"{s.dims[k].name}_inner"))
                   for k in order}
    check_new_names(s, [n for k in order for n in outer_inner[k] if n != s.dims[k].name],
                    replacing=[s.dims[k].name for k in order])
    t = time_vars(len(s.dims))
    exprs: List[str] = []
    dims: List[Dim] = []
    for k, d in enumerate(s.dims):
        if k == order[0]:
            for j in order:
                dj = s.dims[j]
                exprs.append(f"floor({t[j]}/{positions[j]})")
                outer_kinds = dj.kinds & OUTER_KINDS
                dims.append(Dim(outer_inner[j][0], kinds=outer_kinds, reduction=dj.reduction and bool(outer_kinds),
                                origin=dj.origin))
        exprs.append(t[k])
        if k in positions:
            inner_kinds = d.kinds - OUTER_KINDS
            dims.append(replace(d, name=outer_inner[k][1], kinds=inner_kinds,
                                reduction=d.reduction and bool(inner_kinds)))
        else:
            dims.append(d)
    return finish(s, st, maps=remap(s, exprs), dims=dims)


def tile(s: ScheduleState, sizes: Optional[Mapping[str, int]] = None, /, **kw_sizes: int) -> ScheduleState:
    """Rectangular tiling: `tile(i=32, j=32)` (or `tile({"i": 32, "j": 32})`)."""
    if sizes is not None and not isinstance(sizes, Mapping):
        raise ScheduleArgumentError(f"tile takes loop sizes as keywords (tile(i=32)) or a dict, not {sizes!r}",
                                    "sizes")
    all_sizes = dict(sizes or {})
    unnamed = [loop for loop in all_sizes if not isinstance(loop, str)]
    if unnamed:
        raise ScheduleArgumentError(f"tile's dict maps loop names to sizes; {unnamed[0]!r} is no loop name "
                                    f"(the loops are {', '.join(s.loop_names)})", "sizes")
    twice = sorted(set(all_sizes) & set(kw_sizes))
    if twice:
        raise ScheduleArgumentError(f"tile gives loop {twice[0]!r} a size twice, in the dict and as a keyword",
                                    f"kwargs.{twice[0]}")
    all_sizes.update(kw_sizes)
    return strip_mine(s, list(all_sizes.items()), step("tile", **all_sizes))


PRIMITIVE = Primitive(
    name="tile",
    params=(Param("sizes", "loop_sizes", "loop name -> tile size, as a dict", default=None),
            Param("kw_sizes", "loop_sizes", "loop name -> tile size, as keywords (tile(i=32))", default={})),
    apply=tile,
    doc=__doc__,
    obligations=obligations.COMMON + (obligations.INSTANCES_ONCE,),
)
