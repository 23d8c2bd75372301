"""Affine and quasi-affine integer expressions of Einstein notation (subscripts, ranges, guards).

`floor(e / d)` (written `e // d`, or `e / d` where an integer is required) and `e % d` with a
positive integer constant `d` are quasi-affine: isl represents them exactly.  polyc keeps its IR
affine by giving each quotient its own iterator `q` of the statement, fixed by the two constraints
`d*q <= e <= d*q + d - 1` (one value of `q` per instance of the other iterators); `e % d` is then
`e - d*q`.  isl's code generator turns such a one-value loop into an assignment.

`min(a, b)` and `max(a, b)` of affine expressions (clamped subscripts: Halide's `clamp` and
`repeat_edge`, `A[min(max(x, 0), W - 1)]`) are piecewise affine.  Each gets an iterator too
(`_max0`, as in loop kernels: `pyloops_exprs.Extremes`), fixed by one of two pieces (`c = a and
a >= b`, or `c = b and b > a` for a `max`): the statement's domain becomes the disjunction of the
choices, so isl splits the index set where the answer changes, and dependences, bounds checks,
schedules and code generation see only affine accesses.
"""
from __future__ import annotations

from typing import Callable, Iterable, List, Optional, Set, Tuple

from ..errors import ParseError
from ..ir import Affine, Constraint
from ..ir.guards import DNF
from .einsum_parser import Node

_AFFINE_HELP = "sums of indices and sizes times integer constants (like `i + 1` or `2 * j`)"

#: Clamp terms (min/max) one statement may use: each doubles the conjunctions of its domain.
MAX_CLAMPS = 6


class _TooManyClamps(Exception):
    """Raised by `Divisions.clamp` past `MAX_CLAMPS` (turned into a ParseError with the position)."""


class Extremes:
    """`c = max(a, b)` or `min(a, b)` of affine terms as a statement iterator `c` with one value
    per instance, fixed by a union of two pieces (`c == a and a >= b`, `c == b and b > a`): isl
    keeps such piecewise-affine accesses exact and splits the loops at the pieces' borders."""

    def __init__(self, reserved: Set[str]):
        self.reserved = reserved
        self.defs: List["tuple[str, str, Affine, Affine]"] = []

    def extreme(self, fn: str, a: Affine, b: Affine) -> Affine:
        if a == b:
            return a
        if (a - b).is_constant:    # the same up to a constant: no pieces needed
            larger = a if (a - b).constant > 0 else b
            return larger if fn == "max" else (b if larger is a else a)
        for name, f, x, y in self.defs:
            if f == fn and x == a and y == b:
                return Affine.var(name)
        k = len(self.defs)
        name = f"_{fn}{k}"    # `_max0`: error messages print it back as `max(a, b)`
        while name in self.reserved:
            k += 1
            name = f"_{fn}{k}"
        self.reserved.add(name)
        self.defs.append((name, fn, a, b))
        return Affine.var(name)

    @property
    def names(self) -> "tuple[str, ...]":
        return tuple(d[0] for d in self.defs)

    def arguments(self, name: str) -> "tuple[Affine, Affine]":
        _, _, a, b = next(d for d in self.defs if d[0] == name)
        return a, b

    def pieces(self, name: str) -> DNF:
        """The two pieces fixing `name`, disjoint: ties go to the first argument."""
        _, fn, a, b = next(d for d in self.defs if d[0] == name)
        c = Affine.var(name)
        first_wins = a - b if fn == "max" else b - a       # >= 0 where `a` is the answer
        return [[Constraint("eq", c - a), Constraint("ge", first_wins)],
                [Constraint("eq", c - b), Constraint("ge", -first_wins - 1)]]


class Divisions:
    """The quotient iterators of one statement: `name = floor(numerator / divisor)`."""

    def __init__(self, reserved: Set[str], derived: List[Tuple[str, Affine, int]],
                 is_size: Callable[[str], bool]):
        self.reserved = reserved
        self.defs: List[Tuple[str, Affine, int]] = []
        #: min/max iterators (`_max0 = max(a, b)`), fixed piecewise.
        self.extremes = Extremes(reserved)
        #: Program-wide sizes defined as quotients of sizes (`H // 2`): shared by all statements.
        self.derived = derived
        self.is_size = is_size

    def quotient(self, numerator: Affine, divisor: int) -> Affine:
        if numerator.variables and all(self.is_size(v) or v in (n for n, _, _ in self.derived)
                                       for v in numerator.variables):
            return self._derived_size(numerator, divisor)
        for name, num, d in self.defs:
            if num == numerator and d == divisor:
                return Affine.var(name)
        k = len(self.defs)
        name = f"_q{k}"
        while name in self.reserved:
            k += 1
            name = f"_q{k}"
        self.reserved.add(name)
        self.defs.append((name, numerator, divisor))
        return Affine.var(name)

    def _derived_size(self, numerator: Affine, divisor: int) -> Affine:
        """A quotient of sizes only is itself a size, computed at call time (no loop needed)."""
        for name, num, d in self.derived:
            if num == numerator and d == divisor:
                return Affine.var(name)
        v = numerator.as_single_var()
        name = f"{v}_div{divisor}" if v else f"_size{len(self.derived)}"
        while name in self.reserved:
            name += "_"
        self.reserved.add(name)
        self.derived.append((name, numerator, divisor))
        return Affine.var(name)

    def clamp(self, op: str, a: Affine, b: Affine) -> Affine:
        """The iterator standing for `op(a, b)` (`op` "min" or "max"; the loop front end's
        `Extremes`, so both front ends spell, split and report them alike)."""
        if a.is_constant and b.is_constant:
            return Affine.const(min(a.constant, b.constant) if op == "min" else max(a.constant, b.constant))
        before = len(self.extremes.names)
        out = self.extremes.extreme(op, a, b)
        if len(self.extremes.names) > MAX_CLAMPS:
            raise _TooManyClamps()
        assert len(self.extremes.names) >= before
        return out

    def choices(self) -> List[Tuple[Constraint, ...]]:
        """The conjunctions (one per combination of pieces) the min/max iterators add to the domain."""
        out: List[Tuple[Constraint, ...]] = [()]
        for name in self.extremes.names:
            out = [conj + tuple(piece) for conj in out for piece in self.extremes.pieces(name)]
        return out

    @property
    def names(self) -> Tuple[str, ...]:
        """Every derived iterator: quotients, then min/max iterators."""
        return tuple(name for name, _, _ in self.defs) + self.extremes.names

    @property
    def quotient_names(self) -> Tuple[str, ...]:
        return tuple(name for name, _, _ in self.defs)

    def constraints(self, name: str) -> Tuple[Constraint, Constraint]:
        """`d*q <= e` and `e <= d*q + d - 1`."""
        _, num, d = next(x for x in self.defs if x[0] == name)
        q = Affine.var(name).scale(d)
        return Constraint("ge", num - q), Constraint("ge", q + (d - 1) - num)

    def needed_by(self, variables: Iterable[str]) -> Tuple[str, ...]:
        """The quotients among `variables`, and those their numerators use (definition order)."""
        found: Set[str] = set()
        frontier = [v for v in variables if v in self.names]
        while frontier:
            v = frontier.pop()
            if v in found:
                continue
            found.add(v)
            frontier.extend(w for w in self._uses(v) if w in self.names)
        return tuple(n for n in self.names if n in found)

    def _uses(self, name: str) -> Tuple[str, ...]:
        """The variables the definition of derived iterator `name` uses."""
        for q, num, _ in self.defs:
            if q == name:
                return num.variables
        if name in self.extremes.names:
            a, b = self.extremes.arguments(name)
            return tuple(dict.fromkeys(a.variables + b.variables))
        return ()

    def plain_variables(self, a: Affine) -> Tuple[str, ...]:
        """The variables of `a` with each quotient replaced by its numerator's variables."""
        out: List[str] = []
        frontier = list(a.variables)
        while frontier:
            v = frontier.pop(0)
            if v in self.names:
                frontier.extend(self._uses(v))
            elif v not in out:
                out.append(v)
        return tuple(out)


def to_affine(node: Node, what: str, divs: Optional[Divisions]) -> Affine:
    """Convert a syntax node to an (quasi-)affine expression, or explain why it is not one.

    Without `divs` (a left-hand side), divisions are refused."""
    stack: List[Tuple[Node, bool]] = [(node, False)]
    values: List[Affine] = []
    while stack:  # iterative: subscripts may be long sums
        n, done = stack.pop()
        if n.kind == "num" and not n.is_float:
            values.append(Affine.const(n.value))  # type: ignore[arg-type]
            continue
        if n.kind == "name":
            values.append(Affine.var(n.value))  # type: ignore[arg-type]
            continue
        if n.kind == "call" and n.value in ("min", "max") and len(n.args) == 2 and divs is not None:
            if not done:
                stack.append((n, True))
                stack.extend((a, False) for a in reversed(n.args))
                continue
            b, a = values.pop(), values.pop()
            try:
                values.append(divs.clamp(str(n.value), a, b))
            except _TooManyClamps:
                raise ParseError(f"{what} clamp with more than {MAX_CLAMPS} min/max terms in one statement: each "
                                 f"doubles the pieces of its domain; split the statement or declare "
                                 f"padded inputs", n.loc) from None
            continue
        if n.kind == "un" and n.value == "-" or n.kind == "bin" and n.value in ("+", "-", "*", "/", "//", "%"):
            if not done:
                stack.append((n, True))
                stack.extend((a, False) for a in reversed(n.args))
                continue
            if n.kind == "un":
                values.append(-values.pop())
                continue
            b, a = values.pop(), values.pop()
            values.append(_combine(n, a, b, what, divs))
            continue
        raise ParseError(f"{what} must be affine: {_AFFINE_HELP}, a floor division / modulo of one "
                         f"by a positive integer (`(x + 1) // 2`, `i % 3`), or a min/max of such "
                         f"(`min(max(x, 0), W - 1)`)", n.loc)
    return values[0]


def _combine(n: Node, a: Affine, b: Affine, what: str, divs: Optional[Divisions]) -> Affine:
    op = n.value
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        if a.is_constant:
            return b.scale(a.constant)
        if b.is_constant:
            return a.scale(b.constant)
        raise ParseError(f"{what} must be affine: a product of two indices or sizes ({a}) * ({b}) is not",
                         n.loc)
    if not b.is_constant or b.constant <= 0:
        raise ParseError(f"{what} must be (quasi-)affine: `{op}` must divide by a positive integer constant "
                         f"(got {b}); isl handles floor division and modulo by constants exactly, nothing "
                         f"else", n.loc)
    d = b.constant
    if a.is_constant:
        return Affine.const(a.constant // d if op != "%" else a.constant % d)
    if divs is None:
        raise ParseError(f"{what} cannot divide (`{op}`): a left-hand side must be affine; divide on the "
                         f"right instead (e.g. `O[h] = I[2 * h]`, not `O[h // 2] = I[h]`)", n.loc)
    q = divs.quotient(a, d)
    return q if op != "%" else a - q.scale(d)


def is_integer_affine(node: Node, is_symbol: Callable[[str], bool]) -> bool:
    """True if `node` only combines integer literals and index/size names with + - * // %."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind == "num":
            if n.is_float:
                return False
        elif n.kind == "name":
            if not is_symbol(n.value):  # type: ignore[arg-type]
                return False
        elif n.kind == "un" and n.value == "-" or n.kind == "bin" and n.value in ("+", "-", "*", "//", "%"):
            stack.extend(n.args)
        else:
            return False
    return True
