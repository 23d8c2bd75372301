"""How large the integers a kernel computes can get, relative to its sizes and integer parameters.

Generated loops compute bounds and subscripts in `int64_t`.  A call with a huge integer parameter
(`s = 2**63 - 2` in `range(s, s + N)`) would overflow them silently: `s + N` wraps and the loop
runs nowhere.  `index_scale(program)` is a factor `F` such that every affine value of the kernel
that indexes or bounds (a subscript, a domain bound, a shape) is at most `F * M` in magnitude, where `M` bounds the
magnitudes of the sizes and integer parameters of the call; a call keeps `F * M` well inside
int64 (`runtime.arguments`).

The bound: an iterator is fixed by domain constraints `a*i + rest >= 0` with integer `a != 0`, so
`|i| <= |rest| <= P * M`, where `P` is the largest sum of size coefficients and constant of a
domain constraint; an expression with iterator coefficients summing to `S` and size part `Q` is
then at most `(S * P + Q) * M`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator, Set

from .affine import Affine
from .expr import Access

if TYPE_CHECKING:       # `Program.index_scale` calls in here
    from .program import Program


def _expressions(program: Program) -> Iterator[Affine]:
    for t in program.tensors:
        yield from t.shape or ()
    for c in program.assumptions:
        yield c.expr
    for st in program.statements:
        for conj in st.domain:
            for c in conj:
                yield c.expr
        yield from st.target.indices
        for node in st.value.walk():     # (an index used as a value is data: it wraps as numpy's)
            if isinstance(node, Access):
                yield from node.indices


def _parts(e: Affine, iterators: Set[str]) -> tuple:
    """(sum of |iterator coefficients|, sum of |size coefficients| + |constant|)."""
    s = sum(abs(c) for v, c in e.terms if v in iterators)
    q = sum(abs(c) for v, c in e.terms if v not in iterators) + abs(e.constant)
    return s, q


def index_scale(program: Program) -> int:
    iterators = {i for st in program.statements for i in (*st.iterators, *st.divisions)}
    domain: Iterable[Affine] = (c.expr for st in program.statements for conj in st.domain for c in conj)
    p = max((_parts(e, iterators)[1] for e in domain), default=1) or 1
    return max(1, max((s * p + q for s, q in (_parts(e, iterators) for e in _expressions(program))), default=1))


#: What a kernel's integers may reach for a call's sizes: int64 with room for the few extra terms
#: a schedule's loop bounds add (tile corners, skews).  `runtime.arguments` checks each call.
SAFE_MAGNITUDE = 2 ** 60


def oversized_statement(program: Program):
    """The first statement whose subscripts or bounds reach `SAFE_MAGNITUDE` times the sizes
    already at size 1 (`A[i // 10**12]`, a coefficient of 10**18): no call could run it in 64-bit
    arithmetic.  None when every statement fits."""
    if index_scale(program) < SAFE_MAGNITUDE:
        return None
    for st in program.statements:
        if index_scale(program.with_(statements=(st,))) >= SAFE_MAGNITUDE:
            return st
    return None
