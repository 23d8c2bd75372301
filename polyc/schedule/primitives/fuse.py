"""`fuse("S0", "S1")`: put the loop nests of statements into the same loops.

Before::

    for i:
      S0(i)
    for i:
      S1(i)

After `fuse("S0", "S1")`::

    for i:
      S0(i)
      S1(i)

Fuses at the deepest loop the statements all iterate where it is legal (or at `loop`), trying
outer loops after; within the fused loops their bodies keep the original order.  Two statements
run in the same instance of loop L exactly when they agree on every scalar dimension outside L.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

from ...errors import IllegalScheduleError, PolycError
from ..nesting import insert_scalar, scalar_key, scalar_positions, statements_of
from ..params import Param, Primitive
from ..rewrite import Step, finish, loop_index, statement_name, statement_varies
from ..state import ScheduleState as Schedule
from . import obligations

def _fuse_at(s: Schedule, names: Sequence[str], level: int, into_last: bool, st: Step) -> Schedule:
    outside = scalar_positions(s, 0, level)
    keys = {n: scalar_key(s, n, outside) for n in statements_of(s)}
    nests = sorted({keys[n] for n in names})
    if len(nests) == 1:
        return finish(s, st)
    anchor = nests[-1] if into_last else nests[0]
    members = [n for n in statements_of(s) if keys[n] in nests]
    order = {n: nests.index(keys[n]) for n in members}
    fixed = {n: dict(zip(outside, anchor)) for n in members}
    maps, dims = insert_scalar(s, level + 1, order, fixed)
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


PRIMITIVE = Primitive(
    name="fuse",
    params=(Param("statements", "statements", "the statements whose nests are fused (at least two)"),
            Param("loop", "optional_loop", "fuse down to this loop (default: the deepest legal one)", default=None)),
    apply=fuse,
    doc=__doc__,
    obligations=obligations.COMMON,
)
