"""One polyhedral `Program` from several operator calls: every statement of every operator, renamed
apart.

Each node's statements are copied with their iterators prefixed by the node (`matmul0_i`), their
statement names prefixed (`matmul0_S0`), the kernel's tensors replaced by the program tensors they
are bound to (operator-internal intermediates get a node-prefixed name), kernel sizes replaced by
the program's affine sizes, and scalar parameters folded into constants.  Nothing is pasted as
text: the IR values are rebuilt directly.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..ir import (Access, Affine, Binary, Call, Cast, Const, Constraint, Expr, IndexExpr, Program, ScalarRef,
                  Select, Statement, TensorDecl, Unary)
from .trace import Node, TensorHandle


def _affine_map(node: Node) -> Dict[str, Affine]:
    """Kernel iterator and size names -> program affine expressions (iterators renamed apart)."""
    out: Dict[str, Affine] = {s: a for s, a in node.sizes}
    for st in node.kernel.program.statements:
        for it in st.iterators:
            out[it] = Affine.var(f"{node.name}_{it}")
    return out


def _rewrite(e: Expr, tensors: Mapping[str, str], affine: Mapping[str, Affine], scalars: Mapping[str, object]) -> Expr:
    if isinstance(e, Access):
        return Access(tensors[e.tensor], tuple(i.substitute(affine) for i in e.indices))
    if isinstance(e, IndexExpr):
        return IndexExpr(e.value.substitute(affine))
    if isinstance(e, ScalarRef):
        if e.name in scalars:
            return Const(scalars[e.name])
        if e.name in affine:  # a size used as a value (`X[i, j] / N`)
            value = affine[e.name]
            single = value.as_single_var()
            return ScalarRef(single) if single is not None else IndexExpr(value)
        return e
    if isinstance(e, Const):
        return e
    if isinstance(e, Unary):
        return Unary(e.op, _rewrite(e.operand, tensors, affine, scalars))
    if isinstance(e, Binary):
        return Binary(e.op, _rewrite(e.lhs, tensors, affine, scalars), _rewrite(e.rhs, tensors, affine, scalars))
    if isinstance(e, Call):
        return Call(e.fn, tuple(_rewrite(a, tensors, affine, scalars) for a in e.args))
    if isinstance(e, Select):
        return Select(*(_rewrite(x, tensors, affine, scalars) for x in (e.cond, e.if_true, e.if_false)))
    if isinstance(e, Cast):
        return Cast(e.dtype, _rewrite(e.operand, tensors, affine, scalars))
    raise TypeError(f"unknown expression {type(e).__name__}")


def node_tensor_names(node: Node) -> Dict[str, str]:
    """Kernel tensor name -> program tensor name (bound ones, and node-prefixed internal temps)."""
    names = dict(node.bindings)
    for t in node.kernel.program.tensors:
        if t.name not in names:
            names[t.name] = f"{node.name}_{t.name}"
    return names


def node_statements(node: Node) -> Tuple[Statement, ...]:
    """The node's statements, renamed apart and expressed over program tensors and sizes."""
    tensors = node_tensor_names(node)
    affine = _affine_map(node)
    scalars = dict(node.scalars)
    out = []
    for st in node.kernel.program.statements:
        rename = {it: f"{node.name}_{it}" for it in st.iterators}
        domain = tuple(tuple(Constraint(c.kind, c.expr.substitute(affine), c.modulus) for c in conj)
                       for conj in st.domain)
        target = _rewrite(st.target, tensors, affine, scalars)
        assert isinstance(target, Access)
        out.append(replace(st, name=f"{node.name}_{st.name}",
                           iterators=tuple(rename[i] for i in st.iterators), domain=domain, target=target,
                           value=_rewrite(st.value, tensors, affine, scalars),
                           reduction=tuple(rename[i] for i in st.reduction),
                           inferred=(), descending=tuple(rename[i] for i in st.descending),
                           divisions=tuple(rename[i] for i in st.divisions),
                           location=node.location or st.location))
    return tuple(out)


def node_internal_tensors(node: Node) -> Tuple[TensorDecl, ...]:
    """The node's operator-internal intermediates (softmax's row maxima) as program temps."""
    affine = _affine_map(node)
    out = []
    for t in node.kernel.program.tensors:
        if t.role == "temp":
            shape = tuple(d.substitute(affine) for d in t.shape) if t.shape is not None else None
            out.append(TensorDecl(f"{node.name}_{t.name}", t.dtype, shape, "temp", t.shape is not None))
    return tuple(out)


def combined_program(name: str, nodes: Sequence[Node], handles: Mapping[str, TensorHandle],
                     roles: Mapping[str, str], sizes: Sequence[str],
                     statements: Optional[Iterable[Statement]] = None) -> Program:
    """The program of `nodes` in call order: `roles` gives each program tensor its role here
    ("input", "output" or "temp"); operator-internal temps stay temps.  `statements` replaces the
    renamed statements (fusion passes them with new orders)."""
    stmts: List[Statement] = list(statements) if statements is not None else []
    if statements is None:
        for position, node in enumerate(nodes):
            for st in node_statements(node):
                stmts.append(replace(st, order=(position * 1000 + st.order[0],) + tuple(st.order[1:])))
    tensors: List[TensorDecl] = []
    seen = set()
    for node in nodes:
        for kernel_name, prog_name in node.bindings:
            if prog_name in seen:
                continue
            seen.add(prog_name)
            h = handles[prog_name]
            tensors.append(TensorDecl(prog_name, h.dtype, h.shape, roles[prog_name], True))
        tensors.extend(node_internal_tensors(node))
    used = set()
    for st in stmts:
        used |= {d for c in st.domain for x in c for d in x.expr.variables}
        for e in st.value.walk():
            if isinstance(e, ScalarRef):
                used.add(e.name)
            elif isinstance(e, IndexExpr):
                used |= set(e.value.variables)
        for acc in (st.target,) + st.value.accesses():
            used |= {v for i in acc.indices for v in i.variables}
    for t in tensors:
        used |= {v for d in t.shape or () for v in d.variables}
    program_sizes = tuple(s for s in sizes if s in used)
    return Program(name=name, tensors=tuple(tensors), statements=tuple(stmts), sizes=program_sizes,
                   scalars=(), source="", frontend="einsum")
