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
from typing import Optional, Tuple

import islpy as isl

from ..ir import Access, Expr, Program, Statement
from ..poly.islutil import isl_name
from ..poly.model import PolyModel
from ..schedule.schedule import Schedule


def _slice_in_iteration(model: PolyModel, schedule: Schedule, tensor: str, dim: int, level: int) -> bool:
    """isl proof that every access of `tensor` at index `x` along `dim` runs in iteration `x` of
    schedule dimension `level`."""
    found = False
    prefixes = None   # the schedule coordinates outside the loop: one loop instance for every access
    for info in model.accesses:
        if info.access.tensor != tensor:
            continue
        found = True
        access = model.access_map(info.statement, info.access, info.guard)   # S[x] -> T[a]
        when = schedule.statement_map(info.statement.name)                    # S[x] -> [t]
        pairs = access.reverse().apply_range(when.intersect_domain(model.domains[info.statement.name]))
        rank = pairs.dim(isl.dim_type.in_)
        n_out = pairs.dim(isl.dim_type.out)
        a = ", ".join(f"a{k}" for k in range(rank))
        t = ", ".join(f"t{k}" for k in range(n_out))
        same = isl.Map(f"{model.pstr} -> {{ {isl_name(tensor)}[{a}] -> [{t}] : a{dim} = t{level} }}")
        if not pairs.is_subset(same):
            return False
        outside = pairs.range().project_out(isl.dim_type.set, level, n_out - level)
        prefixes = outside if prefixes is None else prefixes.union(outside)
    if prefixes is not None and prefixes.coalesce().params().is_empty():
        return False
    if prefixes is not None:  # every access runs inside the same instance of the loop
        point = prefixes.coalesce()
        if not (point.lexmin().is_equal(point.lexmax()) and point.lexmin().is_equal(point)):
            return False
    return found


def _flow_within_iteration(model: PolyModel, schedule: Schedule, tensor: str, level: int) -> bool:
    """Every value-based flow dependence on `tensor` stays inside one iteration of one instance of
    the loop at schedule dimension `level` (equal coordinates up to and including it)."""
    for dep in model.dependences.of_kind("flow"):
        if dep.array != tensor:
            continue
        src = schedule.statement_map(model.statement_by_isl_name(dep.source).name)
        dst = schedule.statement_map(model.statement_by_isl_name(dep.sink).name)
        times = dep.relation.apply_domain(src).apply_range(dst)          # [t] -> [t']
        n = times.dim(isl.dim_type.in_)
        t = ", ".join(f"t{k}" for k in range(n))
        u = ", ".join(f"u{k}" for k in range(n))
        same = " and ".join(f"t{k} = u{k}" for k in range(level + 1))
        equal = isl.Map(f"{model.pstr} -> {{ [{t}] -> [{u}] : {same} }}")
        if not times.is_subset(equal):
            return False
    return True


def contractible_dim(model: PolyModel, schedule: Schedule, tensor: str, rank: int, level: int) -> Optional[int]:
    """The dimension of `tensor` that can be dropped under the fused loop at schedule dimension
    `level` (proven with isl), or None."""
    if not _flow_within_iteration(model, schedule, tensor, level):
        return None
    for d in range(rank):
        if _slice_in_iteration(model, schedule, tensor, d, level):
            return d
    return None


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
