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

from typing import Dict, List, Optional, Sequence, Tuple

from .rewrite import remap, scalar_value, time_vars
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
