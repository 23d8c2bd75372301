"""The scalar-dimension machinery of the primitives that change which statements share loops
(`primitives/fuse.py`, `distribute.py`, `peel.py`).

They work on the *scalar* dimensions of the schedule (the constants between loop dimensions that
encode textual order).  Two statements run in the same instance of loop L exactly when they
agree on every scalar dimension outside L; so

- fusing nests at L gives them the same scalar values outside L and inserts a new scalar
  dimension just inside L that keeps their bodies in the original order;
- distributing at L inserts a scalar dimension just outside L that separates them;
- peeling L inserts a scalar dimension just outside L whose value is 0 on the first `front`
  iterations, 1 on the middle ones and 2 on the last `back` ones (the statement maps become
  piecewise).

Every result is re-proved against the dependences like any other primitive.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .rewrite import remap, scalar_value, statement_varies, time_vars
from .state import Dim, ScheduleState as Schedule


def statements_of(s: Schedule) -> List[str]:
    """The statement names in statement order."""
    return list(s.statements)


def scalar_positions(s: Schedule, lo: int, hi: int) -> List[int]:
    """The scalar (ordering) dimensions among positions lo..hi-1."""
    return [k for k in range(lo, hi) if not s.dims[k].is_loop]


def scalar_key(s: Schedule, name: str, positions: Sequence[int]) -> Tuple[int, ...]:
    """Statement `name`'s values at the scalar dimensions `positions` (which nest it is in)."""
    return tuple(scalar_value(s, name, k) for k in positions)


def insert_scalar(s: Schedule, at: int, values: Dict[str, int],
                   fixed: Optional[Dict[str, Dict[int, int]]] = None) -> Tuple[tuple, tuple]:
    """Maps and dims with a scalar dimension inserted at position `at` (statement -> value, default
    0), optionally also setting other scalar dimensions of some statements (`fixed`)."""
    t = time_vars(len(s.dims))
    per: Dict[str, List[str]] = {}
    for name in statements_of(s):
        exprs = list(t)
        for k, v in (fixed or {}).get(name, {}).items():
            exprs[k] = str(v)
        exprs.insert(at, str(values.get(name, 0)))
        per[name] = exprs
    dims = list(s.dims)
    dims.insert(at, Dim(None))
    return remap(s, per_statement=per), tuple(dims)


def separate_nests(s: Schedule, fresh: Callable[[str], str]) -> Tuple[tuple, tuple]:
    """Maps and dims in which loop nests that share a loop dimension get their own copies of it.

    A loop dimension is one name for every nest that runs at its position; marks are per
    dimension, so a reduction in one nest (gramschmidt's `nrm += A[i, k] ** 2` over its `c1`)
    keeps another nest's `c1` from running in parallel.  Nests are told apart by their scalar
    values outside the loop (`scalar_key`); each nest after the first moves to a new dimension
    `fresh(name)` inserted just inside the shared one (its statements, whether or not they vary
    there, all move, so their order among themselves is unchanged; the nests differ at a scalar
    outside the loop, so their order against each other is too).  A renaming: no instance runs at
    another time relative to any other."""
    t = time_vars(len(s.dims))
    names = statements_of(s)
    exprs: Dict[str, List[str]] = {n: [] for n in names}
    dims: List[Dim] = []
    for p, d in enumerate(s.dims):
        dims.append(d)
        for n in names:
            exprs[n].append(t[p])
        if not d.is_loop:
            continue
        outside = scalar_positions(s, 0, p)
        key_of = {n: scalar_key(s, n, outside) for n in names}
        keys = list(dict.fromkeys(key_of[n] for n in names if statement_varies(s, n, p)))
        at = len(dims) - 1
        for key in keys[1:]:
            dims.append(replace(d, name=fresh(d.name)))
            for n in names:
                mine = key_of[n] == key
                exprs[n].append(t[p] if mine else "0")
                if mine:
                    exprs[n][at] = "0"
    return remap(s, per_statement=exprs), tuple(dims)
