"""Local adjoints of one right-hand side: how a statement's seed flows to each tensor element it reads.

`local_adjoints(value, seed)` is reverse-mode differentiation of one scalar expression: given the
adjoint `seed` of the value (an IR expression, typically the target's adjoint `Y_grad[i, j]`), it
returns, for every distinct access `A[f(i)]` in the value, the expression `seed * d value / d A[f(i)]`.
Each result is again an ordinary IR expression over the statement's iterators, so the caller can
turn it into a gather statement (`polyc.grad.gather`).

Decisions, each matching PyTorch's autograd so the two agree to rounding:
- `max(a, b)` / `min(a, b)` (and `fmax`/`fmin`) split the adjoint evenly on a tie (0.5 each), as
  `torch.maximum` does; a NaN operand of `max`/`min` (which returns it) takes the whole adjoint,
  so a NaN reaches the gradient; `fmax`/`fmin` give it to the other operand, which they return; Python's builtin `max` in loop kernels (`pymax`) routes it to the operand it
  returns (the first on a tie), following its order-dependent definition.
- `abs` has derivative 0 at 0 (`torch.abs`); `floor`, `ceil`, `//` and comparisons have derivative 0.
- `stop_gradient(x)` has derivative 0 (its operand is a constant to the gradient).
- `pow(a, b)`: the exponent's adjoint is `seed * a**b * log(a)` where `a > 0`, else 0.
- `select(c, t, f)` routes the seed to the branch taken; the condition gets nothing.  Products
  with the routed seed stay inside the branch (`mul`), so the gradient reads what the branch reads
  only where the branch is taken.
- a cast to an integer type stops the gradient.
- a division in an adjoint (`with_reciprocals`, run on the finished gradient) by a value that is
  the same along one of the statement's iterators (`seed / s[i]`, `x[i, j] / sqrt(v[i] + eps)`,
  `seed / N`) becomes a multiplication by its reciprocal, which the C compiler computes once
  outside the loop over that iterator: a gradient is defined to rounding (this adds about an ulp),
  and a division costs several multiplications (layernorm's backward divided three times per
  element by its row's `sqrt(var + eps)`).
Walks are iterative (expression trees may be deep).
"""
from __future__ import annotations

from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

from ..ir import Access, Binary, Call, Cast, Const, Expr, IndexExpr, Program, ScalarRef, Select, Unary, rebuild

ZERO = Const(0.0)
ONE = Const(1.0)
TWO = Const(2.0)
HALF = Const(0.5)


def is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and not isinstance(e.value, bool) and e.value == 0


def _is_one(e: Expr) -> bool:
    return isinstance(e, Const) and not isinstance(e.value, bool) and e.value == 1


def _zero_branch(e: Expr) -> bool:
    """`select(c, t, 0)` or `select(c, 0, f)`: a seed routed to one branch."""
    return isinstance(e, Select) and (is_zero(e.if_true) or is_zero(e.if_false))


def mul(a: Expr, b: Expr) -> Expr:
    """`a * b` with the trivial cases folded (so adjoint expressions stay readable).  A factor
    `select(c, t, 0)` takes the product into its branch, `select(c, t * b, 0)`: what the branch
    multiplies by is read only where the branch is taken (an intermediate the forward defines
    only there), and an inf or NaN where it is not does not leak in as `0 * inf`."""
    if is_zero(a) or is_zero(b):
        return ZERO
    if _zero_branch(a):
        return select(a.cond, mul(a.if_true, b), mul(a.if_false, b))
    if _zero_branch(b):
        return select(b.cond, mul(a, b.if_true), mul(a, b.if_false))
    if _is_one(a):
        return b
    if _is_one(b):
        return a
    return Binary("*", a, b)


def div(a: Expr, b: Expr) -> Expr:
    if is_zero(a):
        return ZERO
    if _zero_branch(a):       # as in `mul`: the divisor is read where the branch is taken
        return select(a.cond, div(a.if_true, b), div(a.if_false, b))
    return a if _is_one(b) else Binary("/", a, b)


def add(a: Expr, b: Expr) -> Expr:
    """`a + b` with the trivial cases folded; `a + a` is `2 * a` (exact: one operation fewer where
    the product rule meets a square, `xc * xc`)."""
    if is_zero(a):
        return b
    if is_zero(b):
        return a
    if _same(a, b):
        return mul(TWO, a)
    return Binary("+", a, b)


def _same(a: Expr, b: Expr) -> bool:
    """Whether `a` and `b` are the same expression (False for trees too deep to compare)."""
    try:
        return a == b
    except RecursionError:
        return False


def neg(a: Expr) -> Expr:
    if is_zero(a):
        return ZERO
    if isinstance(a, Unary) and a.op == "-":
        return a.operand
    return Unary("-", a)


def select(cond: Expr, a: Expr, b: Expr) -> Expr:
    if is_zero(a) and is_zero(b):
        return ZERO
    return Select(cond, a, b)


def _call_partials(e: Call, seed: Expr, stored: Optional[Expr] = None) -> List[Tuple[Expr, Expr]]:
    """(operand, its adjoint) for a math function call; `stored` reads the call's value where the
    kernel stored it (the whole right-hand side of `e[i] = exp(x[i])`), so it is not recomputed."""
    fn, args = e.fn, e.args
    x = args[0]
    value = stored if stored is not None else e
    if fn == "exp":
        return [(x, mul(seed, value))]
    if fn == "log":
        return [(x, div(seed, x))]
    if fn == "sqrt":
        return [(x, div(mul(seed, HALF), value))]
    if fn == "tanh":
        return [(x, mul(seed, Binary("-", ONE, Binary("*", value, value))))]
    if fn == "sin":
        return [(x, mul(seed, Call("cos", (x,))))]
    if fn == "cos":
        return [(x, neg(mul(seed, Call("sin", (x,)))))]
    if fn == "abs":
        return [(x, select(Binary(">", x, ZERO), seed, select(Binary("<", x, ZERO), neg(seed), ZERO)))]
    if fn in ("floor", "ceil", "stop_gradient"):
        return []
    if fn in ("max", "min", "fmax", "fmin"):
        a, b = args
        wins = ">" if fn in ("max", "fmax") else "<"
        half = mul(seed, HALF)

        def nan(x: Expr) -> Expr:
            return Binary("!=", x, x)
        # A NaN operand is the result of max/min (NaN-propagating): it takes the seed, so a NaN
        # stays visible in the gradient (as torch.maximum and relu); fmax/fmin return the other.
        a_wins = Binary("or", Binary(wins, a, b), nan(a) if fn in ("max", "min") else nan(b))
        b_wins = Binary("or", Binary(wins, b, a), nan(b) if fn in ("max", "min") else nan(a))
        return [(a, select(a_wins, seed, select(Binary("==", a, b), half, ZERO))),
                (b, select(b_wins, seed, select(Binary("==", a, b), half, ZERO)))]
    if fn in ("pymax", "pymin"):
        a, b = args
        later_wins = Binary(">" if fn == "pymax" else "<", b, a)
        return [(a, select(later_wins, ZERO, seed)), (b, select(later_wins, seed, ZERO))]
    if fn == "pow":
        a, b = args
        out = [(a, mul(seed, mul(b, Call("pow", (a, Binary("-", b, ONE))))))]
        if any(isinstance(n, Access) for n in b.walk()):
            out.append((b, select(Binary(">", a, ZERO), mul(seed, mul(value, Call("log", (a,)))), ZERO)))
        return out
    from ..errors import GradError
    raise GradError(f"polyc cannot differentiate the function {fn!r}")


def _partials(e: Expr, seed: Expr, stored: Optional[Expr] = None) -> List[Tuple[Expr, Expr]]:
    """(child, adjoint of child) pairs for one node, given the node's adjoint `seed`."""
    if isinstance(e, Unary):
        return [(e.operand, neg(seed))] if e.op == "-" else []
    if isinstance(e, Binary):
        a, b = e.lhs, e.rhs
        if e.op == "+":
            return [(a, seed), (b, seed)]
        if e.op == "-":
            return [(a, seed), (b, neg(seed))]
        if e.op == "*":
            return [(a, mul(seed, b)), (b, mul(seed, a))]
        if e.op == "/":
            return [(a, div(seed, b)), (b, neg(div(mul(seed, a), Binary("*", b, b))))]
        if e.op == "%":   # a - b * floor(a / b)
            return [(a, seed), (b, neg(mul(seed, Call("floor", (Binary("/", a, b),)))))]
        return []         # `//`, comparisons, logic: piecewise constant
    if isinstance(e, Call):
        return _call_partials(e, seed, stored)
    if isinstance(e, Select):
        return [(e.if_true, select(e.cond, seed, ZERO)), (e.if_false, select(e.cond, ZERO, seed))]
    if isinstance(e, Cast):
        return [(e.operand, seed)] if e.dtype.is_float else []
    return []


def names_indexed(e: Expr) -> FrozenSet[str]:
    """The names `e`'s indices and index values mention (loop iterators and sizes alike)."""
    names = set()
    for n in e.walk():
        if isinstance(n, Access):
            for ix in n.indices:
                names.update(ix.coeffs)
        elif isinstance(n, IndexExpr):
            names.update(n.value.coeffs)
    return frozenset(names)


def by_reciprocals(e: Expr, iterators: Sequence[str]) -> Expr:
    """`e` with each `a / b` whose `b` is the same along one of `iterators` written `a * (1 / b)`
    (a loop invariant the C compiler hoists).  Integer divisions (`//`) are left alone."""
    iterators = frozenset(iterators)
    def leaf(n: Expr) -> Optional[Expr]:
        if isinstance(n, Binary) and n.op == "/" and not _is_one(n.lhs) and not iterators <= names_indexed(n.rhs):
            return Binary("*", rebuild(n.lhs, leaf), Binary("/", ONE, rebuild(n.rhs, leaf)))
        return None
    return rebuild(e, leaf) if iterators else e


def with_reciprocals(program: Program, adjoints: Set[str]) -> Program:
    """`program` with the divisions of the statements writing `adjoints` by values invariant along
    one of their loops made multiplications by reciprocals (`by_reciprocals`).  Run last, after
    `inline_pointwise_temps`, whose size limit counts the expressions as differentiated."""
    return program.with_(statements=tuple(
        st.with_(value=by_reciprocals(st.value, st.iterators)) if st.target.tensor in adjoints else st
        for st in program.statements))


def local_adjoints(value: Expr, seed: Expr, stored: Optional[Access] = None) -> Tuple[Tuple[Access, Expr], ...]:
    """For each distinct access in `value` (first-occurrence order), `seed * d value / d access`.

    Occurrences of the same element (`xc[i, j] * xc[i, j]`) are summed into one entry; accesses
    whose adjoint is identically zero are left out.  `stored`: where the kernel keeps `value`
    itself (the target of a plain assignment), read instead of recomputing `exp`, `sqrt`, ..."""
    found: Dict[Access, Expr] = {}
    order: List[Access] = []
    stack: List[Tuple[Expr, Expr]] = [(value, seed)]
    while stack:
        e, s = stack.pop()
        if is_zero(s) or isinstance(e, (Const, ScalarRef, IndexExpr)):
            continue
        if isinstance(e, Access):
            if e not in found:
                order.append(e)
                found[e] = s
            else:
                found[e] = add(found[e], s)
            continue
        stack.extend(reversed(_partials(e, s, stored if e is value else None)))
    return tuple((a, found[a]) for a in order if not is_zero(found[a]))
