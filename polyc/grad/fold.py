"""Fewer passes over memory: pointwise adjoint contributions become the adjoint's definition.

Built naively, every adjoint is zeroed and then updated once per read it receives, each a separate
pass over the array (softmax's backward would sweep `X_grad` three times).  A contribution with no
loop of its own to sum over (a pointwise read such as `Y[i, j] = e[i, j] / s[i]` into `e_grad`) that
covers the whole array is instead folded into one definition `e_grad[i, j] = c1 + c2 + ...`, which
replaces the zeroing.  isl decides whether a contribution covers the array.

Order: the definition is placed where the last folded contribution was, and the array's other
(reduction) contributions that came before it move just after it.  Moving a contribution later is
always safe: it reads only forward values (fixed) and the adjoint of its own statement's target,
which is complete before any contribution from that statement is emitted, and the adjoint it adds
to is read only after all of its contributions.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Set, Tuple

import islpy as isl

from ..ir import Access, Affine, Constraint, Statement
from ..poly.islutil import conjunction_str, disjunction_str, isl_budget, params_str
from ..poly.model import tuple_str
from .derivative import add
from .exprs import substitute, within


def _covers(st: Statement, shape: Sequence[Affine], sizes: Sequence[str],
            assumptions: Sequence[Constraint]) -> bool:
    """Whether `st` (a pointwise contribution) writes every element of an array of `shape`."""
    coords = [a.as_single_var() for a in st.target.indices]
    if st.reduction or None in coords or sorted(coords) != sorted(st.iterators):
        return False
    box = within([Affine.var(n) for n in coords], shape)
    p = params_str(sizes)
    ctx = isl.Set(f"{p} -> {{ : {conjunction_str(assumptions)} }}")
    dom = isl.Set(f"{p} -> {{ {tuple_str('G', coords)} : {disjunction_str(st.domain)} }}")
    full = isl.Set(f"{p} -> {{ {tuple_str('G', coords)} : {conjunction_str(box)} }}")
    with isl_budget("checking which adjoint contributions cover their array"):
        return dom.intersect_params(ctx).is_equal(full.intersect_params(ctx))


def fold_pointwise(contributions: Sequence[Statement], shapes: Dict[str, Tuple[Affine, ...]],
                   sizes: Sequence[str], assumptions: Sequence[Constraint]) -> Tuple[List[Statement], Set[str]]:
    """The contributions in their final order, with covering pointwise ones folded into definitions;
    and the adjoint arrays that still need zeroing first (those with no definition)."""
    folded: Dict[str, List[int]] = {}
    for k, c in enumerate(contributions):
        name = c.target.tensor
        if _covers(c, shapes[name], sizes, assumptions):
            folded.setdefault(name, []).append(k)
    define_at = {name: ks[-1] for name, ks in folded.items()}
    out: List[Statement] = []
    deferred: Dict[str, List[Statement]] = {}
    for k, c in enumerate(contributions):
        name = c.target.tensor
        if name not in define_at:
            out.append(c)
        elif k in folded[name]:
            if k == define_at[name]:
                out.append(_definition([contributions[j] for j in folded[name]]))
                out.extend(deferred.pop(name, []))
        elif k < define_at[name]:
            deferred.setdefault(name, []).append(c)
        else:
            out.append(c)
    zeroed = {c.target.tensor for c in contributions} - set(define_at)
    return out, zeroed


def _definition(parts: Sequence[Statement]) -> Statement:
    """`A[a] = c1 + c2 + ...` over the last part's loops (the others renamed to them)."""
    last = parts[-1]
    value = None
    for p in parts:
        rename = {str(old): new for old, new in zip(p.target.indices, last.target.indices) if old != new}
        v = substitute(p.value, rename) if rename else p.value
        value = v if value is None else add(value, v)
    return last.with_(value=value, update=None, target=Access(last.target.tensor, last.target.indices))
