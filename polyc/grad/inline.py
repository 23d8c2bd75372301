"""Inline cheap pointwise intermediates of a gradient program into the statements that read them.

A gradient program has many arrays that are one cheap elementwise expression of others: the adjoint
`e_grad[i, j] = Y_grad[i, j] / s[i] + s_grad[i]` of softmax, the centred `xc = X - mean` layernorm
recomputes.  Storing and reloading such an array costs more memory traffic than evaluating its
expression again where it is read, so it is substituted into its readers and no longer allocated.

Only in gradient programs, where it is safe: every array read there is final when it is read (the
forward values are recomputed first; an adjoint is complete before the first statement that reads
it), so evaluating an expression later gives the value it had where it was stored.  Candidates: a
temporary written by exactly one plain assignment, over its whole shape (isl checks), subscripted
by its loop indices, whose value calls no costly math function (`CHEAP_CALLS` only) and has at
most `MAX_NODES` nodes.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..ir import Access, Binary, Call, Cast, Expr, Program, Select, Statement, Unary
from .exprs import substitute
from .fold import _covers

#: Largest expression (in nodes) inlined into each reader.
MAX_NODES = 24
#: Math functions cheap enough to evaluate again in each reader (one instruction, or about that).
CHEAP_CALLS = ("sqrt", "abs", "max", "min", "fmax", "fmin", "floor", "ceil", "stop_gradient")


def _candidate(program: Program, st: Statement) -> bool:
    t = program.tensor(st.target.tensor)
    if t.role != "temp" or st.update is not None or st.reduction or t.shape is None:
        return False
    if sum(1 for s in program.statements if s.target.tensor == t.name) != 1:
        return False
    nodes = list(st.value.walk())
    if len(nodes) > MAX_NODES or any(isinstance(n, Call) and n.fn not in CHEAP_CALLS for n in nodes):
        return False
    if any(isinstance(n, Access) and n.tensor == t.name for n in nodes):
        return False
    return _covers(st, t.shape, program.sizes, program.assumptions)


def _replace_reads(e: Expr, name: str, definition: Statement) -> Expr:
    if isinstance(e, Access):
        if e.tensor != name:
            return e
        return substitute(definition.value, {str(v): a for v, a in zip(definition.target.indices, e.indices)})
    if isinstance(e, Unary):
        return replace(e, operand=_replace_reads(e.operand, name, definition))
    if isinstance(e, Binary):
        return replace(e, lhs=_replace_reads(e.lhs, name, definition), rhs=_replace_reads(e.rhs, name, definition))
    if isinstance(e, Call):
        return replace(e, args=tuple(_replace_reads(a, name, definition) for a in e.args))
    if isinstance(e, Select):
        return Select(*(_replace_reads(c, name, definition) for c in (e.cond, e.if_true, e.if_false)))
    if isinstance(e, Cast):
        return replace(e, operand=_replace_reads(e.operand, name, definition))
    return e


def inline_pointwise_temps(program: Program) -> Program:
    """`program` with every candidate temporary substituted into its readers and removed."""
    while True:
        found: Optional[Statement] = next((s for s in program.statements if _candidate(program, s)), None)
        if found is None:
            return program.with_(statements=tuple(
                s.with_(name=f"S{k}", order=(k,) + s.order[1:]) for k, s in enumerate(program.statements)))
        name = found.target.tensor
        statements = tuple(s.with_(value=_replace_reads(s.value, name, found))
                           for s in program.statements if s is not found)
        tensors = tuple(t for t in program.tensors if t.name != name)
        program = program.with_(statements=statements, tensors=tensors)
