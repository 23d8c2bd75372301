"""Einstein notation -> IR `Program` (Tensor Comprehensions' meaning).

Lowering rules:
- `T[i..] = e`: one statement; every index on the right must also be on the left.
- `T[i..] op=! e` (op in + * max min): an *init* statement `T[i..] = identity(op)` over the
  left-hand indices, then an *update* statement `T[i..] = T[i..] op e` over all indices; the
  indices only on the right are reduction axes.
- `T[i..] op= e` (no `!`): only the update; `T` keeps its previous contents (passed in, or defined
  by an earlier statement).

Index ranges come from `where` clauses here; every other index is marked `inferred` and its range
is inferred from tensor shapes by `polyc.poly.inference` (which needs isl).
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Set, Tuple, Union

from ..errors import ParseError, SourceLocation
from ..ir.depth import ensure_recursion_room, tree_depth
from ..ir import (Access, Affine, Binary, Call, Const, Constraint, DType, Expr, IndexExpr,
                  MATH_FUNCTIONS, Program, ScalarDecl, ScalarRef, Select, Statement, TensorDecl,
                  TensorType, Unary, lower_bound, upper_bound_exclusive)
from .einsum_parser import Node, SourceStatement, parse_einsum

Declaration = Union[TensorType, DType]

_IDENTITY = {"+": 0, "*": 1, "max": float("-inf"), "min": float("inf")}


def _affine(node: Node, what: str) -> Affine:
    """Convert a syntax node to an affine expression, or explain why it is not one."""
    if node.kind == "num" and not node.is_float:
        return Affine.const(node.value)  # type: ignore[arg-type]
    if node.kind == "name":
        return Affine.var(node.value)  # type: ignore[arg-type]
    if node.kind == "un" and node.value == "-":
        return -_affine(node.args[0], what)
    if node.kind == "bin" and node.value in ("+", "-"):
        a, b = _affine(node.args[0], what), _affine(node.args[1], what)
        return a + b if node.value == "+" else a - b
    if node.kind == "bin" and node.value == "*":
        a, b = _affine(node.args[0], what), _affine(node.args[1], what)
        if a.is_constant:
            return b.scale(a.constant)
        if b.is_constant:
            return a.scale(b.constant)
    raise ParseError(f"{what} must be affine: sums of indices and sizes times integer constants "
                     f"(like `i + 1` or `2 * j`)", node.loc)


def _names_in(node: Node) -> List[Node]:
    out = [node] if node.kind == "name" else []
    for a in node.args:
        out.extend(_names_in(a))
    return out


class _Lowering:
    def __init__(self, statements: List[SourceStatement], declared: Mapping[str, Declaration], name: str,
                 source: str):
        self.src = statements
        self.declared = dict(declared)
        self.name = name
        self.source = source
        self.tensor_decls = {k: v for k, v in self.declared.items() if isinstance(v, TensorType)}
        self.scalar_decls = {k: v for k, v in self.declared.items() if isinstance(v, DType)}
        self.sizes: List[str] = []
        for t in self.tensor_decls.values():
            for extent in t.shape:
                for v in extent.variables:
                    if v not in self.sizes:
                        self.sizes.append(v)
        self.ranks: Dict[str, int] = {k: t.rank for k, t in self.tensor_decls.items()}
        self.tensor_names: List[str] = list(self.tensor_decls)
        self.scalars: List[str] = []
        self.written_before: Set[str] = set()

    # -- classification ------------------------------------------------------------------------
    def _note_tensor(self, name: str, rank: int, loc: SourceLocation) -> None:
        if name in self.scalar_decls or name in self.sizes:
            raise ParseError(f"{name!r} is declared as a scalar or size, but is indexed like a tensor", loc)
        known = self.ranks.get(name)
        if known is not None and known != rank:
            raise ParseError(f"tensor {name!r} is used with {rank} subscripts here but has rank {known}", loc)
        self.ranks[name] = rank
        if name not in self.tensor_names:
            self.tensor_names.append(name)

    def _collect_tensors(self) -> None:
        def visit(node: Node) -> None:
            if node.kind == "access":
                self._note_tensor(node.value, len(node.args), node.loc)  # type: ignore[arg-type]
            for a in node.args:
                visit(a)

        for st in self.src:
            self._note_tensor(st.target, len(st.target_indices), st.target_loc)
            for ix in st.target_indices:
                visit(ix)
            visit(st.rhs)

    def _statement_indices(self, st: SourceStatement) -> List[str]:
        """Index names of a statement in order: left-hand side first, then right-hand side."""
        order: List[str] = []

        def add_from(node: Node) -> None:
            for n in _names_in(node):
                name = n.value
                if name in self.sizes or name in self.scalar_decls or name in self.tensor_names:
                    continue
                if name not in order:
                    order.append(name)  # type: ignore[arg-type]

        for ix in st.target_indices:
            add_from(ix)
        rhs_subscripts: List[Node] = []

        def subs(node: Node) -> None:
            if node.kind == "access":
                rhs_subscripts.extend(node.args)
            for a in node.args:
                if node.kind != "access":
                    subs(a)
                else:
                    subs(a)

        subs(st.rhs)
        for ix in rhs_subscripts:
            add_from(ix)
        for w in st.wheres:
            if w.index not in order:
                raise ParseError(f"'where' names {w.index!r}, which no subscript of this statement uses", w.loc)
        return order

    # -- expressions -----------------------------------------------------------------------------
    def _expr(self, node: Node, indices: List[str]) -> Expr:
        k = node.kind
        if k == "num":
            return Const(node.value)  # type: ignore[arg-type]
        if k == "name":
            name = node.value
            if name in indices:
                return IndexExpr(Affine.var(name))  # type: ignore[arg-type]
            if name in self.tensor_names:
                if self.ranks.get(name, 0) != 0:  # type: ignore[arg-type]
                    raise ParseError(f"tensor {name!r} has rank {self.ranks[name]}; index it like "  # type: ignore[index]
                                     f"{name}[...]", node.loc)
                return Access(name, ())  # type: ignore[arg-type]
            if name in self.sizes:
                return IndexExpr(Affine.var(name))  # type: ignore[arg-type]
            if name in ("inf", "nan"):
                return Const(float(name))  # type: ignore[arg-type]
            if name not in self.scalars:
                self.scalars.append(name)  # type: ignore[arg-type]
            return ScalarRef(name)  # type: ignore[arg-type]
        if k == "access":
            subs = tuple(_affine(a, f"the subscripts of {node.value}") for a in node.args)
            return Access(node.value, subs)  # type: ignore[arg-type]
        if k == "un":
            return Unary(node.value, self._expr(node.args[0], indices))  # type: ignore[arg-type]
        if k == "bin":
            return Binary(node.value, self._expr(node.args[0], indices),  # type: ignore[arg-type]
                          self._expr(node.args[1], indices))
        if k == "call":
            fn = node.value
            args = tuple(self._expr(a, indices) for a in node.args)
            if fn == "select":
                if len(args) != 3:
                    raise ParseError(f"select takes 3 arguments (condition, if_true, if_false), got {len(args)}",
                                     node.loc)
                return Select(*args)
            if fn not in MATH_FUNCTIONS:
                known = ", ".join(sorted(MATH_FUNCTIONS) + ["select"])
                raise ParseError(f"unknown function {fn!r}; available: {known}", node.loc)
            if MATH_FUNCTIONS[fn] != len(args):  # type: ignore[index]
                raise ParseError(f"{fn} takes {MATH_FUNCTIONS[fn]} argument(s), got {len(args)}",  # type: ignore[index]
                                 node.loc)
            return Call(fn, args)  # type: ignore[arg-type]
        raise ParseError("unsupported expression", node.loc)

    # -- statements ----------------------------------------------------------------------------
    def lower(self) -> Program:
        self._collect_tensors()
        statements: List[Statement] = []
        first_write: Dict[str, int] = {}
        read_at: Dict[str, List[int]] = {}
        accumulate_first: Set[str] = set()
        for n, st in enumerate(self.src):
            indices = self._statement_indices(st)
            target_subs = tuple(_affine(a, f"the subscripts of {st.target}") for a in st.target_indices)
            lhs_vars = [v for a in target_subs for v in a.variables if v in indices]
            value = self._expr(st.rhs, indices)
            rhs_only = [i for i in indices if i not in lhs_vars]
            bang = st.op.endswith("!")
            op = st.op.rstrip("!").rstrip("=") or None
            if op is None and rhs_only:
                raise ParseError(f"index {rhs_only[0]!r} appears only on the right-hand side; "
                                 f"to reduce over it write '+=!' (or '*=!', 'max=!', 'min=!')", st.loc)
            ranges: Dict[str, Tuple[Constraint, ...]] = {}
            for w in st.wheres:
                lo = _affine(w.lower, "a 'where' bound")
                hi = _affine(w.upper, "a 'where' bound")
                # A name in a bound that is no index is a size symbol (bound at call time).
                for v in lo.variables + hi.variables:
                    if v not in indices and v not in self.sizes:
                        if v in self.tensor_names or v in self.scalar_decls:
                            raise ParseError(f"{v!r} in a 'where' bound must be an index or a size, "
                                             f"not a tensor or scalar", w.loc)
                        self.sizes.append(v)
                ranges[w.index] = (lower_bound(w.index, lo), upper_bound_exclusive(w.index, hi))
            target = Access(st.target, target_subs)
            for acc in value.accesses():
                read_at.setdefault(acc.tensor, []).append(n)
            if st.target not in first_write:
                first_write[st.target] = n
                if op is not None and not bang:
                    accumulate_first.add(st.target)
            lhs_iters = tuple(i for i in indices if i in lhs_vars)
            common = dict(location=st.loc, text=st.text)
            if op is not None and bang:
                statements.append(Statement(
                    name=f"S{len(statements)}", iterators=lhs_iters,
                    domain=(tuple(c for i in lhs_iters for c in ranges.get(i, ())),),
                    target=target, value=Const(_IDENTITY[op]), order=(len(statements),) + (0,) * len(lhs_iters),
                    inferred=tuple(i for i in lhs_iters if i not in ranges), **common))
            if op is not None:
                read_at.setdefault(st.target, []).append(n) if not bang else None
            iters = tuple(indices)
            statements.append(Statement(
                name=f"S{len(statements)}", iterators=iters,
                domain=(tuple(c for i in iters for c in ranges.get(i, ())),),
                target=target, value=value, update=op, order=(len(statements),) + (0,) * len(iters),
                reduction=tuple(rhs_only), inferred=tuple(i for i in iters if i not in ranges), **common))
        return Program(name=self.name, tensors=self._tensors(first_write, read_at, accumulate_first),
                       statements=tuple(statements), sizes=tuple(self.sizes), scalars=self._scalars(),
                       source=self.source, frontend="einsum")

    def _tensors(self, first_write: Dict[str, int], read_at: Dict[str, List[int]],
                 accumulate_first: Set[str]) -> Tuple[TensorDecl, ...]:
        out = []
        for name in self.tensor_names:
            decl = self.tensor_decls.get(name)
            reads = read_at.get(name, [])
            if name not in first_write:
                role = "input"
            elif name in accumulate_first or any(r < first_write[name] for r in reads) or \
                    any(r == first_write[name] for r in reads):
                role = "inout"
            elif reads:
                role = "temp"
            else:
                role = "output"
            out.append(TensorDecl(name, decl.dtype if decl else None, decl.shape if decl else None, role,
                                  declared=decl is not None))
        return tuple(out)

    def _scalars(self) -> Tuple[ScalarDecl, ...]:
        names = list(self.scalars) + [s for s in self.scalar_decls if s not in self.scalars]
        return tuple(ScalarDecl(s, self.scalar_decls.get(s)) for s in names)


def program_from_einsum(source: str, name: str = "kernel", declared: Optional[Mapping[str, Declaration]] = None,
                        filename: str = "<kernel>") -> Program:
    """Parse and lower Einstein-notation `source`; `declared` maps names to tensor or scalar types."""
    declared = dict(declared or {})
    for k, v in declared.items():
        if not isinstance(v, (TensorType, DType)):
            raise ParseError(f"declaration {k}={v!r} is neither a tensor type (pc.f32['N']) nor a scalar "
                             f"type (pc.f32)")
    statements = parse_einsum(source, filename)
    for st in statements:   # deep right-hand sides: room for the recursive lowering and every later walker
        ensure_recursion_room(tree_depth(st.rhs, lambda n: n.args), f"the right-hand side of {st.target}", st.loc)
    program = _Lowering(statements, declared, name, source).lower()
    used = {a.tensor for st in program.statements for a in (st.target,) + st.value.accesses()}
    used |= {e.name for st in program.statements for e in st.value.walk() if isinstance(e, ScalarRef)}
    for k in declared:
        if k not in used:
            raise ParseError(f"{k!r} is declared but the kernel never uses it")
    return program
