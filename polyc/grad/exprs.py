"""Small helpers over IR expressions the gradient transformation needs: substitution of affine
iterator values, and the tensors an expression reads."""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Set

from ..ir import Access, Affine, Binary, Call, Cast, Expr, IndexExpr, Program, Select, Unary


def substitute(e: Expr, mapping: Mapping[str, Affine]) -> Expr:
    """`e` with every iterator in `mapping` replaced by its affine value (subscripts and index values)."""
    if isinstance(e, Access):
        return Access(e.tensor, tuple(a.substitute(mapping) for a in e.indices))
    if isinstance(e, IndexExpr):
        return IndexExpr(e.value.substitute(mapping))
    if isinstance(e, Unary):
        return replace(e, operand=substitute(e.operand, mapping))
    if isinstance(e, Binary):
        return replace(e, lhs=substitute(e.lhs, mapping), rhs=substitute(e.rhs, mapping))
    if isinstance(e, Call):
        return replace(e, args=tuple(substitute(a, mapping) for a in e.args))
    if isinstance(e, Select):
        return Select(substitute(e.cond, mapping), substitute(e.if_true, mapping),
                      substitute(e.if_false, mapping))
    if isinstance(e, Cast):
        return replace(e, operand=substitute(e.operand, mapping))
    return e


def tensors_read(e: Expr) -> Set[str]:
    """Names of the tensors `e` reads."""
    return {a.tensor for a in e.accesses()}


def rename_tensors(e: Expr, names: Mapping[str, str]) -> Expr:
    """`e` with the tensors in `names` read under their new names."""
    if isinstance(e, Access):
        return Access(names.get(e.tensor, e.tensor), e.indices)
    if isinstance(e, (Unary, Cast)):
        return replace(e, operand=rename_tensors(e.operand, names))
    if isinstance(e, Binary):
        return replace(e, lhs=rename_tensors(e.lhs, names), rhs=rename_tensors(e.rhs, names))
    if isinstance(e, Call):
        return replace(e, args=tuple(rename_tensors(a, names) for a in e.args))
    if isinstance(e, Select):
        return Select(rename_tensors(e.cond, names), rename_tensors(e.if_true, names),
                      rename_tensors(e.if_false, names))
    return e


def program_with_tensor_names(program: Program, names: Mapping[str, str]) -> Program:
    """`program` with its tensors in `names` renamed (declarations, targets and reads)."""
    tensors = tuple(replace(t, name=names.get(t.name, t.name)) for t in program.tensors)
    statements = tuple(replace(st, target=rename_tensors(st.target, names), value=rename_tensors(st.value, names))
                       for st in program.statements)
    return program.with_(tensors=tensors, statements=statements)
