"""`shift("S1", "i", 1)`: retime one statement by `amount` iterations of a loop.

Before::

    for i:
      S0(i)
      S1(i)

After `shift("S1", "i", 1)`::

    for i:               # S0 at i, S1 at i + 1
      S0(i)
      S1(i - 1)
"""
from __future__ import annotations

from typing import Union

from ..integers import schedule_int
from ..params import Param, Primitive
from ..rewrite import finish, loop_index, remap, statement_name, step, time_vars
from ..state import ScheduleState
from . import obligations


def shift(s: ScheduleState, statement: Union[str, int], loop: str, amount: int) -> ScheduleState:
    """Shift one statement's instances along `loop` by `amount` iterations (retiming)."""
    name = statement_name(s, statement)
    k = loop_index(s, loop)
    schedule_int(amount, "the shift amount")
    t = time_vars(len(s.dims))
    exprs = list(t)
    exprs[k] = f"{t[k]} + {amount}"
    return finish(s, step("shift", statement, loop, amount), maps=remap(s, per_statement={name: exprs}))


PRIMITIVE = Primitive(
    name="shift",
    params=(Param("statement", "statement", "the statement to retime (name or position)"),
            Param("loop", "loop", "the loop along which it moves"),
            Param("amount", "int", "iterations to move by")),
    apply=shift,
    doc=__doc__,
    obligations=obligations.COMMON,
)
