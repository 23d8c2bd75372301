"""Statements and programs: the immutable IR both front ends produce and every later stage reads."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Dict, Optional, Tuple, Union

from ..errors import SourceLocation
from .affine import Affine
from .expr import Access, Expr
from .types import DType

#: The update operators a statement may apply to its target (`None` means plain assignment).
UPDATE_OPS = ("+", "*", "max", "min")


@dataclass(frozen=True)
class Constraint:
    """One affine constraint: `expr >= 0` ("ge"), `expr == 0` ("eq") or `expr % modulus == 0` ("mod")."""

    kind: str
    expr: Affine
    modulus: int = 0

    def __str__(self) -> str:
        if self.kind == "ge":
            return f"{self.expr} >= 0"
        if self.kind == "eq":
            return f"{self.expr} = 0"
        return f"({self.expr}) mod {self.modulus} = 0"


def lower_bound(var: str, bound: Affine) -> Constraint:
    """`var >= bound`."""
    return Constraint("ge", Affine.var(var) - bound)


def upper_bound_exclusive(var: str, bound: Affine) -> Constraint:
    """`var < bound`."""
    return Constraint("ge", bound - Affine.var(var) - 1)


#: How the front ends name a min/max iterator (`_max0`, `_min3`): see `Statement.extremes`.
EXTREME_ITERATOR = re.compile(r"_(max|min)\d+")


@dataclass(frozen=True)
class Statement:
    """One assignment executed once for every point of its iteration domain.

    - `iterators`: enclosing loop indices, outermost first.
    - `domain`: a union (disjunction) of conjunctions of constraints over iterators and sizes.
      Iterators listed in `inferred` have ranges still to be inferred from tensor shapes
      (Einstein notation); `polyc.poly.inference` fills them in.
    - `target`/`value`/`update`: `target = value` if `update` is None, else
      `target = target <update> value` (update in UPDATE_OPS).
    - `order`: the 2d+1 source-order position: `(c0, c1, ..., cd)` with one more entry than
      `iterators`; statement instances run in lexicographic order of
      `(c0, it0, c1, it1, ..., cd)`.
    - `descending`: iterators whose source loop runs downwards (`range(hi, lo, -1)`); in the
      source order above they count as `-it`, so instances run from high to low along them.
    - `divisions`: iterators standing for floor-division quotients or for min/max of affine terms
      (`extremes`): not loops the user wrote; each takes one value per instance of the others.
    - `reduction`: iterators that are reduction axes (Einstein `+=!`-style, or `+=` over an
      index absent from the target); lets a schedule parallelise them through a reduction strategy.
    """

    name: str
    iterators: Tuple[str, ...]
    domain: Tuple[Tuple[Constraint, ...], ...]
    target: Access
    value: Expr
    update: Optional[str] = None
    order: Tuple[int, ...] = (0,)
    reduction: Tuple[str, ...] = ()
    inferred: Tuple[str, ...] = ()
    location: Optional[SourceLocation] = None
    text: str = ""
    descending: Tuple[str, ...] = ()
    #: Iterators that are quotients of a floor division (`(x + 1) // 2`, `i % 3`): each takes one
    #: value per instance of the others, fixed by two domain constraints (see `frontend.einsum_affine`).
    divisions: Tuple[str, ...] = ()
    #: Tensor Comprehensions' `where exists T[...]`: accesses that bound the `inferred` ranges as
    #: reads would, but are never performed (no value, no dependence, no bounds check).
    exists: Tuple[Access, ...] = field(default=(), repr=False)     # repr: kernel hashes stay as they were

    @property
    def extremes(self) -> Tuple[str, ...]:
        """The `divisions` that are min/max iterators (`_max0 = max(a, b)`, fixed piecewise by the
        domain's conjunctions) rather than floor-division quotients."""
        return tuple(d for d in self.divisions if EXTREME_ITERATOR.fullmatch(d))

    def reads(self) -> Tuple[Access, ...]:
        """Accesses read: those in `value`, plus the target for an update."""
        own = (self.target,) if self.update else ()
        return own + self.value.accesses()

    def with_(self, **changes) -> "Statement":
        return replace(self, **changes)


#: Roles a tensor can have in a program.
ROLES = ("input", "output", "inout", "temp")


@dataclass(frozen=True)
class TensorDecl:
    """A tensor the kernel touches.

    `dtype`/`shape` are None where they are inferred (dtype from the call's arrays, shape from
    index ranges).  `role`: "input" (only read), "output" (written, not read before written;
    allocated when not passed), "inout" (read and updated in place), "temp" (an intermediate,
    written then read, never leaves the kernel).
    """

    name: str
    dtype: Optional[DType]
    shape: Optional[Tuple[Affine, ...]]
    role: str
    declared: bool = False


@dataclass(frozen=True)
class ScalarDecl:
    """A scalar parameter passed at call time (`alpha: float`, `T: int`).

    `dtype=None` (an undeclared Einstein-notation scalar) means "the kernel's element type",
    fixed when the kernel is specialised for the dtypes of its arrays.
    """

    name: str
    dtype: Optional[DType]
    #: A Python float (a loop kernel's `alpha: float`): beside a float32 value it is a float32,
    #: as numpy's NEP 50 makes `np.float32(x) * alpha`; beside Python numbers, a float64.
    weak: bool = field(default=False, repr=False)       # repr: kernel hashes stay as they were


@dataclass(frozen=True)
class Program:
    """A whole kernel: tensors, size symbols, scalar parameters and statements in source order."""

    name: str
    tensors: Tuple[TensorDecl, ...]
    statements: Tuple[Statement, ...]
    sizes: Tuple[str, ...] = ()
    scalars: Tuple[ScalarDecl, ...] = ()
    source: str = ""
    frontend: str = "einsum"
    #: Affine facts about sizes that hold for every call (e.g. `N - 1 >= 0`).
    assumptions: Tuple[Constraint, ...] = field(default_factory=tuple)
    #: Sizes that are integer parameters rather than extents (an Einstein `s=pc.i64` used in a
    #: subscript): any integer, negative included, where extents are assumed >= 1.
    int_params: Tuple[str, ...] = ()
    #: Sizes computed from others at call time: `(name, numerator, divisor)` means
    #: `name = floor(numerator / divisor)` (a strided output extent); `assumptions` carry the
    #: same definition as two constraints, so isl reasons about it exactly.
    derived_sizes: Tuple[Tuple[str, Affine, int], ...] = ()
    #: Values of scalar and `int` parameters a call may leave out: a loop kernel's Python defaults
    #: (`alpha: float = 2.5`), numbers only, as the function itself would take them.
    defaults: Tuple[Tuple[str, Union[int, float]], ...] = ()

    def __post_init__(self) -> None:
        # Every later stage walks statement expressions recursively: make room for the deepest
        # one here, once (see `polyc.ir.depth`); past the documented limit a typed error.
        from .depth import ensure_recursion_room, expression_depth
        for st in self.statements:
            depth = expression_depth(st.value)
            if depth > 100:
                ensure_recursion_room(depth, f"the right-hand side of statement {st.name} ({st.target})", st.location)

    @cached_property
    def index_scale(self) -> int:
        """Every integer the kernel computes is at most this times the largest size or integer
        parameter of a call, in magnitude (`ir.magnitude`)."""
        from .magnitude import index_scale
        return index_scale(self)

    def tensor(self, name: str) -> TensorDecl:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def tensor_map(self) -> Dict[str, TensorDecl]:
        return {t.name: t for t in self.tensors}

    def statement(self, name: str) -> Statement:
        for s in self.statements:
            if s.name == name:
                return s
        raise KeyError(name)

    def with_(self, **changes) -> "Program":
        return replace(self, **changes)
