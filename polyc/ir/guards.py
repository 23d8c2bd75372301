"""Affine guards of accesses: the conditions of the `select`s (and `a if c else b`) around them,
and the left operand of a short-circuit `and` / `or` whose right operand reads.

`select(i >= 1, A[i - 1], 0.0)` reads `A[i - 1]` only where `i >= 1`: code generators emit a C
conditional, so the other branch never runs.  A guard is a disjunction of conjunctions of affine
constraints (the shape of `Statement.domain`); a condition that is not affine (it depends on data)
gives no guard, so the access counts as always performed, which is the safe over-approximation.
Walks are iterative: expression trees may be deep (long sums).
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from .affine import Affine
from .expr import Access, Binary, Const, Expr, IndexExpr, Select, Unary
from .program import Constraint

#: A disjunction of conjunctions; `((),)` is "always", `()` is "never".
DNF = Tuple[Tuple[Constraint, ...], ...]
ALWAYS: DNF = ((),)
_MAX_TERMS = 16  # a guard that would need more disjuncts is dropped (over-approximated as "always")


def affine_value(e: Expr) -> Optional[Affine]:
    """`e` as an affine function of indices and sizes, or None (data, floats, non-affine)."""
    if isinstance(e, IndexExpr):
        return e.value
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return Affine.const(e.value)
    if isinstance(e, Unary) and e.op == "-":
        inner = affine_value(e.operand)
        return None if inner is None else -inner
    if isinstance(e, Binary) and e.op in ("+", "-", "*"):
        a, b = affine_value(e.lhs), affine_value(e.rhs)
        if a is None or b is None:
            return None
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if a.is_constant:
            return b.scale(a.constant)
        if b.is_constant:
            return a.scale(b.constant)
    return None


_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def _comparison(op: str, a: Affine, b: Affine) -> DNF:
    d = a - b
    if op == ">=":
        return ((Constraint("ge", d),),)
    if op == ">":
        return ((Constraint("ge", d - 1),),)
    if op == "<=":
        return ((Constraint("ge", -d),),)
    if op == "<":
        return ((Constraint("ge", -d - 1),),)
    if op == "==":
        return ((Constraint("eq", d),),)
    return ((Constraint("ge", d - 1),), (Constraint("ge", -d - 1),))


def conjoin(a: Optional[DNF], b: Optional[DNF]) -> Optional[DNF]:
    """`a and b`; None (unknown) on one side leaves the other (it is still implied)."""
    if a is None:
        return b
    if b is None:
        return a
    out = tuple(x + y for x in a for y in b)
    return out if len(out) <= _MAX_TERMS else None


def _disjoin(a: Optional[DNF], b: Optional[DNF]) -> Optional[DNF]:
    if a is None or b is None:
        return None
    out = a + b
    return out if len(out) <= _MAX_TERMS else None


def condition_dnf(cond: Expr, holds: bool = True) -> Optional[DNF]:
    """The affine guard implied by `cond` being `holds`, or None when nothing affine follows."""
    # Iterative post-order over the logical skeleton (and/or/not/comparisons).
    stack: List[Tuple[Expr, bool, bool]] = [(cond, holds, False)]
    results: List[Optional[DNF]] = []
    while stack:
        e, pos, done = stack.pop()
        if isinstance(e, Unary) and e.op == "not":
            stack.append((e.operand, not pos, False))
            continue
        if isinstance(e, Binary) and e.op in ("and", "or"):
            if not done:
                stack.append((e, pos, True))
                stack.append((e.rhs, pos, False))
                stack.append((e.lhs, pos, False))
                continue
            right, left = results.pop(), results.pop()
            both = (e.op == "and") == pos
            results.append(conjoin(left, right) if both else _disjoin(left, right))
            continue
        if isinstance(e, Binary) and e.op in _NEGATED:
            a, b = affine_value(e.lhs), affine_value(e.rhs)
            if a is not None and b is not None:
                results.append(_comparison(e.op if pos else _NEGATED[e.op], a, b))
                continue
        results.append(None)
    return results[0]


def dnf_condition(dnf: DNF) -> Expr:
    """`dnf` as a boolean expression, the inverse of `condition_dnf`: an `or` of `and`s of
    `e >= 0` / `e == 0` (a conjunction without constraints is `True`).  Modulo constraints have
    no spelling here: callers leave them out first."""
    terms: List[Expr] = []
    for conj in dnf:
        parts = [Binary(">=" if c.kind == "ge" else "==", IndexExpr(c.expr), Const(0)) for c in conj]
        term: Expr = parts[0] if parts else Const(True)
        for x in parts[1:]:
            term = Binary("and", term, x)
        terms.append(term)
    out = terms[0]
    for x in terms[1:]:
        out = Binary("or", out, x)
    return out


def guarded_accesses(value: Expr) -> Tuple[Tuple[Access, Optional[DNF]], ...]:
    """Every access in `value` (walk order) with the affine guard under which it is evaluated
    (None: unconditionally)."""
    out: List[Tuple[Access, Optional[DNF]]] = []
    stack: List[Tuple[Expr, Optional[DNF]]] = [(value, None)]
    while stack:
        e, guard = stack.pop()
        if isinstance(e, Access):
            out.append((e, guard))
            continue
        if isinstance(e, Select):
            stack.append((e.if_false, conjoin(guard, condition_dnf(e.cond, False))))
            stack.append((e.if_true, conjoin(guard, condition_dnf(e.cond, True))))
            stack.append((e.cond, guard))
            continue
        if isinstance(e, Binary) and e.op in ("and", "or"):
            # Short-circuit, in C as in Python: `i + 1 < N and A[i + 1] > 0` reads A[i + 1] only
            # where `i + 1 < N`; `i == 0 or A[i - 1] > 0` only where `i != 0`.
            stack.append((e.rhs, conjoin(guard, condition_dnf(e.lhs, e.op == "and"))))
            stack.append((e.lhs, guard))
            continue
        stack.extend((c, guard) for c in reversed(e.children()))
    return tuple(out)
