"""Primitives that change which statements share loops: `fuse`, `distribute`, `peel`.

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

from typing import Dict, List, Optional, Sequence, Tuple, Union

import islpy as isl

from ..errors import IllegalScheduleError, PolycError
from ..poly.islutil import isl_budget
from .rewrite import (Step, finish, loop_index, remap, scalar_value, statement_name, statement_varies,
                      time_set, time_vars)
from .integers import schedule_int
from .schedule import Dim, Schedule


def _statements(s: Schedule) -> List[str]:
    return [name for name, _ in s.maps]


def _scalar_positions(s: Schedule, lo: int, hi: int) -> List[int]:
    return [k for k in range(lo, hi) if not s.dims[k].is_loop]


def _key(s: Schedule, name: str, positions: Sequence[int]) -> Tuple[int, ...]:
    return tuple(scalar_value(s, name, k) for k in positions)


def _insert_scalar(s: Schedule, at: int, values: Dict[str, int],
                   fixed: Optional[Dict[str, Dict[int, int]]] = None) -> Tuple[tuple, tuple]:
    """Maps and dims with a scalar dimension inserted at position `at` (statement -> value, default
    0), optionally also setting other scalar dimensions of some statements (`fixed`)."""
    t = time_vars(len(s.dims))
    per: Dict[str, List[str]] = {}
    for name in _statements(s):
        exprs = list(t)
        for k, v in (fixed or {}).get(name, {}).items():
            exprs[k] = str(v)
        exprs.insert(at, str(values.get(name, 0)))
        per[name] = exprs
    dims = list(s.dims)
    dims.insert(at, Dim(None))
    return remap(s, per_statement=per), tuple(dims)


# -- fusion ------------------------------------------------------------------------------------

def _fuse_at(s: Schedule, names: Sequence[str], level: int, into_last: bool, st: Step) -> Schedule:
    outside = _scalar_positions(s, 0, level)
    keys = {n: _key(s, n, outside) for n in _statements(s)}
    nests = sorted({keys[n] for n in names})
    if len(nests) == 1:
        return finish(s, st)
    anchor = nests[-1] if into_last else nests[0]
    members = [n for n in _statements(s) if keys[n] in nests]
    order = {n: nests.index(keys[n]) for n in members}
    fixed = {n: dict(zip(outside, anchor)) for n in members}
    maps, dims = _insert_scalar(s, level + 1, order, fixed)
    return finish(s, st, maps=maps, dims=dims)


def fuse(s: Schedule, *statements: Union[str, int], loop: Optional[str] = None) -> Schedule:
    """Fuse the loop nests holding `statements` so they share loops down to `loop` (default: the
    deepest loop they all iterate where the fusion is legal, trying outer loops after).  The nests
    are fused at the place of the first one, or else of the last one; within the fused loops
    their bodies keep the original order.  Every other statement of those nests moves along."""
    st = Step("fuse", tuple(statements), (("loop", loop),) if loop is not None else ())
    if len(statements) < 2:
        raise PolycError("fuse needs at least two statements, e.g. fuse('S0', 'S1')")
    names = [statement_name(s, x) for x in statements]
    if loop is not None:
        levels = [loop_index(s, loop)]
    else:
        levels = [k for k, d in enumerate(s.dims)
                  if d.is_loop and all(statement_varies(s, n, k) for n in names)]
        if not levels:
            raise PolycError(f"statements {', '.join(names)} iterate no common loop; nothing to fuse")
        levels.reverse()
    first_error: Optional[IllegalScheduleError] = None
    for level in levels:
        for into_last in (False, True):
            try:
                return _fuse_at(s, names, level, into_last, st)
            except IllegalScheduleError as e:
                first_error = first_error or e
    assert first_error is not None
    if len(levels) > 1:
        tried = ", ".join(repr(s.dims[k].name) for k in levels)
        raise IllegalScheduleError(f"{first_error} (fusion at loops {tried} was tried, none is legal)",
                                   dependence=first_error.dependence)
    raise first_error


# -- distribution ------------------------------------------------------------------------------

def distribute(s: Schedule, target: Union[str, int], loop: Optional[str] = None) -> Schedule:
    """Loop distribution.

    - `distribute("i")`: every group of statements that differs in its position inside loop `i`
      gets its own copy of `i` (and of the loops inside), in the original order;
    - `distribute("S1")` (or a position): statement S1 leaves the loops it shares with other
      statements, from the outermost shared loop (or from `loop`): the statements before it, S1,
      and those after it get separate nests.
    """
    st = Step("distribute", (target,), (("loop", loop),) if loop is not None else ())
    statements = _statements(s)
    if isinstance(target, str) and target in s.loop_names and target not in statements:
        if loop is not None:
            raise PolycError("distribute(loop) takes no second loop; use distribute(statement, loop=...)")
        level = loop_index(s, target)
        inside = _scalar_positions(s, level + 1, len(s.dims))
        inner = {n: _key(s, n, inside) for n in statements}
        ranks = sorted(set(inner.values()))
        if len(ranks) == 1:
            raise PolycError(f"loop {target!r} holds a single group of statements; nothing to distribute")
        maps, dims = _insert_scalar(s, level, {n: ranks.index(inner[n]) for n in statements})
        return finish(s, st, maps=maps, dims=dims)
    name = statement_name(s, target)
    if loop is not None:
        level = loop_index(s, loop)
    else:
        level = None
        for k, d in enumerate(s.dims):
            if not d.is_loop:
                continue
            outside = _scalar_positions(s, 0, k)
            mine = _key(s, name, outside)
            if any(_key(s, n, outside) == mine for n in statements if n != name):
                level = k
                break
        if level is None:
            raise PolycError(f"statement {name} shares no loop with another statement; nothing to distribute")
    outside = _scalar_positions(s, 0, level)
    inside = _scalar_positions(s, level + 1, len(s.dims))
    mine_out, mine_in = _key(s, name, outside), _key(s, name, inside)
    values = {}
    for n in statements:
        if n != name and _key(s, n, outside) == mine_out:
            values[n] = 0 if _key(s, n, inside) < mine_in else 2
    values[name] = 1
    maps, dims = _insert_scalar(s, level, values)
    return finish(s, st, maps=maps, dims=dims)


# -- peeling -----------------------------------------------------------------------------------

def peel(s: Schedule, loop: str, front: int = 1, back: int = 0) -> Schedule:
    """Execute the first `front` and the last `back` iterations of every instance of `loop` as
    separate copies of the loop body (e.g. to drop boundary conditions from the main loop)."""
    for v, what in ((front, "front"), (back, "back")):
        schedule_int(v, f"peel's {what}", minimum=0)
    st = Step("peel", (loop,), tuple((k, v) for k, v in (("front", front), ("back", back))))
    level = loop_index(s, loop)
    if front == 0 and back == 0:
        return finish(s, st)
    n = len(s.dims)
    t, u = time_vars(n), [f"u{k}" for k in range(n)]
    same_outer = [f"{t[j]} = {u[j]}" for j in range(level)]

    def having_neighbour(cond: str) -> isl.Set:
        rel = isl.Map(f"{s.model.pstr} -> {{ [{', '.join(t)}] -> [{', '.join(u)}] : "
                      f"{' and '.join(same_outer + [cond])} }}")
        return rel.intersect_domain(times).intersect_range(times).domain()

    with isl_budget(f"splitting loop {loop!r} for {st.call_text()}"):
        times = time_set(s)
        front_part = times.subtract(having_neighbour(f"{u[level]} <= {t[level]} - {front}")) if front \
            else times.subtract(times)
        back_part = times.subtract(having_neighbour(f"{u[level]} >= {t[level]} + {back}")) if back \
            else times.subtract(times)
        back_part = back_part.subtract(front_part)
        middle = times.subtract(front_part).subtract(back_part)
        parts = [(0, front_part), (1, middle), (2, back_part)]
        exprs = {v: list(t[:level]) + [str(v)] + list(t[level:]) for v, _ in parts}
        ts = ", ".join(t)
        out = []
        for name, text in s.maps:
            m = isl.Map(text)
            new = None
            for v, part in parts:
                if part.is_empty():
                    continue
                piece = m.intersect_range(part).apply_range(
                    isl.Map(f"{s.model.pstr} -> {{ [{ts}] -> [{', '.join(exprs[v])}] }}"))
                new = piece if new is None else new.union(piece)
            if new is None:  # a statement with no instances at all keeps a harmless position
                new = m.apply_range(isl.Map(f"{s.model.pstr} -> {{ [{ts}] -> [{', '.join(exprs[1])}] }}"))
            out.append((name, str(new.coalesce())))
    dims = list(s.dims)
    dims.insert(level, Dim(None))
    return finish(s, st, maps=tuple(out), dims=dims)
