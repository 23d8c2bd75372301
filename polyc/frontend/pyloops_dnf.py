"""The conditions of loop kernels as disjunctive normal forms (DNF) of affine constraints: the
domains of `if` tests, `else` branches and loop bounds with min/max, before they become a
statement's domain.  Conjunctions are pruned by their one-variable bounds as they expand, and
their number is capped, so a chain of `!=` tests or `elif` branches cannot grow exponentially."""
from __future__ import annotations

from typing import Dict, List, Sequence

from ..errors import PolycError
from ..ir import Constraint

#: A disjunction of conjunctions of constraints; `[[]]` is true, `[]` is false.
DNF = List[List[Constraint]]
TRUE: DNF = [[]]
FALSE: DNF = []

#: The most alternatives an `if` test may expand to (its DNF): `i != 0 and ... and i != 15` is
#: 2**16 before pruning, which took minutes; pruned it stays 17.
MAX_ALTERNATIVES = 4096


def _bounded(conj: Sequence[Constraint]) -> bool:
    """False when the conjunction's one-variable bounds contradict (`i <= -1` and `i >= 1`): a
    cheap test that prunes most products of `!=` tests; True when it cannot tell."""
    lo: Dict[str, int] = {}
    hi: Dict[str, int] = {}
    for c in conj:
        if c.kind == "eq" and len(c.expr.terms) == 1 and abs(c.expr.terms[0][1]) == 1:
            v, k = c.expr.terms[0]
            at = -c.expr.constant * k        # k * v + constant == 0
            lo[v], hi[v] = max(lo.get(v, at), at), min(hi.get(v, at), at)
        elif c.kind == "ge" and len(c.expr.terms) == 1:
            v, k = c.expr.terms[0]
            if k > 0:                        # v >= ceil(-constant / k)
                lo[v] = max(lo.get(v, -(c.expr.constant // k)), -(c.expr.constant // k))
            else:                            # v <= floor(constant / -k)
                hi[v] = min(hi.get(v, c.expr.constant // -k), c.expr.constant // -k)
        if any(v in hi and lo[v] > hi[v] for v in lo):
            return False
    return True


def dnf_and(a: DNF, b: DNF) -> DNF:
    out = [x + y for x in a for y in b if _bounded(x + y)]
    if len(out) > MAX_ALTERNATIVES:
        raise PolycError(f"an `if` test expands to more than {MAX_ALTERNATIVES} alternatives (each `!=`, "
                         f"`or` and `else` of an earlier test doubles them); write it with fewer `!=` "
                         f"tests, or as ranges (`lo <= i < hi`)")
    return out


def dnf_or(a: DNF, b: DNF) -> DNF:
    return a + b
