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
from ..ir.guards import dnf_condition
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


def _full_shape(t: TensorDecl, its: Sequence[str], affine: Mapping[str, Affine]) -> Tuple[Tuple[Constraint, ...], ...]:
    shape = [d.substitute(affine) for d in t.shape or ()]
    return (tuple(c for it, d in zip(its, shape)
                  for c in (Constraint("ge", Affine.var(it)), Constraint("ge", d - 1 - Affine.var(it)))),)


def _partly_written(node: Node) -> List[TensorDecl]:
    written = node.kernel.model.fully_written
    return [t for t in node.kernel.program.tensors if t.role == "output" and t.name not in written and t.shape]


def _defined_everywhere(node: Node, st: Statement) -> Optional[Statement]:
    """The one statement that defines a partly written output (`B[x] = e where x in 1:N-1`),
    rewritten to define every element: `B[x] = select(1 <= x < N - 1, e, 0)` over the whole
    shape.  Called alone, the kernel returns its output zero-filled where it does not write it;
    inside a program its consumers read those zeros too, and the tensor keeps one definition (a
    gradient differentiates it as one).  None unless `st` writes `T[i, j, ..]` with its own
    iterators, in order, once each."""
    t = node.kernel.program.tensor(st.target.tensor)
    if st.update is not None or [i.as_single_var() for i in st.target.indices] != list(st.iterators) \
            or len(st.iterators) != len(t.shape or ()) or st.divisions:
        return None
    if any(c.kind not in ("ge", "eq") for conj in st.domain for c in conj):
        return None        # a modulo constraint has no spelling as a condition
    return replace(st, domain=_full_shape(t, st.iterators, {}),     # in the kernel's names, renamed after
                   value=Select(dnf_condition(st.domain), st.value, Const(0)), inferred=())


def _zero_fill(node: Node, t: TensorDecl, tensors: Mapping[str, str], affine: Mapping[str, Affine]) -> Statement:
    """`T[z] = 0` over the whole shape, before the operator's statements (the fallback of
    `_defined_everywhere`: several statements or updates write `T`)."""
    its = tuple(f"{node.name}_z{t.name}{k}" for k in range(len(t.shape or ())))
    return Statement(name=f"{node.name}_zero_{t.name}", iterators=its, domain=_full_shape(t, its, affine),
                     target=Access(tensors[t.name], tuple(Affine.var(it) for it in its)), value=Const(0),
                     order=(-1,) + (0,) * len(its), location=node.location,
                     text=f"{t.name}[...] = 0 (where {node.kernel.name} does not write it)")


def node_statements(node: Node) -> Tuple[Statement, ...]:
    """The node's statements, renamed apart and expressed over program tensors and sizes; an
    output the operator writes only in part is defined everywhere, zero where the operator does
    not write it (`_defined_everywhere`, else `_zero_fill`)."""
    tensors = node_tensor_names(node)
    affine = _affine_map(node)
    scalars = dict(node.scalars)
    statements = list(node.kernel.program.statements)
    out = []
    for t in _partly_written(node):
        writers = [k for k, st in enumerate(statements) if st.target.tensor == t.name]
        plain = [k for k in writers if statements[k].update is None]
        # One definition (`B[x] = e`), or one start of reductions (`O[i] = 0` then `O[i] += ...`,
        # a `+=!` over part of O): that statement defines every element, zero outside.
        first = statements[plain[0]] if len(plain) == 1 and plain[0] == writers[0] else None
        whole = _defined_everywhere(node, first) if first is not None else None
        if whole is not None:
            statements[plain[0]] = whole
        else:
            out.append(_zero_fill(node, t, tensors, affine))
    for st in statements:
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
        base = 0        # each node's outer orders, shifted past the previous node's (a program's
        for node in nodes:   # kernel as an operator has orders 0, 1000, ... of its own)
            own = node_statements(node)
            first = min(st.order[0] for st in own) if own else 0
            for st in own:
                stmts.append(replace(st, order=(base + st.order[0] - first,) + tuple(st.order[1:])))
            base += (max(st.order[0] for st in own) - first + 1) if own else 0
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
