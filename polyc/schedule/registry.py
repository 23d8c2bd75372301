"""The one registry of schedule primitives: `PRIMITIVES` (name -> `Primitive`) and `primitive(name)`.

`Schedule`'s methods, JSON replay (`serialize`) and the documentation's list of primitives all
come from here; a tuner enumerates it (each `Param` says which loops, statements or integer
ranges an argument takes).  `primitive("tile").apply(schedule, i=32)` is `schedule.tile(i=32)`.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping, Sequence

from ..errors import PolycError
from .params import REQUIRED, Param, Primitive, check_arguments
from .primitives import (distribute, fuse, index_split, interchange, map_to_blocks, map_to_threads, pack, parallel,
                         peel, reorder, reverse, shift, skew, split, tile, unroll, unroll_and_jam, vectorize)

__all__ = ["PRIMITIVES", "ALIASES", "REQUIRED", "Param", "Primitive", "primitive", "replay_primitive",
           "check_arguments"]

_MODULES = (tile, split, interchange, reorder, skew, reverse, shift, fuse, distribute, peel, index_split, unroll, unroll_and_jam,
            parallel, vectorize, pack, map_to_blocks, map_to_threads)

#: Every primitive, in the order the documentation lists them.
PRIMITIVES: Mapping[str, Primitive] = MappingProxyType({m.PRIMITIVE.name: m.PRIMITIVE for m in _MODULES})

#: Other names a saved schedule may call (kept for files and the `Schedule` method of that name).
ALIASES: Mapping[str, Primitive] = MappingProxyType({parallel.ALIAS.name: parallel.ALIAS})


def primitive(name: str) -> Primitive:
    """The primitive called `name`; PolycError listing them when there is none."""
    found = PRIMITIVES.get(name)
    if found is None:
        raise PolycError(f"no schedule primitive named {name!r}; the primitives are: {', '.join(PRIMITIVES)}")
    return found


def replay_primitive(name: str) -> Primitive:
    """The primitive (or alias) a saved step names; KeyError when there is none."""
    return PRIMITIVES[name] if name in PRIMITIVES else ALIASES[name]


def apply_checked(schedule: Any, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """`schedule` with primitive `name` applied to arguments validated against its `Param`s first."""
    prim = replay_primitive(name)
    check_arguments(prim, args, kwargs)
    return prim.apply(schedule, *args, **kwargs)
