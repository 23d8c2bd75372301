"""`distribute("i")` / `distribute("S1")`: loop distribution (fission).

Before::

    for i:
      S0(i)
      S1(i)

After `distribute("i")` (or `distribute("S1")`)::

    for i:
      S0(i)
    for i:
      S1(i)

`distribute(loop)` gives every group of statements under `loop` its own copy of it;
`distribute(statement)` takes that statement out of the loops it shares (from the outermost
shared loop, or from `loop`): the statements before it, it, and those after it get separate nests.
"""
from __future__ import annotations

from typing import Optional, Union

from ...errors import PolycError
from ..nesting import insert_scalar, scalar_key, scalar_positions, statements_of
from ..params import Param, Primitive
from ..rewrite import Step, finish, loop_index, statement_name
from ..state import ScheduleState as Schedule
from . import obligations

def distribute(s: Schedule, target: Union[str, int], loop: Optional[str] = None) -> Schedule:
    """Loop distribution.

    - `distribute("i")`: every group of statements that differs in its position inside loop `i`
      gets its own copy of `i` (and of the loops inside), in the original order;
    - `distribute("S1")` (or a position): statement S1 leaves the loops it shares with other
      statements, from the outermost shared loop (or from `loop`): the statements before it, S1,
      and those after it get separate nests.
    """
    st = Step("distribute", (target,), (("loop", loop),) if loop is not None else ())
    statements = statements_of(s)
    if isinstance(target, str) and target in s.loop_names and target not in statements:
        if loop is not None:
            raise PolycError("distribute(loop) takes no second loop; use distribute(statement, loop=...)")
        level = loop_index(s, target)
        inside = scalar_positions(s, level + 1, len(s.dims))
        inner = {n: scalar_key(s, n, inside) for n in statements}
        ranks = sorted(set(inner.values()))
        if len(ranks) == 1:
            raise PolycError(f"loop {target!r} holds a single group of statements; nothing to distribute")
        maps, dims = insert_scalar(s, level, {n: ranks.index(inner[n]) for n in statements})
        return finish(s, st, maps=maps, dims=dims)
    name = statement_name(s, target)
    if loop is not None:
        level = loop_index(s, loop)
    else:
        level = None
        for k, d in enumerate(s.dims):
            if not d.is_loop:
                continue
            outside = scalar_positions(s, 0, k)
            mine = scalar_key(s, name, outside)
            if any(scalar_key(s, n, outside) == mine for n in statements if n != name):
                level = k
                break
        if level is None:
            raise PolycError(f"statement {name} shares no loop with another statement; nothing to distribute")
    outside = scalar_positions(s, 0, level)
    inside = scalar_positions(s, level + 1, len(s.dims))
    mine_out, mine_in = scalar_key(s, name, outside), scalar_key(s, name, inside)
    values = {}
    for n in statements:
        if n != name and scalar_key(s, n, outside) == mine_out:
            values[n] = 0 if scalar_key(s, n, inside) < mine_in else 2
    values[name] = 1
    maps, dims = insert_scalar(s, level, values)
    return finish(s, st, maps=maps, dims=dims)


PRIMITIVE = Primitive(
    name="distribute",
    params=(Param("target", "statement", "a statement (name or position) to take out, or a loop name to split "
                  "into one copy per group of statements"),
            Param("loop", "optional_loop", "with a statement: distribute from this loop", default=None)),
    apply=distribute,
    doc=__doc__,
    obligations=obligations.COMMON,
)
