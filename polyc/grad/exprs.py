"""Small helpers over IR expressions the gradient transformation needs: substitution of affine
iterator values, the tensors an expression reads, fresh names and whole-array fills."""
from __future__ import annotations

from dataclasses import replace
from typing import List, Mapping, Optional, Sequence, Set, Tuple

from ..ir import Access, Affine, Call, Const, Constraint, Expr, IndexExpr, Program, Statement, rebuild


def substitute(e: Expr, mapping: Mapping[str, Affine]) -> Expr:
    """`e` with every iterator in `mapping` replaced by its affine value (subscripts and index values)."""
    def leaf(x: Expr) -> Optional[Expr]:
        if isinstance(x, Access):
            return Access(x.tensor, tuple(a.substitute(mapping) for a in x.indices))
        if isinstance(x, IndexExpr):
            return IndexExpr(x.value.substitute(mapping))
        return None
    return rebuild(e, leaf)


def within(values: Sequence[Affine], extents: Sequence[Affine]) -> Tuple[Constraint, ...]:
    """`0 <= v <= e - 1` for each value and its extent, as IR constraints: an array's shape read at
    subscripts `values`, or the box of loops `values` over `extents`."""
    return tuple(c for v, e in zip(values, extents) for c in (Constraint("ge", v), Constraint("ge", e - v - 1)))


def substitute_access(e: Expr, old: Access, new: Access) -> Expr:
    """`e` with every read equal to `old` replaced by `new`."""
    return rebuild(e, lambda x: new if isinstance(x, Access) and x == old else None)


def tensors_read(e: Expr) -> Set[str]:
    """Names of the tensors `e` reads."""
    return {a.tensor for a in e.accesses()}


def tensors_differentiated(e: Expr) -> Set[str]:
    """Names of the tensors `e` reads outside `stop_gradient(...)`: those a gradient flows to."""
    out: Set[str] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Call) and x.fn == "stop_gradient":
            continue
        if isinstance(x, Access):
            out.add(x.tensor)
        stack.extend(x.children())
    return out


def rename_tensors(e: Expr, names: Mapping[str, str]) -> Expr:
    """`e` with the tensors in `names` read under their new names."""
    return rebuild(e, lambda x: Access(names.get(x.tensor, x.tensor), x.indices) if isinstance(x, Access) else None)


def program_with_tensor_names(program: Program, names: Mapping[str, str]) -> Program:
    """`program` with its tensors in `names` renamed (declarations, targets and reads)."""
    tensors = tuple(replace(t, name=names.get(t.name, t.name)) for t in program.tensors)
    statements = tuple(replace(st, target=rename_tensors(st.target, names), value=rename_tensors(st.value, names))
                       for st in program.statements)
    return program.with_(tensors=tensors, statements=statements)


def fresh_name(base: str, used: Set[str]) -> str:
    """`base`, or `base2`, `base3`, ... : the first not in `used` (which it is added to)."""
    name, k = base, 2
    while name in used:
        name, k = f"{base}{k}", k + 1
    used.add(name)
    return name


def used_names(program: Program) -> Set[str]:
    """Names global to the kernel (tensors, sizes, scalars): new tensors and iterators avoid them.

    Index names are local to a statement, so the gradient's statements may reuse them freely."""
    return {t.name for t in program.tensors} | set(program.sizes) | {s.name for s in program.scalars}


def fill_statement(name: str, shape: Tuple[Affine, ...], source: Statement, used: Set[str],
                   value: Expr = Const(0.0), like: Tuple[str, ...] = ()) -> Statement:
    """`name[...] = value` over `shape` (value a constant, or the name of an array read
    elementwise), placed at `source`'s line; its loops are named `like` where given, else i0, i1,
    ..., avoiding the global names `used` (left unchanged)."""
    iters: List[str] = []
    taken = set(used)
    for d in range(len(shape)):
        iters.append(fresh_name(like[d] if d < len(like) else f"i{d}", taken))
    dom = within([Affine.var(n) for n in iters], shape)
    target = Access(name, tuple(Affine.var(n) for n in iters))
    if not isinstance(value, Const):
        value = Access(value, target.indices)
    return Statement(name="", iterators=tuple(iters), domain=(dom,), target=target, value=value,
                     location=source.location, text=source.text)
