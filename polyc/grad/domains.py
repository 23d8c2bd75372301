"""isl's simplest form of a gradient statement's domain.

A gather's domain is the forward statement's domain with the read inverted, plus the array's shape:
many of its constraints are implied by others (`0 <= h - kh <= H - KH` with `0 <= h < H`).  isl
removes the redundant ones and coalesces the pieces; the result is read back as constraints.  Loop
generation and the automatic scheduler then work on the smaller description.
"""
from __future__ import annotations

from typing import Sequence, Tuple

import islpy as isl

from ..ir import Constraint, Statement
from ..poly.islutil import basic_set_constraints, conjunction_str, set_dnf, disjunction_str, isl_budget, params_str, user_name
from ..poly.model import tuple_str

DNF = Tuple[Tuple[Constraint, ...], ...]


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
            cs = basic_set_constraints(b)
            if cs is None:
                return st
            out.append(cs)
    # isl renames nothing here: set dims keep the iterator names (checked, to be safe).
    names = {user_name(dom.get_dim_name(isl.dim_type.set, k)) for k in range(dom.dim(isl.dim_type.set))}
    if names != set(st.iterators) or not out:
        return st
    return st.with_(domain=tuple(out))


def summed_box(dom: isl.Set, nx: int, nk: int) -> isl.Set:
    """The product of `dom`'s projections on its first `nx` dimensions (the target elements) and on
    its last `nk` (the summed indices): every pair of a target element and a summed index that
    occurs anywhere in `dom`.  A convolution's input gradient: all (n, c, h, w) times all (f, kh, kw),
    the border's missing pairs included."""
    xs = dom.project_out(isl.dim_type.set, nx, nk)
    ks = dom.project_out(isl.dim_type.set, 0, nx)
    return xs.insert_dims(isl.dim_type.set, nx, nk).intersect(
        ks.insert_dims(isl.dim_type.set, 0, nx)).reset_space(dom.get_space())


def split_interior(st: Statement, sizes: Sequence[str], assumptions: Sequence[Constraint]) -> Tuple[Statement, ...]:
    """A gather as two statements: its *interior*, the target elements that receive a contribution
    from every value of the summed indices (a box of them: a convolution's input gradient away from
    the border), and the rest.  The interior is a plain contraction over a box, which the automatic
    scheduler packs like a matrix product; the border keeps the guarded loops.  `(st,)` when
    there is no such split (nothing summed, no border, or isl's form needs divisions)."""
    free = [i for i in st.iterators if i in st.reduction]
    coords = [i for i in st.iterators if i not in free]
    if not free or not coords or any(c.kind == "mod" for conj in st.domain for c in conj):
        return (st,)
    p = params_str(sizes)
    space = tuple_str("G", coords + free)
    nx, nk = len(coords), len(free)
    with isl_budget(f"splitting the border off gradient statement {st.target}"):
        ctx = isl.Set(f"{p} -> {{ : {conjunction_str(assumptions)} }}")
        dom = isl.Set(f"{p} -> {{ {space} : {disjunction_str(st.domain)} }}").intersect_params(ctx)
        xs = dom.project_out(isl.dim_type.set, nx, nk)
        # x is interior when (x, k) is in the domain for every k some target element sums over.
        missing = summed_box(dom, nx, nk).subtract(dom).project_out(isl.dim_type.set, nx, nk)
        interior = xs.subtract(missing).gist_params(ctx).coalesce()
        if interior.is_empty() or missing.is_empty() or interior.n_basic_set() != 1:
            return (st,)
        cx = basic_set_constraints(interior.get_basic_sets()[0])
        if cx is None:
            return (st,)
        inner = isl.Set(f"{p} -> {{ {space} : {conjunction_str(cx)} }}")
        parts = []
        for piece in (dom.intersect(inner), dom.subtract(inner)):
            conj = set_dnf(piece.gist_params(ctx))
            if not conj:
                return (st,)
            parts.append(conj)
    return tuple(st.with_(domain=d) for d in parts)
