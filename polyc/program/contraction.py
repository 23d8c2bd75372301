"""Array contraction: an intermediate whose every element lives inside one iteration of the fused
outer loop shrinks to the slice one iteration touches (a full tensor becomes a row, a row a scalar).

The proof is isl's, on the fused schedule: for every access of tensor `T` (writes and reads), the
pair (outer schedule coordinate, index of `T` along dimension `d`) is mapped to itself, i.e. slice
`T[.., x, ..]` is touched only in iteration `x` of the fused loop.  Then the slices of different
iterations are disjoint in time, each element's live range (its writes and the reads of their
values) lies within one iteration, and one slice of storage serves all iterations.  The value-based
flow dependences on `T` are checked too: none may be carried by the fused loop.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Tuple


from ..ir import Access, Expr, Program, Statement
from ..schedule.storage import contractible_dim  # noqa: F401  (the proof; re-exported for fusion)


def _drop(acc: Access, tensor: str, dim: int) -> Access:
    if acc.tensor != tensor:
        return acc
    return Access(tensor, acc.indices[:dim] + acc.indices[dim + 1:])


def _drop_in_expr(e: Expr, tensor: str, dim: int) -> Expr:
    if isinstance(e, Access):
        return _drop(e, tensor, dim)
    if not e.children():
        return e
    fields = {}
    for name in ("operand", "lhs", "rhs", "cond", "if_true", "if_false"):
        if hasattr(e, name):
            fields[name] = _drop_in_expr(getattr(e, name), tensor, dim)
    if hasattr(e, "args"):
        fields["args"] = tuple(_drop_in_expr(a, tensor, dim) for a in e.args)
    return replace(e, **fields)


def contract(program: Program, tensor: str, dim: int) -> Program:
    """`program` with dimension `dim` of `tensor` removed from its shape and from every access."""
    tensors = tuple(replace(t, shape=t.shape[:dim] + t.shape[dim + 1:]) if t.name == tensor else t
                    for t in program.tensors)
    statements: Tuple[Statement, ...] = tuple(
        replace(st, target=_drop(st.target, tensor, dim), value=_drop_in_expr(st.value, tensor, dim))
        for st in program.statements)
    return program.with_(tensors=tensors, statements=statements)
