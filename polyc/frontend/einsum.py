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

Also: a tensor is returned unless a statement reads it after its last write (or as `outputs=`
says); declared int scalars in subscripts and ranges are isl parameters; `//` and `%` by constants
are quasi-affine (`einsum_affine`); an index may be used only as a value when `where` ranges it.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from ..errors import ParseError, SourceLocation
from ..ir.depth import ensure_recursion_room, tree_depth
from ..ir import (Access, Affine, Binary, Call, Cast, Const, Constraint, DType, Expr, IndexExpr,
                  MATH_FUNCTIONS, Program, ScalarDecl, ScalarRef, Select, Statement, TensorDecl,
                  TensorType, Unary, lower_bound, upper_bound_exclusive)
from ..ir.expr import ARITHMETIC_OPS, REDUCTION_IDENTITY, condition_arithmetic
from ..ir.types import f32, f64, i32, i64, u8, u16

#: Conversions as Tensor Comprehensions and C write them: `int32(x)`, `float(x)`.  TC's `float`
#: and `int` are 32-bit, as in C (`double` and `long` are the 64-bit ones).
CAST_FUNCTIONS: Dict[str, DType] = {"int32": i32, "int64": i64, "uint8": u8, "uint16": u16, "float32": f32,
                                    "float64": f64, "float": f32, "double": f64, "int": i32, "long": i64}
from ..ir.program import EXTREME_ITERATOR
from ..ir.guards import guarded_accesses
from .einsum_affine import Divisions, is_integer_affine, to_affine
from .einsum_parser import Node, SourceStatement, parse_einsum
from .tokens import identifier

Declaration = Union[TensorType, DType]



def _walk(node: Node) -> List[Node]:
    """`node` and every node below it, parents first, in source order (iterative: trees may be deep)."""
    out: List[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.args))
    return out


def _names_in(node: Node) -> List[Node]:
    return [n for n in _walk(node) if n.kind == "name"]


def _folded_integers(kind: str, op: str, args: List[Expr]) -> Optional[Const]:
    """Integer literal arithmetic as one literal (Python's exact integers, floor `//` and `%`), or
    None: numpy sees `A_u8 + (256 - 1)` as `A_u8 + 255`, and `A_u8 + 2 ** 8` as `A_u8 + 256`."""
    if not all(isinstance(a, Const) and a.dtype is None and type(a.value) is int for a in args):
        return None
    if kind == "un" and op == "-":
        return Const(-args[0].value)
    if kind != "bin" or len(args) != 2:
        return None
    a, b = args[0].value, args[1].value
    if op in ("//", "%") and b == 0 or op == "**" and (b < 0 or b > 64):
        return None     # as the kernel computes them (no Python exception), or too large to write out
    ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "//": lambda: a // b, "%": lambda: a % b,
           "**": lambda: a ** b}
    if op not in ops:
        return None
    value = ops[op]()
    return Const(value) if abs(value) < 2 ** 128 else None


def _has_product_of_symbols(node: Node, is_symbol) -> bool:
    """Whether `node` multiplies two operands that both hold an index or size (`x * y`)."""
    def symbolic(n: Node) -> bool:
        todo = [n]
        while todo:
            m = todo.pop()
            if m.kind == "name" and is_symbol(m.value):
                return True
            todo.extend(a for a in m.args or () if isinstance(a, Node))
        return False
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind == "bin" and n.value == "*" and symbolic(n.args[0]) and symbolic(n.args[1]):
            return True
        stack.extend(a for a in n.args or () if isinstance(a, Node))
    return False


def _subscripts_in(node: Node) -> List[Node]:
    """The subscript expressions of every tensor access in `node`, in source order."""
    return [a for n in _walk(node) if n.kind == "access" for a in n.args]


class _Lowering:
    def __init__(self, statements: List[SourceStatement], declared: Mapping[str, Declaration], name: str,
                 source: str, outputs: Optional[Sequence[str]] = None):
        self.src = statements
        self.outputs = None if outputs is None else tuple(outputs)
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
        self.int_params: List[str] = []
        self._divs: Optional[Divisions] = None
        self.derived: List[Tuple[str, Affine, int]] = []
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
        for st in self.src:
            self._note_tensor(st.target, len(st.target_indices), st.target_loc)
            for part in st.target_indices + (st.rhs,) + st.exists:
                for node in _walk(part):
                    if node.kind == "access":
                        self._note_tensor(node.value, len(node.args), node.loc)  # type: ignore[arg-type]

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
        rhs_subscripts = _subscripts_in(st.rhs)
        for ix in rhs_subscripts:
            add_from(ix)
        for node in st.exists:      # `B(i) +=! 1.0 where exists A(i, j)`: j is the statement's too
            for ix in node.args:
                add_from(ix)
        for w in st.wheres:
            if w.index in order:
                continue
            if st.op == "=" and not any(n.value == w.index for n in _names_in(st.rhs)):
                raise ParseError(f"'where' names {w.index!r}, which no subscript or value of this statement uses", w.loc)
            # An index used only as a value (loopy's sum(j, j**2)), or not at all in a reduction
            # (`tmp[i] +=! 1 where k in 0:i+1` counts the k).
            order.append(w.index)
        return order

    # -- expressions -----------------------------------------------------------------------------
    def _expr(self, root: Node, indices: List[str]) -> Expr:
        """Lower a syntax tree to an IR expression (iterative post-order: trees may be deep)."""
        stack: List[Tuple[Node, bool]] = [(root, False)]
        done: List[Expr] = []
        while stack:
            node, children_done = stack.pop()
            if children_done:
                args = done[len(done) - len(node.args):]
                del done[len(done) - len(node.args):]
                done.append(self._combine(node, args))
                continue
            leaf = self._leaf(node, indices)
            if leaf is not None:
                done.append(leaf)
                continue
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(node.args))
        return done[0]

    def _leaf(self, node: Node, indices: List[str]) -> Optional[Expr]:
        """The IR of a node lowered without lowering its children first, or None."""
        k = node.kind
        if k in ("num", "bool"):
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
            subs = tuple(to_affine(a, f"the subscripts of {node.value}", self._divs) for a in node.args)
            return Access(node.value, subs)  # type: ignore[arg-type]
        if k == "bin" and node.value in ("//", "%") and is_integer_affine(
                node, lambda n: n in indices or n in self.sizes) and not _has_product_of_symbols(
                node, lambda n: n in indices or n in self.sizes):
            # Quasi-affine in indices and sizes: exact through a quotient iterator (isl).  A
            # product of two indices (`(x * y) // 10`) is no subscript: computed as a value.
            return IndexExpr(to_affine(node, "an integer division", self._divs))
        if k in ("un", "bin", "call"):
            return None
        raise ParseError("unsupported expression", node.loc)

    def _combine(self, node: Node, args: List[Expr]) -> Expr:
        """The IR of an operator or call node whose operands are lowered to `args`."""
        k = node.kind
        if k == "un":
            return Unary(node.value, args[0])  # type: ignore[arg-type]
        if k == "bin" and node.value == "//" and "//" not in ARITHMETIC_OPS:
            # Data `//` without an IR floor-division operator: the floor of the true quotient (a
            # float).  Where the IR has `//` (integer-preserving floor division), it is used as is.
            return Call("floor", (Binary("/", args[0], args[1]),))
        folded = _folded_integers(k, node.value, args)
        if folded is not None:      # `256 - 1`, `2 ** 8`: one literal, as Python computes it first
            return folded
        if k == "bin" and node.value == "**":
            return Call("pow", (args[0], args[1]))
        if k == "bin":
            try:        # numpy's rule for two conditions: `+` is or, `*` is and
                combined = condition_arithmetic(str(node.value), args[0], args[1])
            except ValueError as e:
                raise ParseError(str(e), node.loc) from None
            return combined or Binary(node.value, args[0], args[1])  # type: ignore[arg-type]
        fn = node.value
        if fn in CAST_FUNCTIONS:
            if len(args) != 1:
                raise ParseError(f"{fn}(x) converts one value, got {len(args)} arguments", node.loc)
            return Cast(CAST_FUNCTIONS[fn], args[0])
        if fn == "rsqrt" and len(args) == 1:      # CUDA's and TC's reciprocal square root
            return Binary("/", Const(1.0), Call("sqrt", (args[0],)))
        fn = {"fabs": "abs", "fmaxf": "fmax", "fminf": "fmin"}.get(fn, fn)   # C's spellings
        if fn == "select":
            if len(args) != 3:
                raise ParseError(f"select takes 3 arguments (condition, if_true, if_false), got {len(args)}",
                                 node.loc)
            return Select(*args)
        if fn not in MATH_FUNCTIONS:
            known = ", ".join(sorted(MATH_FUNCTIONS) + ["select", "rsqrt"]) + \
                "; conversions: " + ", ".join(CAST_FUNCTIONS)
            raise ParseError(f"unknown function {fn!r}; available: {known}", node.loc)
        if MATH_FUNCTIONS[fn] != len(args):  # type: ignore[index]
            raise ParseError(f"{fn} takes {MATH_FUNCTIONS[fn]} argument(s), got {len(args)}",  # type: ignore[index]
                             node.loc)
        return Call(fn, tuple(args))  # type: ignore[arg-type]

    def _exists(self, node: Node, indices: List[str]) -> Access:
        """A `where exists T[...]` access; its subscripts name the statement's own indices."""
        for n in _names_in(node):
            if n.value not in indices and n.value not in self.sizes and n.value not in self.int_params \
                    and n.value != node.value:
                raise ParseError(f"{n.value!r} in 'exists' is no index of this statement (nor a size)", n.loc)
        access = self._expr(node, indices)
        if not isinstance(access, Access):
            raise ParseError("'exists' takes a tensor access (where exists A[i, j])", node.loc)
        return access

    def _promote_int_params(self) -> None:
        """Declared integer scalars used in subscripts or `where` bounds become isl parameters.

        (Tensor Comprehensions' shift and dilation sizes: `O[i] = A[i + s]` with `s=pc.i64`.)
        """
        for st in self.src:
            affine_parts = list(st.target_indices) + _subscripts_in(st.rhs)
            affine_parts += [b for w in st.wheres for b in (w.lower, w.upper)]
            for n in (m for part in affine_parts for m in _names_in(part)):
                name = n.value
                dtype = self.scalar_decls.get(name)  # type: ignore[arg-type]
                if dtype is None:
                    continue
                if dtype.is_float:
                    raise ParseError(f"scalar {name!r} is declared {dtype!r} but used in a subscript or "
                                     f"range, which must be integer; declare it {name}=pc.i64", n.loc)
                self.int_params.append(name)  # type: ignore[arg-type]
                self.sizes.append(name)  # type: ignore[arg-type]
                del self.scalar_decls[name]  # type: ignore[arg-type]

    def _check_reduction_index(self, st: SourceStatement, name: str) -> None:
        """A right-only name needs a range: a bare subscript (shape) or a `where` clause.

        Without either it would silently become a one-point reduction (TC's `A[i, j - SHIFT]`)."""
        if any(w.index == name for w in st.wheres):
            return

        subscripts = _subscripts_in(st.rhs) + [ix for node in st.exists for ix in node.args]
        if not any(a.kind == "name" and a.value == name for a in subscripts):
            raise ParseError(f"{name!r} appears only on the right-hand side and never alone as a subscript, "
                             f"so no tensor shape gives its range: if it is an integer parameter declare it "
                             f"({name}=pc.i64); if it is a reduction index state its range "
                             f"('where {name} in lo:hi')", st.loc)

    # -- statements ----------------------------------------------------------------------------
    def lower(self) -> Program:
        self._collect_tensors()
        self._promote_int_params()
        statements: List[Statement] = []
        first_write: Dict[str, int] = {}
        last_write: Dict[str, int] = {}
        read_at: Dict[str, List[int]] = {}
        accumulate_first: Set[str] = set()
        reserved = {n.value for st in self.src for part in (st.rhs,) + st.target_indices + st.exists
                    for n in _names_in(part)}
        reserved |= {w.index for st in self.src for w in st.wheres}
        for n, st in enumerate(self.src):
            indices = self._statement_indices(st)
            divs = self._divs = Divisions(reserved, self.derived, lambda v: v not in indices)  # type: ignore[arg-type]
            target_subs = tuple(to_affine(a, f"the subscripts of {st.target}", None) for a in st.target_indices)
            lhs_vars = [v for a in target_subs for v in a.variables if v in indices]
            value = self._expr(st.rhs, indices)
            exists = tuple(self._exists(node, indices) for node in st.exists)
            rhs_only = [i for i in indices if i not in lhs_vars]
            for i in rhs_only:
                self._check_reduction_index(st, i)
            bang = st.op.endswith("!")
            op = st.op.rstrip("!").rstrip("=") or None
            if op is None and rhs_only:
                raise ParseError(f"index {rhs_only[0]!r} appears only on the right-hand side; "
                                 f"to reduce over it write '+=!' (or '*=!', 'max=!', 'min=!')", st.loc)
            ranges: Dict[str, Tuple[Constraint, ...]] = {}
            for w in st.wheres:
                lo = to_affine(w.lower, "a 'where' bound", divs)
                hi = to_affine(w.upper, "a 'where' bound", divs)
                # A name in a bound that is no index is a size symbol (bound at call time).
                for v in divs.plain_variables(lo) + divs.plain_variables(hi):
                    if v not in indices and v not in self.sizes:
                        if v in self.tensor_names or v in self.scalar_decls:
                            raise ParseError(f"{v!r} in a 'where' bound must be an index or a size, "
                                             f"not a tensor or scalar", w.loc)
                        self.sizes.append(v)
                ranges[w.index] = (lower_bound(w.index, lo), upper_bound_exclusive(w.index, hi))
            for d_name, num, _ in self.derived:  # sizes defined by quotients (`H // 2`) are sizes
                for v in num.variables + (d_name,):
                    if v not in self.sizes:
                        self.sizes.append(v)
            target = Access(st.target, target_subs)
            for acc, _ in guarded_accesses(value):  # iterative (value trees may be deep)
                read_at.setdefault(acc.tensor, []).append(n)
            last_write[st.target] = n
            if st.target not in first_write:
                first_write[st.target] = n
                if op is not None and not bang:
                    accumulate_first.add(st.target)
            lhs_iters = tuple(i for i in indices if i in lhs_vars)
            common = dict(location=st.loc, text=st.text)
            for q in divs.quotient_names:
                ranges[q] = divs.constraints(q)
            for m in divs.extremes.names:
                ranges[m] = ()   # a min/max is fixed by its pieces (`choices`), never inferred
            choices = divs.choices()   # clamp alternatives: one conjunction each (one when none)
            if op is not None and bang:
                lhs_cs = [c for i in lhs_iters for c in ranges.get(i, ())]
                init_divs = divs.needed_by(v for c in lhs_cs for v in c.expr.variables)
                init_iters = lhs_iters + init_divs
                init_choices = divs.choices() if set(init_divs) & set(divs.extremes.names) else [()]
                statements.append(Statement(
                    name=f"S{len(statements)}", iterators=init_iters,
                    domain=_domain(tuple(c for i in init_iters for c in ranges.get(i, ())), init_choices, init_iters),
                    target=target, value=Const(REDUCTION_IDENTITY[op]), order=(len(statements),) + (0,) * len(init_iters),
                    inferred=tuple(i for i in lhs_iters if i not in ranges), divisions=init_divs, **common))
            if op is not None:
                read_at.setdefault(st.target, []).append(n) if not bang else None
            iters = tuple(indices) + divs.names
            statements.append(Statement(
                name=f"S{len(statements)}", iterators=iters,
                domain=_domain(tuple(c for i in iters for c in ranges.get(i, ())), choices, iters),
                target=target, value=value, update=op, order=(len(statements),) + (0,) * len(iters),
                reduction=tuple(rhs_only), inferred=tuple(i for i in iters if i not in ranges),
                divisions=divs.names, exists=exists, **common))
        return Program(name=self.name, tensors=self._tensors(first_write, read_at, accumulate_first, last_write),
                       statements=tuple(statements), sizes=tuple(self.sizes), scalars=self._scalars(),
                       source=self.source, frontend="einsum", int_params=tuple(dict.fromkeys(self.int_params)),
                       derived_sizes=tuple(self.derived), assumptions=self._derived_assumptions())

    def _derived_assumptions(self) -> Tuple[Constraint, ...]:
        """`d*D <= num <= d*D + d - 1` for every size `D = floor(num / d)`: isl reasons with it."""
        out: List[Constraint] = []
        for name, num, d in self.derived:
            q = Affine.var(name).scale(d)
            out += [Constraint("ge", num - q), Constraint("ge", q + (d - 1) - num)]
        return tuple(out)

    def _tensors(self, first_write: Dict[str, int], read_at: Dict[str, List[int]],
                 accumulate_first: Set[str], last_write: Dict[str, int]) -> Tuple[TensorDecl, ...]:
        """Roles: a tensor whose last write is the kernel's last word about it (no statement reads it
        afterwards) is returned; one that is read after its last write is an intermediate.  With
        `outputs=[...]` the user names the returned tensors (as Tensor Comprehensions' signature does)."""
        out = []
        for name in self.tensor_names:
            decl = self.tensor_decls.get(name)
            reads = read_at.get(name, [])
            if name not in first_write:
                role = "input"
            elif name in accumulate_first or any(r < first_write[name] for r in reads) or \
                    any(r == first_write[name] for r in reads):
                role = "inout"
            else:
                role = "output"
            if role != "input" and (name not in self.outputs if self.outputs is not None
                                    else any(r > last_write[name] for r in reads)):
                if role == "inout":
                    if self.outputs is not None:
                        raise ParseError(f"{name!r} is read before this kernel writes it, so it is updated in "
                                         f"place and must be one of the outputs; add it to outputs=[...]")
                else:
                    role = "temp"
            out.append(TensorDecl(name, decl.dtype if decl else None, decl.shape if decl else None, role,
                                  declared=decl is not None))
        return tuple(out)

    def _scalars(self) -> Tuple[ScalarDecl, ...]:
        names = list(self.scalars) + [s for s in self.scalar_decls if s not in self.scalars]
        return tuple(ScalarDecl(s, self.scalar_decls.get(s)) for s in names)


def program_from_einsum(source: str, name: str = "kernel", declared: Optional[Mapping[str, Declaration]] = None,
                        filename: str = "<kernel>", outputs: Optional[Sequence[str]] = None,
                        display: Optional[str] = None, parameters: Sequence[str] = ()) -> Program:
    """Parse and lower Einstein-notation `source`; `declared` maps names to tensor or scalar types.

    `outputs` names the tensors a call returns; by default every written tensor that no statement
    reads after its last write.  `display`: the text the user wrote, line for line and column for
    column where `source` was derived from it (a Tensor Comprehensions `def`), shown in messages.
    `parameters`: declared names that are a function's parameters (a `def`'s signature), which the
    body need not use; any other declaration it does not use is refused (a typo, most likely)."""
    if outputs is not None:
        if isinstance(outputs, str) or not all(isinstance(o, str) for o in outputs):
            raise ParseError(f"outputs must be a list of tensor names, like outputs=['O'], not {outputs!r}")
    declared = _normalised_names(declared or {})
    for k, v in declared.items():
        if not isinstance(v, (TensorType, DType)):
            raise ParseError(f"declaration {k}={v!r} is neither a tensor type (pc.f32['N']) nor a scalar "
                             f"type (pc.f32)")
    extents = {k: tuple(str(e) for e in v.shape) for k, v in declared.items() if isinstance(v, TensorType)}
    statements = parse_einsum(source, filename, display, extents)     # `extents`: TC's `T.d`
    for st in statements:   # deep right-hand sides: room for the recursive lowering and every later walker
        ensure_recursion_room(tree_depth(st.rhs, lambda n: n.args), f"the right-hand side of {st.target}", st.loc)
    lowering = _Lowering(statements, declared, name, source, outputs)
    program = lowering.lower()
    if outputs is not None:
        written = {st.target.tensor for st in program.statements}
        for o in outputs:
            if o not in written:
                raise ParseError(f"outputs names {o!r}, which no statement of the kernel writes"
                                 + ("" if o in program.tensor_map else " (no tensor has that name)"))
    used = {st.target.tensor for st in program.statements}
    used |= {a.tensor for st in program.statements for a, _ in guarded_accesses(st.value)}
    used |= {a.tensor for st in program.statements for a in st.exists}
    used |= set(lowering.scalars)  # the scalars the statements read
    used |= set(program.int_params)
    sizes_used = _sizes_used(program, used)
    for k in declared:
        if k in used or k in parameters:
            continue
        decl = declared[k]
        if isinstance(decl, TensorType) and any(v in sizes_used for e in decl.shape for v in e.variables):
            continue   # TC's `S=f32(N)` only binds N: an input whose shape is checked at call time
        constant = (f" ({k} in a kernel is the constant {'infinity' if k == 'inf' else 'not-a-number'}; "
                    f"name the scalar otherwise)" if k in ("inf", "nan") else "")
        raise ParseError(f"{k!r} is declared but the kernel never uses it"
                         + (" (nor any size of its shape)" if isinstance(decl, TensorType) else "") + constant,
                         statements[0].loc if statements else None)     # the kernel, in the user's file
    return program


def _normalised_names(declared: Mapping[str, Declaration]) -> Dict[str, Declaration]:
    """The declarations under their names as the kernel text reads them (NFKC, as Python reads
    identifiers: `𝐀` is `A`); two keywords naming one tensor so are refused."""
    out: Dict[str, Declaration] = {}
    for k, v in declared.items():
        name = identifier(k) if isinstance(k, str) else k
        if name in out:
            raise ParseError(f"the declarations {name!r} and {k!r} name one tensor ({k!r} reads as {name!r}, "
                             f"as Python reads identifiers); declare it once")
        out[name] = v
    return out


def _sizes_used(program: Program, used_tensors: Set[str]) -> Set[str]:
    """Sizes the statements mention (domains, subscripts, index values) or that shape a used tensor."""
    out: Set[str] = set()
    for st in program.statements:
        out |= {v for conj in st.domain for c in conj for v in c.expr.variables}
        for e in (st.target,) + tuple(st.value.walk()):
            if isinstance(e, Access):
                out |= {v for a in e.indices for v in a.variables}
            elif isinstance(e, IndexExpr):
                out |= set(e.value.variables)
    for t in program.tensors:
        if t.name in used_tensors and t.shape is not None:
            out |= {v for e in t.shape for v in e.variables}
    return out & set(program.sizes)


def _domain(base: Tuple[Constraint, ...], choices: List[Tuple[Constraint, ...]],
            iterators: Tuple[str, ...]) -> Tuple[Tuple[Constraint, ...], ...]:
    """The statement's domain: `base` and one of the clamp `choices` (only the constraints over the
    statement's own iterators, sizes and other names that are not iterators of it)."""
    own = set(iterators)
    out = []
    for choice in choices:
        kept = tuple(c for c in choice if all(v in own or not EXTREME_ITERATOR.fullmatch(v) for v in c.expr.variables))
        conj = base + kept
        if conj not in out:
            out.append(conj)
    return tuple(out)
