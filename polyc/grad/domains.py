"""isl's simplest form of a gradient statement's domain.

A gather's domain is the forward statement's domain with the read inverted, plus the array's shape:
many of its constraints are implied by others (`0 <= h - kh <= H - KH` with `0 <= h < H`).  isl
removes the redundant ones and coalesces the pieces; the result is read back as constraints.  Loop
generation and the automatic scheduler then work on the smaller description.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import islpy as isl

from ..ir import Affine, Constraint, Statement
from ..poly.islutil import conjunction_str, disjunction_str, isl_budget, params_str, user_name
from ..poly.model import tuple_str

DNF = Tuple[Tuple[Constraint, ...], ...]


def _constraints(bset: isl.BasicSet) -> Optional[Tuple[Constraint, ...]]:
    if bset.dim(isl.dim_type.div) > 0:
        return None
    out = []
    for c in bset.get_constraints():
        coeffs = {}
        for kind in (isl.dim_type.param, isl.dim_type.set):
            for k in range(c.dim(kind)):
                v = c.get_coefficient_val(kind, k).to_python()
                if v:
                    coeffs[user_name(c.get_dim_name(kind, k))] = int(v)
        out.append(Constraint("eq" if c.is_equality() else "ge",
                              Affine.from_dict(coeffs, int(c.get_constant_val().to_python()))))
    return tuple(out)


def simplify_domain(st: Statement, sizes: Sequence[str], assumptions: Sequence[Constraint]) -> Statement:
    """`st` with its domain simplified by isl (unchanged where isl's form needs integer divisions)."""
    if any(c.kind == "mod" for conj in st.domain for c in conj):
        return st
    p = params_str(sizes)
    with isl_budget(f"simplifying the domain of gradient statement {st.target}"):
        dom = isl.Set(f"{p} -> {{ {tuple_str('G', st.iterators)} : {disjunction_str(st.domain)} }}")
        ctx = isl.Set(f"{p} -> {{ : {conjunction_str(assumptions)} }}")
        dom = dom.gist_params(ctx).remove_redundancies().coalesce()
        pieces = dom.get_basic_sets()
        out = []
        for b in pieces:
            cs = _constraints(b)
            if cs is None:
                return st
            out.append(cs)
    # isl renames nothing here: set dims keep the iterator names (checked, to be safe).
    names = {user_name(dom.get_dim_name(isl.dim_type.set, k)) for k in range(dom.dim(isl.dim_type.set))}
    if names != set(st.iterators) or not out:
        return st
    return st.with_(domain=tuple(out))
