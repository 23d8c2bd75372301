"""`interchange("i", "j")`: swap two loops.

Before::

    for i:
      for j:
        S(i, j)

After `interchange("i", "j")`::

    for j:
      for i:
        S(i, j)

`interchange("j", "k", statements=["S4"])` swaps the two loops for the named statements only, each
of which must run along both; the others keep their place on `j`.  Where `j` holds more statements
than `k`, the named ones then run at the `j` iteration equal to their old `k`, after the others:
PolyBench's nussinov::

    for j:                                  for j:               # S4's old k
      S0(i, j)          # table[i, j] = ...   S0(i, j)
      for k < j:                      ->      for k > j:         # S4's old j
        S4(i, j, k)     # max-updates           S4(i, j=k, k=j)  # along the row table[k + 1, :]

legal once the updates of one element may run in either order (`poly.commutative`).
"""
from __future__ import annotations

from ...errors import PolycError
from ..params import Param, Primitive
from ..rewrite import finish, loop_index, remap, statement_name, statement_varies, step, time_vars
from ..state import ScheduleState
from . import obligations
from .reorder import permute


def interchange(s: ScheduleState, a: str, b: str, statements=None) -> ScheduleState:
    """Swap loops `a` and `b` (for every statement, or only for `statements`)."""
    if statements is None:
        st = step("interchange", a, b)
        return permute(s, (b, a), st) if loop_index(s, a) < loop_index(s, b) else permute(s, (a, b), st)
    if isinstance(statements, (str, int)):
        statements = [statements]
    names = tuple(dict.fromkeys(statement_name(s, x) for x in statements))
    st = step("interchange", a, b, statements=list(names))
    if not names:
        raise PolycError(f"{st.call_text()} names no statement")
    ka, kb = loop_index(s, a), loop_index(s, b)
    if ka == kb:
        raise PolycError(f"{st.call_text()} names one loop twice")
    for name in names:
        if not (statement_varies(s, name, ka) and statement_varies(s, name, kb)):
            raise PolycError(f"{st.call_text()}: statement {name} does not run along both loops "
                             f"{a!r} and {b!r}")
    t = time_vars(len(s.dims))
    swapped = list(t)
    swapped[ka], swapped[kb] = t[kb], t[ka]
    return finish(s, st, maps=remap(s, per_statement={name: swapped for name in names}))


PRIMITIVE = Primitive(
    name="interchange",
    params=(Param("a", "loop", "one loop"), Param("b", "loop", "the other loop"),
            Param("statements", "statements", "only these statements (default: all)", default=None)),
    apply=interchange,
    doc=__doc__,
    obligations=obligations.COMMON,
)
