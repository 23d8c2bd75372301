"""Turn "statement S reads A[f(it)]" into a gather statement that accumulates A's adjoint.

Reverse mode naively *scatters*: every instance `it` of S adds its contribution into
`A_grad[f(it)]`, so several instances write one element (atomics on a GPU, no parallel loop over
`it`).  polyc instead inverts the access: it re-parametrises S's instances by the element they read,
`it = g(a, r)` with `a` the element's coordinates and `r` the iterators left free, and emits

    A_grad[a] += contribution(g(a, r))   for every (a, r) with g(a, r) in S's domain and a in A's shape

which *gathers*: each instance writes the element it names and sums over `r` only, like any
Einstein reduction.  For a convolution `X[n, c, h + kh, w + kw]` this is the correlation with the
flipped filter, `X_grad[n, c, h, w] += Y_grad[n, f, h - kh, w - kw] * K[f, c, kh, kw]`, over the
range where `0 <= h - kh <= H - KH` (the borders' guards).

`g` is found by eliminating, for each subscript, one iterator that has a unit coefficient (an
iterator of the target is preferred to a reduction iterator, so windows stay the inner loops).
isl then checks the result is exact: the map from gather instances to S's instances is injective
and covers exactly the instances of S whose read lies in A's shape, for every size.  Subscripts with
no unit-coefficient iterator left (`A[2*i]`) are not invertible by an affine map: `GradError`.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Set, Tuple

import islpy as isl

from ..errors import GradError
from ..ir import Access, Affine, Constraint, Expr, Statement
from ..poly.islutil import disjunction_str, isl_budget, isl_name, params_str
from ..poly.model import tuple_str
from .exprs import fresh_name, substitute, within  # noqa: F401 (fresh_name re-exported)

_TEMP = "\0a"   # temporary names of the element coordinates (no user name contains NUL)


def _pick(expr: Affine, remaining: Sequence[str], prefer_not: Set[str]):
    units = [v for v in remaining if abs(expr.coeff(v)) == 1]
    if not units:
        return None
    kept = [v for v in units if v not in prefer_not]
    return (kept or units)[0]


def invert_access(st: Statement, acc: Access, shape: Sequence[Affine], taken: Set[str],
                  where: str) -> Tuple[Tuple[str, ...], Tuple[str, ...], Dict[str, Affine],
                                       Tuple[Tuple[Constraint, ...], ...]]:
    """Parametrise `st`'s instances by the element `acc` reads.

    Returns `(coords, free, sigma, domain)`: the names of the element coordinates, the iterators
    left free (the gather's reduction), `sigma` mapping each of `st`'s iterators to its value in
    terms of those, and the gather's domain (DNF).  `taken`: names the new ones must avoid."""
    remaining = list(st.iterators)
    sigma: Dict[str, Affine] = {}
    equalities: List[Constraint] = []
    solved: Dict[int, str] = {}
    for d, sub in enumerate(acc.indices):
        expr = sub.substitute(sigma)
        var = _pick(expr, remaining, set(st.reduction))
        coord = Affine.var(f"{_TEMP}{d}")
        if var is None:
            if any(v in remaining for v in expr.variables):
                shown = (f"{acc.tensor} (a floor division)" if set(sub.variables) & set(st.divisions)
                         else f"{acc} ({sub})")      # a division's iterator is polyc's name, not the user's
                raise GradError(
                    f"{where}: subscript {d + 1} of {shown} has no loop index with coefficient +1 or -1, "
                    f"so the elements it reads cannot be mapped back to the instances reading them by an "
                    f"affine function (a strided read); pc.grad supports reads whose every subscript has "
                    f"such an index, e.g. X[2*h + r]")
            equalities.append(Constraint("eq", coord - expr))
            continue
        c = expr.coeff(var)
        rest = expr - Affine.var(var, c)
        value = (coord - rest).scale(c)           # c is +-1: c * var + rest = coord
        sigma = {k: v.substitute({var: value}) for k, v in sigma.items()}
        sigma[var] = value
        remaining.remove(var)
        solved[d] = var
    used = set(taken) | set(remaining)
    names: List[str] = []
    for d, sub in enumerate(acc.indices):
        # The coordinate keeps the index's name where it plainly is that index (`X[n, c, h + kh]`
        # gives n, c, h); a reduction index solved for a coordinate (`2*h + r`) does not lend its name.
        var = solved.get(d)
        readable = var is not None and (sub.as_single_var() == var or var not in st.reduction)
        names.append(fresh_name(var if readable else f"x{d}", used))
    rename = {f"{_TEMP}{d}": Affine.var(n) for d, n in enumerate(names)}
    sigma = {k: v.substitute(rename) for k, v in sigma.items()}
    in_shape = within([Affine.var(n) for n in names], shape)
    extra = tuple(Constraint(c.kind, c.expr.substitute(rename), c.modulus) for c in equalities) + in_shape
    domain = tuple(tuple(dict.fromkeys(tuple(Constraint(c.kind, c.expr.substitute(sigma), c.modulus)
                                             for c in conj) + extra))
                   for conj in st.domain)
    return tuple(names), tuple(remaining), sigma, domain


def gather_iterators(st: Statement, acc: Access, coords: Sequence[str], free: Sequence[str],
                     sigma: Mapping[str, Affine]) -> Tuple[str, ...]:
    """The gather's loops in the forward statement's order (a coordinate takes the place of the index
    solved for it), so it sweeps memory the way the forward statement does: `gamma_grad[j] +=
    Y_grad[i, j] * ...` keeps `j` inner, reading rows contiguously, rather than walking columns."""
    placed: List[str] = []
    for v in st.iterators:
        if v in free:
            placed.append(v)
            continue
        for d, c in enumerate(coords):
            if c not in placed and sigma.get(v) is not None and sigma[v].coeff(c) != 0 \
                    and acc.indices[d].coeff(v) != 0:
                placed.append(c)
                break
    return tuple(placed) + tuple(c for c in coords if c not in placed)


def check_exact(st: Statement, acc: Access, shape: Sequence[Affine], coords: Sequence[str],
                free: Sequence[str], sigma: Mapping[str, Affine], domain, sizes: Sequence[str],
                assumptions: Sequence[Constraint], where: str) -> None:
    """isl's proof that the gather visits each instance of `st` reading an element of `A` once."""
    from ..poly.islutil import affine_str, conjunction_str
    p = params_str(sizes)
    ctx = conjunction_str(assumptions) if assumptions else "true"
    g_tuple = tuple_str("G", tuple(coords) + tuple(free))
    image = ", ".join(affine_str(sigma.get(i, Affine.var(i))) for i in st.iterators)
    s_tuple = tuple_str(st.name, st.iterators)
    in_bounds = " and ".join(f"0 <= {affine_str(a)} < {affine_str(e)}" for a, e in zip(acc.indices, shape)) or "true"
    m = isl.Map(f"{p} -> {{ {g_tuple} -> {isl_name(st.name)}[{image}] : {disjunction_str(domain)} }}")
    target = isl.Set(f"{p} -> {{ {s_tuple} : ({disjunction_str(st.domain)}) and {in_bounds} }}")
    context = isl.Set(f"{p} -> {{ : {ctx} }}")
    with isl_budget(f"inverting the read {acc} of statement {st.name}"):
        m = m.intersect_params(context)
        target = target.intersect_params(context)
        ok = m.is_injective() and m.range().is_equal(target)
    if not ok:   # the elimination above is exact by construction; this guards against its defects
        raise GradError(f"{where}: the read {acc} could not be inverted exactly (isl found the gather "
                        f"over- or under-counts instances); pc.grad refuses rather than risk a wrong gradient")


def gather_value(contribution: Expr, sigma: Mapping[str, Affine]) -> Expr:
    """The contribution expression rewritten over the gather's iterators."""
    return substitute(contribution, sigma)
