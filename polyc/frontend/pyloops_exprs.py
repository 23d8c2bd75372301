"""Expressions of affine-Python kernels: affine index expressions, `if` conditions and values.

Part of the Python-loops front end (`polyc.frontend.pyloops`).  Three readings of an `ast` node:

- `affine`: subscripts and loop bounds, affine in enclosing loop variables and sizes;
- `condition`: an affine `if` test as a disjunction of conjunctions of constraints (DNF), with
  negation pushed inward so that the `else` of a compound test is exact;
- `value`: a right-hand side, lowered to `polyc.ir` expressions.  Reads of kernel-local scalars
  become `LocalRef` placeholders that `pyloops_locals` later turns into temp-tensor accesses.

Everything refused raises `ParseError` pointing at the offending node in the real source file.
"""
from __future__ import annotations

import ast
import builtins
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set

import numpy as np

from ..errors import LiteralRangeError, ParseError
from ..ir import (Access, Affine, Binary, Call, Cast, Const, Constraint, DType, Expr, IndexExpr,
                  ScalarRef, Select, TensorType, Unary, f32, f64, i32, i64, stop_gradient)
from ..ir.expr import condition_arithmetic, is_condition
from .einsum_affine import Divisions, Extremes  # noqa: F401  (Extremes re-exported)
from .pyloops_dnf import DNF, FALSE, TRUE, dnf_and, dnf_or
from .pyloops_source import Source, int_literal, short_text

ALLOWED_CALLS = ("math/numpy sqrt, exp, log, tanh, sin, cos, floor, ceil, fabs, power, maximum, "
                 "minimum, fmax, fmin, polyc's stop_gradient, and the builtins abs, min, max, pow, float, "
                 "int")


@dataclass(frozen=True)
class LocalRef(Expr):
    """Placeholder for a read of a kernel-local scalar; replaced by an access to its temp tensor."""

    name: str


@dataclass
class Scope:
    """Names a kernel body can see, and what each one is."""

    arrays: Dict[str, TensorType]
    scalars: Dict[str, DType]               # scalar parameters used as values (`alpha: float`)
    sizes: Set[str]                         # shape symbols and `int` parameters
    locals: Set[str]                        # kernel-local scalars (assigned somewhere by name)
    all_loop_vars: Set[str]                 # every name used as a loop variable anywhere
    globals: Dict[str, object]
    loop_vars: List[str] = field(default_factory=list)   # loops enclosing the current point
    #: Serial numbers of the loops enclosing the current point (two loops may share a variable name).
    loop_path: List[int] = field(default_factory=list)
    #: Locals that hold an affine value: name -> (value, loop path of their single assignment).
    affine_locals: Dict[str, "tuple[Affine, tuple[int, ...]]"] = field(default_factory=dict)
    #: Why a local assigned so far holds no affine value (for the refusal's message).
    why_not_affine: Dict[str, str] = field(default_factory=dict)
    #: Locals that hold an affine condition (`b = i > 3`, loopy's `<> b = i > 3`), usable as an
    #: `if` test: name -> (the condition's source node, loop path of their single assignment).
    condition_locals: Dict[str, "tuple[ast.AST, tuple[int, ...]]"] = field(default_factory=dict)

    def affine_local(self, name: str) -> Optional[Affine]:
        """The affine value of local `name` at the current point, if it is known to hold one: its
        only assignment (unconditional, affine) ran earlier in the same iteration of every loop
        around that assignment, i.e. its loops still enclose this point."""
        return self._current(self.affine_locals.get(name))

    def condition_local(self, name: str) -> Optional[ast.AST]:
        """The affine condition local `name` holds at the current point, as `affine_local`."""
        return self._current(self.condition_locals.get(name))

    def _current(self, known: Optional[tuple]) -> Any:
        return None if known is None or tuple(self.loop_path[:len(known[1])]) != known[1] else known[0]

    def params(self) -> Set[str]:
        return set(self.arrays) | set(self.scalars)


#: math/numpy function names and the IR functions they are (`math.fabs` is `abs`, `np.power` `pow`).
_SYNTACTIC_FUNCTIONS = {"sqrt": "sqrt", "exp": "exp", "log": "log", "tanh": "tanh", "sin": "sin",
                        "cos": "cos", "floor": "floor", "ceil": "ceil", "fabs": "abs",
                        "abs": "abs", "absolute": "abs", "pow": "pow", "power": "pow",
                        "maximum": "max", "fmax": "fmax", "minimum": "min", "fmin": "fmin"}


def _function_table() -> Dict[int, str]:
    """Identity of math/numpy function objects -> polyc.ir.MATH_FUNCTIONS name."""
    table: Dict[int, str] = {}
    for module in (math, np):
        for attr, ir_name in _SYNTACTIC_FUNCTIONS.items():
            obj = getattr(module, attr, None)
            if obj is not None:
                table[id(obj)] = ir_name
    table[id(stop_gradient)] = "stop_gradient"
    return table


_FUNCTIONS = _function_table()
_CASTS = {id(float): f64, id(int): i64, id(np.float64): f64, id(np.float32): f32,
          id(np.int64): i64, id(np.int32): i32}
_SYNTACTIC_CASTS = {"float64": f64, "float32": f32, "int64": i64, "int32": i32}
_BUILTINS = {"abs": "abs", "max": "max", "min": "min", "pow": "pow"}
_MODULE_NAMES = ("math", "np", "numpy")


class ExprLowering:
    """Lowers expression nodes in the current `Scope`; see the module docstring."""

    def __init__(self, source: Source, scope: Scope, divisions: Optional[Divisions] = None):
        self.src = source
        self.scope = scope
        #: Quotients `floor(e / d)` met in subscripts, bounds and tests (program-wide names; each
        #: statement gets those it uses as iterators, as in Einstein notation).
        self.divs = divisions if divisions is not None else \
            Divisions(set(scope.sizes) | scope.all_loop_vars | scope.locals | scope.params(), [],
                      lambda v: v in scope.sizes)
        #: `min`/`max` of affine terms in subscripts, bounds and tests, as iterators too.
        self.clamps = Extremes(self.divs.reserved)

    # -- affine -------------------------------------------------------------------------------
    def affine(self, node: ast.AST, what: str) -> Affine:
        """`node` as an Affine in loop variables and sizes; `what` names the context for errors."""
        rule = f"{what} must be affine in the enclosing loop variables and sizes"
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return Affine.const(node.value)
        if isinstance(node, ast.Name):
            name = node.id
            if name in self.scope.loop_vars or name in self.scope.sizes:
                return Affine.var(name)
            if name in self.scope.all_loop_vars:
                raise self.src.error(node, f"loop variable `{name}` is used outside its loop")
            if name in self.scope.locals:
                value = self.scope.affine_local(name)
                if value is not None:
                    return value
                why = self.scope.why_not_affine.get(name) or (
                    "its assignment does not run earlier in the loops around this use"
                    if name in self.scope.affine_locals else "it is not assigned before this use")
                raise self.src.error(node, f"{rule}; `{name}` is a kernel-local scalar (a value "
                                           f"computed at run time) and {why}, so it cannot index "
                                           "or bound (a local can when its single, unconditional "
                                           "assignment earlier in the enclosing loops gives it an "
                                           "affine value)")
            if name in self.scope.scalars:
                raise self.src.error(node, f"{rule}; `{name}` is a scalar parameter that is not a "
                                           "size (annotate it `int` to use it in bounds)")
            if name in self.scope.arrays:
                raise self.src.error(node, f"{rule}; `{name}` is an array")
            value = self.scope.globals.get(name)
            if type(value) is int:
                return Affine.const(value)
            raise self.src.error(node, f"undefined name `{name}`")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.affine(node.operand, what)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, (ast.Add, ast.Sub)):
                lhs, rhs = self.affine(node.left, what), self.affine(node.right, what)
                return lhs + rhs if isinstance(node.op, ast.Add) else lhs - rhs
            if isinstance(node.op, ast.Mult):
                lhs, rhs = self.affine(node.left, what), self.affine(node.right, what)
                if lhs.is_constant:
                    return rhs.scale(lhs.constant)
                if rhs.is_constant:
                    return lhs.scale(rhs.constant)
                raise self.src.error(node, f"{rule}; `{ast.unparse(node)}` multiplies two "
                                           "variables (a product needs a constant factor)")
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)):
                return self._quasi_affine(node, rule, what)
            raise self.src.error(node, f"{rule}; the operator in `{ast.unparse(node)}` is not "
                                       "allowed (only +, -, multiplication by a constant, and `//` "
                                       "or `%` by a positive integer constant)")
        extent = self._declared_extent(node)
        if extent is not None:
            return extent
        if isinstance(node, ast.Subscript):
            raise self.src.error(node, f"{rule}; `{ast.unparse(node)}` reads an array "
                                       "(data-dependent, indirect indexing is not supported)")
        if isinstance(node, ast.Constant):
            raise self.src.error(node, f"{rule}; `{ast.unparse(node)}` is not an integer")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max") \
                and self.scope.globals.get(node.func.id, getattr(builtins, node.func.id)) is getattr(builtins, node.func.id):
            if len(node.args) < 2 or node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                raise self.src.error(node, f"{rule}; `{node.func.id}` needs two or more affine arguments")
            args = [self.affine(a, what) for a in node.args]
            out = args[0]
            for a in args[1:]:   # clamped subscripts (Halide's repeat_edge): piecewise affine, exact
                out = self.clamps.extreme(node.func.id, out, a)
            return out
        raise self.src.error(node, f"{rule}; `{ast.unparse(node)}` is not")

    def _declared_extent(self, node: ast.AST) -> Optional[Affine]:
        """`A.shape[k]` or `len(A)` of an array parameter: its declared extent (`N`), a size."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
                and self.scope.globals.get("len", len) is len and len(node.args) == 1 and not node.keywords:
            array, axis = node.args[0], 0
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "shape" and int_literal(node.slice) is not None:
            array, axis = node.value.value, int_literal(node.slice)
        else:
            return None
        if not isinstance(array, ast.Name) or array.id not in self.scope.arrays:
            return None
        shape = self.scope.arrays[array.id].shape
        if not -len(shape) <= axis < len(shape):
            raise self.src.error(node, f"`{ast.unparse(node)}`: {array.id} has {len(shape)} dimension(s)")
        return shape[axis]

    def _quasi_affine(self, node: ast.BinOp, rule: str, what: str) -> Affine:
        """`e // d` or `e % d` with a positive integer constant `d`: exact in isl (floor, as Python).

        A quotient of loop variables becomes a statement iterator fixed by two constraints, one of
        sizes only a size computed at call time (`Divisions`, shared with Einstein notation)."""
        lhs, rhs = self.affine(node.left, what), self.affine(node.right, what)
        if not rhs.is_constant or rhs.constant <= 0:
            raise self.src.error(node, f"{rule}: `{ast.unparse(node)}` must divide by a positive "
                                       "integer constant (isl handles floor division and modulo by "
                                       "constants exactly, nothing else)")
        d = rhs.constant
        mod = isinstance(node.op, ast.Mod)
        if lhs.is_constant:
            return Affine.const(lhs.constant % d if mod else lhs.constant // d)
        q = self.divs.quotient(lhs, d)
        return lhs - q.scale(d) if mod else q

    def try_affine(self, node: ast.AST, quasi: bool = True, extremes: bool = False) -> Optional[Affine]:
        """`node` as an Affine if it is one over in-scope loop variables and sizes, else None.

        With `quasi=False` (a value), `//` and `%` are left to the arithmetic helpers rather than
        turned into quotient iterators.  With `extremes` (a local's value, `lo = max(j - 1, 0)`),
        `min`/`max` of affine terms become iterators fixed piecewise, as in a subscript."""
        for sub in ast.walk(node):
            if not quasi and isinstance(sub, (ast.FloorDiv, ast.Mod)):
                return None
            if extremes and isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) \
                    and sub.func.id in ("min", "max"):
                continue
            if not isinstance(sub, (ast.Constant, ast.Name, ast.UnaryOp, ast.BinOp, ast.operator,
                                    ast.unaryop, ast.Load)):
                return None
            if extremes and isinstance(sub, ast.Name) and sub.id in ("min", "max") and sub.id not in self.scope.locals:
                continue
            if isinstance(sub, ast.Name) and not (sub.id in self.scope.loop_vars or sub.id in self.scope.sizes
                                                  or self.scope.affine_local(sub.id) is not None):
                return None
        try:
            return self.affine(node, "")
        except ParseError:
            return None

    def bound(self, node: ast.AST, make: Callable[[Affine], Constraint], conj: str) -> DNF:
        """Constraints from a loop bound that may be `min`/`max` of affine expressions.

        `conj` is the function ("min" or "max") whose arguments combine by conjunction for this
        bound (e.g. `v >= max(a, b)` means both `v >= a` and `v >= b`); the other one gives a
        disjunction.
        """
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("min", "max") and len(node.args) >= 2 and not node.keywords:
            parts = [self.bound(a, make, conj) for a in node.args]
            out = parts[0]
            for p in parts[1:]:
                out = dnf_and(out, p) if node.func.id == conj else dnf_or(out, p)
            return out
        return [[make(self.affine(node, "a loop bound"))]]

    # -- conditions ---------------------------------------------------------------------------
    def condition(self, node: ast.AST, negate: bool = False) -> DNF:
        """An affine `if` test as DNF; `negate=True` gives the test of the `else` branch."""
        if isinstance(node, ast.BoolOp):
            parts = [self.condition(v, negate) for v in node.values]
            conjunctive = isinstance(node.op, ast.And) != negate
            out = parts[0]
            for p in parts[1:]:
                out = dnf_and(out, p) if conjunctive else dnf_or(out, p)
            return out
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.condition(node.operand, not negate)
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return TRUE if node.value != negate else FALSE
        if isinstance(node, ast.Name) and self.scope.condition_local(node.id) is not None:
            return self.condition(self.scope.condition_local(node.id), negate)   # type: ignore[arg-type]
        if isinstance(node, ast.Compare):
            atoms = []
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                atoms.append(self._comparison(node, left, op, right, negate))
                left = right
            out = atoms[0]
            for a in atoms[1:]:
                out = dnf_or(out, a) if negate else dnf_and(out, a)
            return out
        if isinstance(node, ast.Name) and not self.scope.why_not_affine.get(node.id, "its value").startswith("its value"):
            raise self.src.error(node, f"the test of an `if` must be an affine condition: local `{node.id}` does "
                                       f"not hold one here ({self.scope.why_not_affine[node.id]}); write the "
                                       f"comparison in the `if`, or assign the local once, before the `if`")
        raise self.src.error(node, "the test of an `if` must be an affine comparison of loop "
                                   "variables and sizes (combined with and/or/not); data-dependent "
                                   "control flow is not supported: use `a if cond else b` for "
                                   "data-dependent values")

    _NEGATED = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
                ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}

    def _comparison(self, node: ast.AST, left: ast.AST, op: ast.cmpop, right: ast.AST, negate: bool) -> DNF:
        kind = type(op)
        if kind not in self._NEGATED:
            raise self.src.error(node, f"`{ast.unparse(node)}`: only <, <=, >, >=, ==, != are "
                                       "allowed in an `if` test")
        if negate:
            kind = self._NEGATED[kind]
        for a, b in ((left, right), (right, left)):
            if isinstance(a, ast.BinOp) and isinstance(a.op, ast.Mod) and kind in (ast.Eq, ast.NotEq):
                return self._modulo(node, a, b, kind is ast.Eq)
        what = "an `if` test"
        try:
            lhs, rhs = self.affine(left, what), self.affine(right, what)
        except ParseError as e:
            raise ParseError(f"{e.reason}; data-dependent control flow is not supported: use "
                             "`a if cond else b` for data-dependent values", e.location) from None
        diff = rhs - lhs
        if kind is ast.Lt:
            return [[Constraint("ge", diff - 1)]]
        if kind is ast.LtE:
            return [[Constraint("ge", diff)]]
        if kind is ast.Gt:
            return [[Constraint("ge", -diff - 1)]]
        if kind is ast.GtE:
            return [[Constraint("ge", -diff)]]
        if kind is ast.Eq:
            return [[Constraint("eq", diff)]]
        return [[Constraint("ge", diff - 1)], [Constraint("ge", -diff - 1)]]

    def _modulo(self, node: ast.AST, mod: ast.BinOp, other: ast.AST, equal: bool) -> DNF:
        """`e % m == r` (or `!=`) with constant m > 0 and r: congruence constraints."""
        modulus = mod.right
        if not (isinstance(modulus, ast.Constant) and type(modulus.value) is int and modulus.value > 0):
            raise self.src.error(node, "in `e % m == r` the modulus m must be a positive integer literal")
        m = modulus.value
        r = self.affine(other, "the remainder in `e % m == r`")
        if not r.is_constant:
            raise self.src.error(node, "in `e % m == r` the remainder r must be an integer constant")
        e = self.affine(mod.left, "an `if` test")
        rem = r.constant
        if equal:
            return [[Constraint("mod", e - rem, m)]] if 0 <= rem < m else FALSE
        residues = [k for k in range(m) if k != rem]
        return [[Constraint("mod", e - k, m)] for k in residues]

    # -- values -------------------------------------------------------------------------------
    def value(self, node: ast.AST) -> Expr:
        """A right-hand-side expression as a `polyc.ir` expression (locals as `LocalRef`)."""
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            aff = self.try_affine(node, quasi=False)
            if aff is not None:
                return Const(aff.constant) if aff.is_constant else IndexExpr(aff)
        extent = self._declared_extent(node)
        if extent is not None:
            return Const(extent.constant) if extent.is_constant else IndexExpr(extent)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float)):
                return self._literal(node, node.value)
            raise self.src.error(node, f"the literal {node.value!r} is not a number")
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.Attribute):
            value = self._resolve(node)
            if isinstance(value, float):
                return Const(value)
            raise self.src.error(node, f"`{ast.unparse(node)}` is not allowed in a kernel "
                                       "(only numeric constants such as math.pi)")
        if isinstance(node, ast.Subscript):
            return self.access(node)
        if isinstance(node, ast.BinOp):
            return self._binary(node)
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return Unary("-", self.value(node.operand))
            if isinstance(node.op, ast.UAdd):
                return self.value(node.operand)
            if isinstance(node.op, ast.Not):
                return Unary("not", self.value(node.operand))
            raise self.src.error(node, "bitwise inversion `~` is not supported")
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            values = [self.value(v) for v in node.values]
            if all(is_condition(v) for v in values):
                out = values[0]
                for v in values[1:]:
                    out = Binary(op, out, v)
                return out
            # Python's `and`/`or` of numbers give an operand: `x or y` is x when x is truthy
            out = values[-1]
            for v in reversed(values[:-1]):
                truthy = Binary("!=", v, Const(0))
                out = Select(truthy, v, out) if op == "or" else Select(truthy, out, v)
            return out
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.IfExp):
            return Select(self.value(node.test), self.value(node.body), self.value(node.orelse))
        if isinstance(node, ast.Call):
            return self._call(node)
        raise self.src.error(node, f"`{ast.unparse(node)}` is not supported in a kernel "
                                   "expression (allowed: arithmetic, comparisons, and/or/not, "
                                   "`a if c else b`, array elements, math calls)")

    def _name(self, node: ast.Name) -> Expr:
        name = node.id
        if name in self.scope.loop_vars or name in self.scope.sizes:
            return IndexExpr(Affine.var(name))
        if name in self.scope.all_loop_vars:
            raise self.src.error(node, f"loop variable `{name}` is used outside its loop")
        if name in self.scope.locals:
            return LocalRef(name)
        if name in self.scope.scalars:
            return ScalarRef(name)
        if name in self.scope.arrays:
            raise self.src.error(node, f"array `{name}` is used without subscripts; "
                                       f"index it element by element, e.g. `{name}[i]`")
        value = self.scope.globals.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return self._literal(node, value)
        raise self.src.error(node, f"undefined name `{name}`")

    def _literal(self, node: ast.AST, value) -> Const:
        """A literal; an integer too large for every polyc type (int64, and float64 when it is
        converted) is refused here, where its position is known.  One that fits float64 but not
        the integer type it takes is refused when the kernel is specialised (`LiteralRangeError`)."""
        if type(value) is int and abs(value) >= 2 ** 1024:
            raise LiteralRangeError(f"the integer literal `{short_text(node)}` ({value.bit_length()} bits) "
                                    "fits no type a kernel computes in (int64, float64)",
                                    self.src.location(node), literal=value)
        return Const(value)

    def access(self, node: ast.Subscript) -> Access:
        """`A[i, j]` or `A[i][j]` with affine subscripts, A an array parameter."""
        subscripts: List[ast.AST] = []
        base: ast.AST = node
        while isinstance(base, ast.Subscript):
            index = base.slice
            parts = list(index.elts) if isinstance(index, ast.Tuple) else [index]
            subscripts = parts + subscripts
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in self.scope.arrays:
            what = ast.unparse(base)
            raise self.src.error(node, f"`{what}` is not an array parameter; only arrays passed "
                                       "to the kernel can be subscripted")
        name = base.id
        rank = self.scope.arrays[name].rank
        for s in subscripts:
            if isinstance(s, ast.Slice):
                raise self.src.error(s, "slices are not supported; write a loop over the elements")
        if len(subscripts) != rank:
            raise self.src.error(node, f"array `{name}` has rank {rank} but is indexed with "
                                       f"{len(subscripts)} subscript(s)")
        return Access(name, tuple(self.affine(s, f"a subscript of `{name}`") for s in subscripts))

    def _binary(self, node: ast.BinOp) -> Expr:
        ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%", ast.FloorDiv: "//"}
        lhs, rhs = self.value(node.left), self.value(node.right)
        if isinstance(node.op, ast.Pow):
            python_ints = all(isinstance(x, IndexExpr) or (isinstance(x, Const) and type(x.value) is int)
                              for x in (lhs, rhs))
            if python_ints and not (isinstance(rhs, Const) and rhs.value >= 0):
                # Python's int ** int is a float where the exponent is negative (2 ** -1 == 0.5):
                # an exponent that may be is computed as a float power (numpy's integer rule is
                # for array elements, which are numpy integers)
                return Call("pow", (Cast(f64, lhs), rhs))
            return Call("pow", (lhs, rhs))
        if type(node.op) not in ops:
            raise self.src.error(node, f"the operator in `{short_text(node)}` is not supported")
        op = ops[type(node.op)]
        if op in ("/", "//", "%") and isinstance(rhs, Const) and rhs.value == 0:
            # Always a mistake: Python raises ZeroDivisionError on Python numbers, numpy and compiled
            # code give inf, nan or 0; so the kernel is refused where the mistake is written.
            raise self.src.error(node.right, f"`{short_text(node)}` divides by the literal zero (Python raises "
                                             "ZeroDivisionError on Python numbers; numpy gives inf, nan or 0)")
        if any(isinstance(x, Access) for side in (lhs, rhs) for x in side.walk()):
            # conditions on array elements are numpy bools: `+` is or, `*` is and (Python's own
            # bools, of indices and scalars, add as the integers 0 and 1)
            try:
                combined = condition_arithmetic(op, lhs, rhs)
            except ValueError as e:
                raise self.src.error(node, str(e)) from None
            if combined is not None:
                return combined
        if op == "/" and self._is_integer(lhs) and self._is_integer(rhs):
            # Python's `/` on integers is true division: make that explicit for C and CUDA.
            lhs = Cast(f64, lhs)
        return Binary(op, lhs, rhs)

    def _is_integer(self, e: Expr) -> bool:
        if isinstance(e, IndexExpr):
            return True
        if isinstance(e, Const):
            return type(e.value) is int
        if isinstance(e, Cast):
            return not e.dtype.is_float
        if isinstance(e, ScalarRef):
            return not self.scope.scalars[e.name].is_float
        if isinstance(e, Access):
            return not self.scope.arrays[e.tensor].dtype.is_float
        return False

    def _compare(self, node: ast.Compare) -> Expr:
        ops = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
        out: Optional[Expr] = None
        left = self.value(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            if type(op) not in ops:
                raise self.src.error(node, f"the comparison in `{ast.unparse(node)}` is not supported")
            right = self.value(right_node)
            term = Binary(ops[type(op)], left, right)
            out = term if out is None else Binary("and", out, term)
            left = right
        assert out is not None
        return out

    def _resolve(self, node: ast.AST) -> object:
        """The object a dotted name refers to in the kernel's globals, or None."""
        if isinstance(node, ast.Name):
            if node.id in self.scope.params() or node.id in self.scope.locals or \
                    node.id in self.scope.sizes or node.id in self.scope.all_loop_vars:
                return None
            if node.id in self.scope.globals:
                return self.scope.globals[node.id]
            return {"math": math, "np": np, "numpy": np}.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value)
            return getattr(base, node.attr, None) if base is not None else None
        return None

    def _call(self, node: ast.Call) -> Expr:
        func = node.func
        shown = ast.unparse(func)
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.src.error(node, f"call to `{shown}`: keyword and starred arguments are not supported")
        target = self._resolve(func)
        name: Optional[str] = None
        cast: Optional[DType] = None
        if isinstance(func, ast.Name) and func.id in _BUILTINS and \
                (target is None or target is getattr(builtins, func.id)):
            name = _BUILTINS[func.id]
        elif target is not None and id(target) in _CASTS:
            cast = _CASTS[id(target)]
        elif target is not None and id(target) in _FUNCTIONS:
            name = _FUNCTIONS[id(target)]
        elif isinstance(func, ast.Name) and func.id in ("float", "int") and target is None:
            cast = f64 if func.id == "float" else i64
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id in _MODULE_NAMES and target is None:
            name = _SYNTACTIC_FUNCTIONS.get(func.attr)
            cast = _SYNTACTIC_CASTS.get(func.attr)
        if cast is not None:
            if len(node.args) != 1:
                raise self.src.error(node, f"`{shown}(x)` takes exactly one argument")
            arg = node.args[0]
            if cast is f64 and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                # `float("inf")`, `float("-inf")`, `float("nan")`: a constant, read as Python reads it.
                try:
                    return Const(float(arg.value))
                except ValueError:
                    raise self.src.error(arg, f"float({arg.value!r}) is not a number") from None
            return Cast(cast, self.value(arg))
        if name is None:
            raise self.src.error(node, f"call to `{shown}` is not supported; kernels may call {ALLOWED_CALLS}")
        args = [self.value(a) for a in node.args]
        if target is math.pow or (target is None and ast.unparse(func) == "math.pow"):
            args = [Cast(f64, a) for a in args]     # Python's float power, whatever the operands' types
        if name in ("max", "min"):
            if len(args) < 2:
                raise self.src.error(node, f"`{shown}` needs at least two arguments in a kernel")
            python_builtin = isinstance(func, ast.Name) and func.id in _BUILTINS
            fn = ("py" + name) if python_builtin else name   # Python's meaning, or numpy's (NaN)
            out = args[0]
            for a in args[1:]:
                out = Call(fn, (out, a))
            return out
        arity = 2 if name in ("pow", "fmax", "fmin") else 1
        if len(args) != arity:
            raise self.src.error(node, f"`{shown}` takes {arity} argument(s) in a kernel")
        return Call(name, tuple(args))
