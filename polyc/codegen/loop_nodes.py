"""The nodes of the small loop AST (`polyc.codegen.loop_ast` builds them from isl's AST).

Kept apart from the builder so that the checker of built loops (`ast_check`), which the builder
calls, can read the nodes without importing the builder back.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

from ..schedule.schedule import Dim


@dataclass(frozen=True)
class LExpr:
    """`op` is "int", "id", or an operator name; `args` are sub-expressions; `value` for leaves."""

    op: str
    args: Tuple["LExpr", ...] = ()
    value: Union[int, str, None] = None


@dataclass(frozen=True)
class Loop:
    iterator: str
    init: LExpr
    cond: LExpr
    step: int
    body: "Node"
    dim: Optional[Dim]


@dataclass(frozen=True)
class Guard:
    cond: LExpr
    then: "Node"
    orelse: Optional["Node"]


@dataclass(frozen=True)
class Block:
    children: Tuple["Node", ...]


@dataclass(frozen=True)
class Call:
    """One statement instance: `args` are the statement's original iterators as expressions."""

    statement: str
    args: Tuple[LExpr, ...]


Node = Union[Loop, Guard, Block, Call]
