"""Tile sizes read back from a schedule: which dimensions are `floor(var / size)` of a loop variable.

The tuner's features and its first, variant-based search ask what tiles a schedule (usually an
automatic one) uses.  isl keeps a tile loop as an existentially quantified constraint in a map's
text, so the sizes are read from each output dimension as a piecewise quasi-affine function,
which isl prints as `floor((i)/64)`.
"""
from __future__ import annotations

import re
from typing import Any, Dict

import islpy as isl

_FLOOR = re.compile(r"floor\(\((\w+)\)/(\d+)\)")


def tile_sizes(schedule: Any) -> Dict[str, int]:
    """Loop variable -> tile size, for every schedule dimension that is `floor(var / size)` of some
    statement (the first size seen per variable, in statement and dimension order)."""
    sizes: Dict[str, int] = {}
    for _, m in schedule.maps:
        try:
            pma = isl.PwMultiAff.from_map(m)
        except isl.Error:       # not single-valued as one piecewise function: no tile loops read
            continue
        for k in range(pma.dim(isl.dim_type.out)):
            for var, size in _FLOOR.findall(str(pma.get_pw_aff(k))):
                sizes.setdefault(var, int(size))
    return sizes
