"""Scalar expressions: the right-hand sides of statements.  Immutable trees of frozen dataclasses."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional, Tuple, Union

from .affine import Affine
from .types import DType

#: Math functions a kernel may call, with their arity.  Both front ends accept exactly these.
MATH_FUNCTIONS = {
    "exp": 1, "log": 1, "sqrt": 1, "tanh": 1, "abs": 1, "floor": 1, "ceil": 1,
    "sin": 1, "cos": 1, "max": 2, "min": 2, "pow": 2, "fmax": 2, "fmin": 2,
    "stop_gradient": 1,
}
#: `stop_gradient(x)` is `x`, but `pc.grad` treats it as a constant (JAX's `lax.stop_gradient`,
#: PyTorch's `detach`): softmax's row maximum, whose exact adjoint is zero, need not be carried back.
#: `max`/`min` propagate NaN (`np.maximum`); `fmax`/`fmin` ignore it (`np.fmax`, C's `fmax`).
#: `%` and `//` floor as in Python and numpy (`np.mod`, `np.floor_divide`); see README "Types".
#: Python's builtin `max`/`min` as loop kernels call them: the first operand unless a later one
#: compares greater (less), so `max(nan, 1)` is nan and `max(1, nan)` is 1.  Only the loop front end
#: produces these; Einstein notation's `max`/`min` are numpy's.
PYTHON_BUILTIN_FUNCTIONS = {"pymax": 2, "pymin": 2}
ARITHMETIC_OPS = ("+", "-", "*", "/", "//", "%")
COMPARISON_OPS = ("<", "<=", ">", ">=", "==", "!=")
LOGICAL_OPS = ("and", "or")
#: The value each reduction starts from (`T op=! e` writes it first): infinities stand for an
#: integer type's limits.
REDUCTION_IDENTITY = {"+": 0, "*": 1, "max": float("-inf"), "min": float("inf")}


class Expr:
    """Base class of scalar expressions."""

    def children(self) -> Tuple["Expr", ...]:
        return ()

    def walk(self) -> Iterator["Expr"]:
        """This node and all nodes below it, parents first (children left to right).

        Iterative, so an expression of any depth (a 1,000-term sum) costs linear time and no
        recursion."""
        stack = [self]
        while stack:
            e = stack.pop()
            yield e
            stack.extend(reversed(e.children()))

    def accesses(self) -> Tuple["Access", ...]:
        return tuple(e for e in self.walk() if isinstance(e, Access))


@dataclass(frozen=True)
class Const(Expr):
    """A literal.  `dtype=None` means it adopts the type of the expression around it."""

    value: Union[int, float, bool]
    dtype: Optional[DType] = None


@dataclass(frozen=True)
class ScalarRef(Expr):
    """A scalar parameter passed at call time (e.g. `alpha`), or a size symbol used as a value."""

    name: str


@dataclass(frozen=True)
class IndexExpr(Expr):
    """An affine function of loop indices and sizes used as a value (e.g. `i + 1` in `B[i] = i + 1`)."""

    value: Affine


@dataclass(frozen=True)
class Access(Expr):
    """A tensor element `A[i, j + 1]`; rank-0 tensors have no indices."""

    tensor: str
    indices: Tuple[Affine, ...]

    def __str__(self) -> str:
        return f"{self.tensor}[{', '.join(map(str, self.indices))}]" if self.indices else self.tensor


@dataclass(frozen=True)
class Unary(Expr):
    """`op` is "-" (negation) or "not"."""

    op: str
    operand: Expr

    def children(self):
        return (self.operand,)


@dataclass(frozen=True)
class Binary(Expr):
    """Arithmetic, comparison or logical operation; `op` is one of the *_OPS above."""

    op: str
    lhs: Expr
    rhs: Expr

    def children(self):
        return (self.lhs, self.rhs)


@dataclass(frozen=True)
class Call(Expr):
    """A math function from MATH_FUNCTIONS."""

    fn: str
    args: Tuple[Expr, ...]

    def children(self):
        return self.args


@dataclass(frozen=True)
class Select(Expr):
    """`select(cond, a, b)`: `a` where `cond` holds, else `b` (both evaluated; no control flow)."""

    cond: Expr
    if_true: Expr
    if_false: Expr

    def children(self):
        return (self.cond, self.if_true, self.if_false)


@dataclass(frozen=True)
class Cast(Expr):
    """An explicit conversion the user wrote (`float(x)`, `pc.f32(x)`); polyc never inserts one silently."""

    dtype: DType
    operand: Expr

    def children(self):
        return (self.operand,)


def stop_gradient(x):
    """`x` itself.  In a kernel (`stop_gradient(m[i])` in Einstein notation, `pc.stop_gradient(...)`
    in a loop kernel) it marks a value `pc.grad` treats as a constant (see `MATH_FUNCTIONS`); called
    from Python, as a loop kernel's reference runs it, it returns its argument."""
    return x


def rebuild(e: Expr, leaf) -> Expr:
    """`e` with every node for which `leaf(node)` answers an expression (not None) replaced by the
    answer, the rest rebuilt around the replacements (a pure function: `e` is unchanged)."""
    from dataclasses import replace
    got = leaf(e)
    if got is not None:
        return got
    if isinstance(e, (Unary, Cast)):
        return replace(e, operand=rebuild(e.operand, leaf))
    if isinstance(e, Binary):
        return replace(e, lhs=rebuild(e.lhs, leaf), rhs=rebuild(e.rhs, leaf))
    if isinstance(e, Call):
        return replace(e, args=tuple(rebuild(a, leaf) for a in e.args))
    if isinstance(e, Select):
        return Select(rebuild(e.cond, leaf), rebuild(e.if_true, leaf), rebuild(e.if_false, leaf))
    return e


def is_condition(e: Expr) -> bool:
    """`e` is a truth value by its form: a comparison, `and`/`or`/`not`, or True/False."""
    if isinstance(e, Binary):
        return e.op in COMPARISON_OPS or e.op in LOGICAL_OPS
    if isinstance(e, Unary):
        return e.op == "not"
    return isinstance(e, Const) and isinstance(e.value, bool)


def condition_arithmetic(op: str, lhs: Expr, rhs: Expr) -> Optional[Expr]:
    """numpy's arithmetic of two truth values (boolean arrays): `+` is a logical or (True + True
    is True, not 2) and `*` a logical and; None for any other operands.  `-` of two conditions,
    which numpy refuses, raises `ValueError` for the front end to report where it is written."""
    if not (is_condition(lhs) and is_condition(rhs)):
        return None
    if op == "+":
        return Binary("or", lhs, rhs)
    if op == "*":
        return Binary("and", lhs, rhs)
    if op == "-":
        raise ValueError("numpy refuses `-` between two conditions (boolean subtract); write "
                         "select(a, 1.0, 0.0) - select(b, 1.0, 0.0), or `a != b` for their exclusive or")
    return None
