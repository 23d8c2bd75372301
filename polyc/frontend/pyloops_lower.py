"""Statements of affine-Python kernels: `for ... in range`, affine `if`s and assignments.

Part of the Python-loops front end (`polyc.frontend.pyloops`).  Turns the function body into a
small tree of `RawLoop`s and `RawStmt`s: each statement already carries its iteration domain
(loop bounds and guards), its 2d+1 source position and its lowered expressions; reads and writes
of kernel-local scalars are still by name (`LocalRef`, `RawStmt.target_local`) because their
storage is decided afterwards from the whole body (`pyloops_locals`).

`if` statements are flattened: their statements become siblings at the `if`'s depth with the test
(or its exact negation for `else`) conjoined to their domain, and they are marked `conditional`.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import PolycError, SourceLocation
from ..ir import Access, Affine, Binary, Call, Constraint, Expr, IndexExpr, ScalarRef, Unary
from .pyloops_dnf import DNF, TRUE, dnf_and
from .pyloops_exprs import ExprLowering, LocalRef
from .pyloops_source import Source, int_literal

_UPDATES = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


@dataclass
class RawLoop:
    """A `for var in range(...)` loop with its constraints on `var`."""

    var: str
    domain: DNF
    descending: bool
    #: Affine bounds in outer variables and sizes, each valid on its own: `var >= l`, `var <= u`.
    lowers: List[Affine]
    uppers: List[Affine]
    body: List["RawNode"] = field(default_factory=list)


@dataclass
class RawStmt:
    """One assignment, lowered except for the storage of kernel-local scalars."""

    node: ast.stmt
    loops: Tuple[RawLoop, ...]
    domain: DNF
    conditional: bool                     # under an `if`: does not always execute
    order: Tuple[int, ...]
    target_array: Optional[Access]        # exactly one of target_array / target_local is set
    target_local: Optional[str]
    value: Expr
    update: Optional[str]
    location: SourceLocation
    text: str
    reads_locals: frozenset = frozenset()

    @property
    def kills(self) -> bool:
        """Always overwrites its local scalar without reading it first."""
        return (self.target_local is not None and self.update is None and not self.conditional
                and self.target_local not in self.reads_locals)


RawNode = Union[RawLoop, RawStmt]


def local_reads(e: Expr) -> frozenset:
    return frozenset(x.name for x in e.walk() if isinstance(x, LocalRef))


class BodyLowering:
    """Walks a function body; see the module docstring."""

    def __init__(self, source: Source, exprs: ExprLowering, dedented: str):
        self.src = source
        self.exprs = exprs
        self.scope = exprs.scope
        self.dedented = dedented
        self._serial = 0
        #: How many assignments name each local scalar anywhere in the kernel.
        self._assignments: Dict[str, int] = {}

    def lower_function(self, fn: ast.FunctionDef) -> List[RawNode]:
        for sub in ast.walk(fn):
            targets = sub.targets if isinstance(sub, ast.Assign) else \
                [sub.target] if isinstance(sub, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if isinstance(t, ast.Name):
                    self._assignments[t.id] = self._assignments.get(t.id, 0) + 1
        body = list(fn.body)
        if body and isinstance(body[-1], ast.Return) and body[-1].value is None:
            body = body[:-1]                       # a trailing bare `return` is harmless
        return self._block(body, (), TRUE, False, (), [0])

    def _block(self, stmts: Sequence[ast.stmt], loops: Tuple[RawLoop, ...], guard: DNF,
               conditional: bool, prefix: Tuple[int, ...], counter: List[int]) -> List[RawNode]:
        out: List[RawNode] = []
        for st in stmts:
            if isinstance(st, ast.Pass) or (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)):
                continue                           # docstrings, `...` and `pass` do nothing
            if isinstance(st, ast.For):
                out.append(self._loop(st, loops, guard, conditional, prefix, counter))
            elif isinstance(st, ast.If):
                test = self.exprs.condition(st.test)
                out += self._block(st.body, loops, dnf_and(guard, test), True, prefix, counter)
                if st.orelse:
                    negated = self.exprs.condition(st.test, negate=True)
                    out += self._block(st.orelse, loops, dnf_and(guard, negated), True, prefix, counter)
            elif isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                order = prefix + (counter[0],)
                counter[0] += 1
                out.append(self._assignment(st, loops, guard, conditional, order))
            else:
                raise self.src.error(st, self._refusal(st))
        return out

    @staticmethod
    def _refusal(st: ast.stmt) -> str:
        allowed = ("allowed statements are `for v in range(...)`, affine `if`/`elif`/`else`, and "
                   "assignments (=, +=, -=, *=, /=) to array elements or local scalars")
        why = {ast.While: "`while` loops are not supported (the trip count must be affine)",
               ast.Break: "`break` is not supported (loops must run their whole range)",
               ast.Continue: "`continue` is not supported; guard the statements with an `if`",
               ast.Return: "`return` is only allowed as a bare `return` at the end of the kernel; "
                           "kernels write their results into arrays",
               ast.FunctionDef: "nested functions are not supported",
               ast.AsyncFunctionDef: "nested functions are not supported",
               ast.ClassDef: "classes are not supported in a kernel",
               ast.With: "`with` is not supported in a kernel",
               ast.Try: "`try` is not supported in a kernel",
               ast.Import: "imports are not allowed inside a kernel; import at module level",
               ast.ImportFrom: "imports are not allowed inside a kernel; import at module level",
               ast.Global: "`global` is not supported in a kernel",
               ast.Nonlocal: "`nonlocal` is not supported in a kernel",
               ast.Delete: "`del` is not supported in a kernel",
               ast.Expr: "an expression statement has no effect on arrays (calls such as print "
                         "are not allowed)"}
        return f"{why.get(type(st), f'`{type(st).__name__}` statements are not supported')}; {allowed}"

    # -- loops --------------------------------------------------------------------------------
    def _loop(self, st: ast.For, loops: Tuple[RawLoop, ...], guard: DNF, conditional: bool,
              prefix: Tuple[int, ...], counter: List[int]) -> RawLoop:
        if not isinstance(st.target, ast.Name):
            raise self.src.error(st.target, "tuple unpacking in a `for` is not supported; "
                                            "loop over `range(...)` with one variable")
        var = st.target.id
        if st.orelse:
            raise self.src.error(st, "`for ... else` is not supported")
        if var in self.scope.loop_vars:
            raise self.src.error(st.target, f"loop variable `{var}` already names an enclosing loop")
        if var in self.scope.params() or var in self.scope.sizes or var in self.scope.locals:
            raise self.src.error(st.target, f"loop variable `{var}` clashes with a parameter, "
                                            "size or local scalar of the same name")
        it = st.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and 1 <= len(it.args) <= 3 and not it.keywords):
            raise self.src.error(it, "a kernel loop must iterate over `range(stop)`, "
                                     "`range(start, stop)` or `range(start, stop, step)` with affine "
                                     "bounds; other iterables are not supported")
        args = list(it.args)
        start = args[0] if len(args) >= 2 else ast.copy_location(ast.Constant(0), it)
        stop = args[1] if len(args) >= 2 else args[0]
        step = 1
        if len(args) == 3:
            step = self._step(args[2])
        v = Affine.var(var)
        if step > 0:   # start <= v < stop
            domain = dnf_and(self.exprs.bound(start, lambda a: Constraint("ge", v - a), "max"),
                             self.exprs.bound(stop, lambda a: Constraint("ge", a - v - 1), "min"))
            lowers, uppers = self._plain(start, "max", 0), self._plain(stop, "min", -1)
            anchor_node, sign = start, 1
        else:          # stop < v <= start
            domain = dnf_and(self.exprs.bound(start, lambda a: Constraint("ge", a - v), "min"),
                             self.exprs.bound(stop, lambda a: Constraint("ge", v - a - 1), "max"))
            lowers, uppers = self._plain(stop, "max", 1), self._plain(start, "min", 0)
            anchor_node, sign = start, -1
        if abs(step) != 1:
            if isinstance(anchor_node, ast.Call):
                raise self.src.error(anchor_node, "a loop with a step other than 1 or -1 needs a "
                                                  "plain affine start (no min/max)")
            anchor = self.exprs.affine(anchor_node, "a loop bound")
            domain = dnf_and(domain, [[Constraint("mod", (v - anchor).scale(sign), abs(step))]])
        loop = RawLoop(var, domain, step < 0, lowers, uppers)
        position = counter[0]
        counter[0] += 1
        self.scope.loop_vars.append(var)
        self._serial += 1
        self.scope.loop_path.append(self._serial)
        try:
            loop.body = self._block(st.body, loops + (loop,), guard, conditional,
                                    prefix + (position,), [0])
        finally:
            self.scope.loop_vars.pop()
            self.scope.loop_path.pop()
        return loop

    def _step(self, node: ast.AST) -> int:
        value = int_literal(node)
        if not value:
            raise self.src.error(node, "the step of `range` must be a non-zero integer literal")
        return value

    def _plain(self, node: ast.AST, conj: str, offset: int) -> List[Affine]:
        """Bounds that hold on their own (one per argument of a conjunctive min/max), plus offset."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            if node.func.id != conj:
                return []
            return [b for a in node.args for b in self._plain(a, conj, offset)]
        bound = self.exprs.affine(node, "a loop bound")
        if any(v in self.exprs.clamps.names for v in bound.variables):
            return []    # a min/max inside a bound expression: no bound in sizes on its own
        if any(v in self.exprs.divs.names for v in bound.variables):
            # A quotient of loop variables is no bound in sizes, but `e % d` lies in 0..d-1: that
            # bounds the loop on its own (it sizes local temps); other quotients give no bound.
            for name, num, d in self.exprs.divs.defs:
                if bound == num - Affine.var(name).scale(d):
                    return [Affine.const(0 if conj == "max" else d - 1) + offset]
            return []
        return [bound + offset]

    # -- assignments --------------------------------------------------------------------------
    def _is_affine_condition(self, node: ast.AST) -> bool:
        """Whether `node` is a test `if` takes: affine comparisons combined with and/or/not."""
        if not isinstance(node, (ast.Compare, ast.BoolOp)) and not (
                isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
            return False
        try:
            self.exprs.condition(node)
        except PolycError:
            return False
        return True

    def _assignment(self, st: ast.stmt, loops: Tuple[RawLoop, ...], guard: DNF, conditional: bool,
                    order: Tuple[int, ...]) -> RawStmt:
        if isinstance(st, ast.Assign):      # one target: `split_chained_assignments` split `a = b = v`
            target, op, value_node = st.targets[0], None, st.value
        elif isinstance(st, ast.AnnAssign):
            if st.value is None:
                raise self.src.error(st, "a bare annotation declares nothing; assign a value")
            target, op, value_node = st.target, None, st.value
        else:
            assert isinstance(st, ast.AugAssign)
            if type(st.op) not in _UPDATES:
                raise self.src.error(st, f"the augmented assignment in `{ast.unparse(st)}` is not "
                                         "supported; use +=, -=, *= or /=")
            target, op, value_node = st.target, _UPDATES[type(st.op)], st.value
        target_array: Optional[Access] = None
        target_local: Optional[str] = None
        current: Expr
        if isinstance(target, ast.Subscript):
            target_array = self.exprs.access(target)
            current = target_array
        elif isinstance(target, ast.Name):
            name = target.id
            if name in self.scope.params():
                raise self.src.error(target, f"cannot assign to parameter `{name}`: assign to array "
                                             f"elements (`{name}[i] = ...`); scalar parameters are "
                                             "read-only")
            if name in self.scope.sizes:
                raise self.src.error(target, f"cannot assign to size `{name}`: sizes are fixed by "
                                             "the arrays' shapes and `int` parameters")
            if name in self.scope.all_loop_vars:
                raise self.src.error(target, f"cannot assign to loop variable `{name}`")
            target_local = name
            current = LocalRef(name)
        elif isinstance(target, (ast.Tuple, ast.List)):
            raise self.src.error(target, "tuple unpacking is not supported; assign one value per statement")
        else:
            raise self.src.error(target, f"cannot assign to `{ast.unparse(target)}`; assign to array "
                                         "elements or local scalars")
        value = self.exprs.value(value_node)
        if target_local is not None and op is None and not conditional and \
                self._assignments.get(target_local) == 1:
            known = self.exprs.try_affine(value_node, extremes=True)
            if known is not None:   # usable in later subscripts, bounds and tests of these loops
                self.scope.affine_locals[target_local] = (known, tuple(self.scope.loop_path))
            else:
                self.scope.why_not_affine[target_local] = f"its value `{ast.unparse(value_node)}` is not affine"
                if self._is_affine_condition(value_node):      # usable as a later `if` test
                    self.scope.condition_locals[target_local] = (value_node, tuple(self.scope.loop_path))
        elif target_local is not None:
            self.scope.why_not_affine[target_local] = "it is assigned more than once or under an `if`" \
                if op is None else "it is updated in place"
        update: Optional[str] = None
        if op == "+":
            update = "+"
        elif op == "-" and _unsigned(target_array, self.scope.arrays):
            value = Binary("-", current, value)   # `A[i] -= 100` on uint8 wraps; `+= -100` has no uint8 literal
        elif op == "-":
            update, value = "+", Unary("-", value)
        elif op == "*":
            update = "*"
        elif op == "/":
            value = Binary("/", current, value)
        if op is None and target_array is not None:
            update, value = _extreme_update(target_array, value, {n: t.dtype for n, t in self.scope.arrays.items()})
        reads = local_reads(value) | (frozenset([target_local]) if target_local and update else frozenset())
        text = ast.get_source_segment(self.dedented, st) or ast.unparse(st)
        domain: DNF = TRUE
        for loop in loops:
            domain = dnf_and(domain, loop.domain)
        domain = dnf_and(domain, guard)
        return RawStmt(st, loops, domain, conditional, order, target_array, target_local, value,
                       update, self.src.location(st), text, reads)


def _unsigned(target: Optional[Access], arrays: Mapping[str, Any]) -> bool:
    """Whether `target` is an element of an array of an unsigned integer type (uint8, uint16)."""
    dtype = arrays[target.tensor].dtype if target is not None and target.tensor in arrays else None
    return dtype is not None and not dtype.is_float and dtype.name.startswith("u")


def _extreme_update(target: Access, value: Expr, dtypes: Mapping[str, Any]) -> Tuple[Optional[str], Expr]:
    """`X[i] = max(X[i], e)` on integers (the builtin, or `np.maximum`) is the update `X[i] max= e`
    (`min` likewise), so a
    schedule may treat it as the reduction it is (`vectorize(.., reduction=True)`); Python's
    builtin and `max=` agree on integers (on floats they differ at NaN: those stay as written).
    Only where `e` reads arrays of X's own type and nothing else: an int32 maximum stored into a
    uint8 `X` wraps after the comparison, which `max=` in uint8 would not.  (None, value) else."""
    dtype = dtypes.get(target.tensor)
    if dtype is None or dtype.is_float or not isinstance(value, Call) \
            or value.fn not in ("pymax", "pymin", "max", "min") or len(value.args) != 2:
        return None, value
    a, b = value.args
    other = b if a == target else a if b == target else None
    if other is None or any(isinstance(n, (ScalarRef, IndexExpr)) for n in other.walk()) \
            or any(x.tensor == target.tensor or dtypes.get(x.tensor) != dtype for x in other.accesses()):
        return None, value
    return value.fn.replace("py", ""), other
