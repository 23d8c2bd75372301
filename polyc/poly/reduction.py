"""Which updates are reductions: the one rule every part of polyc uses.

An update `X[..] op= f(..)` (op one of `+`, `*`, `max`, `min`: associative and commutative) is a
*reduction* only when `f` does not read X.  Then two updates of one element may run in any order
(only the association changes), so a dependence between them does not forbid running the loop
that carries it in parallel with a reduction strategy.  `A[i] += A[i] * B[k]` is an update but no
reduction: each step scales what the steps before it left, so its order is its meaning.
"""
from __future__ import annotations

from ..ir import Program, Statement
from .dependences import Dependence


def is_reduction_update(st: Statement) -> bool:
    """Whether statement `st` is a reduction update (see the module docstring)."""
    if st.update is None:
        return False
    return all(a.tensor != st.target.tensor for a in st.value.accesses())


def is_reduction_dependence(program: Program, dep: Dependence) -> bool:
    """Whether `dep` only joins two updates of one element by the same reduction statement:
    reordering such a pair only reassociates the reduction."""
    if dep.source != dep.sink:
        return False
    st = program.statement(dep.source)
    return dep.array == st.target.tensor and is_reduction_update(st)
