"""Zero-padded gathers: a convolution's input gradient as one contraction over a box.

The gather of a shifted read (`polyc.grad.gather`) sums over a domain that is not a box near the
border: `X_grad[n, c, h, w] += Y_grad[n, f, h - kh, w - kw] * K[f, c, kh, kw]` only where
`0 <= h - kh <= H - KH`.  `split_interior` runs the border as guarded loops of two or three
iterations each, which cost as much as the whole interior.  Frameworks instead pad the adjoint with
zeros and run one full correlation; so does this module, where it is exact:

- the gather's value is a product, one factor of which (`T`, an adjoint) is the only one whose
  read leaves its array on the summed box;
- over the product `B` of the target elements and the summed indices (`domains.summed_box`), the
  gather's domain is exactly the pairs whose read of `T` is in bounds, and every other read is in
  bounds on all of `B` (isl checks both);
- the subscripts of `T` range over `[lo_d, hi_d]` on `B`, single affine functions of the sizes,
  with `lo_d <= 0` and `hi_d >= extent_d - 1` wherever `B` is not empty.

Then `T_padded` (extents `hi_d - lo_d + 1`) is zeroed, `T` copied into it at offset `-lo_d`, and the
gather runs over all of `B` reading `T_padded[sub - lo_d]`: the added pairs read zeros.  The result
is one contraction over a box, which `"auto"` packs like the forward convolution.

Exactness: each added term is `0 * other`, which is `+-0` and leaves a sum unchanged when `other` is
finite.  Where the other factor holds an infinity or a NaN (a filter tap of `inf`), the added term
is NaN: border elements that the exact sum would leave finite become NaN.  Every element such a tap
reaches inside the window is then infinite or NaN as well, and the forward output was too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Set, Tuple

import islpy as isl

from ..ir import Access, Affine, Binary, Constraint, Expr, Statement, TensorDecl
from ..poly.islutil import (basic_set_constraints, conjunction_str, disjunction_str, isl_budget,
                            params_set_to_constraints, params_str, pw_aff_to_affine, affine_str)
from ..poly.model import tuple_str
from .derivative import ZERO
from .domains import summed_box
from .exprs import substitute_access, within
from .gather import fresh_name


@dataclass(frozen=True)
class PaddedGather:
    """What replaces one gather: the zero-padded copy's declaration, the statements that zero it and
    copy the adjoint into it (in that order, before the gather), and the gather over the box."""

    decl: TensorDecl
    zero: Statement
    copy: Statement
    gather: Statement


def _factors(e: Expr) -> List[Expr]:
    if isinstance(e, Binary) and e.op == "*":
        return _factors(e.lhs) + _factors(e.rhs)
    return [e]


def _range_of(sub: Affine, box: isl.Set, space: str, p: str, ctx: isl.Set) -> Optional[Tuple[Affine, Affine]]:
    """The least and greatest value of `sub` on `box`, as affine functions of the sizes."""
    image = isl.Map(f"{p} -> {{ {space} -> [{affine_str(sub)}] }}").intersect_domain(box).range()
    lo = pw_aff_to_affine(image.dim_min(0), ctx)
    hi = pw_aff_to_affine(image.dim_max(0), ctx)
    return None if lo is None or hi is None else (lo, hi)


def pad_gather(st: Statement, decls: Mapping[str, TensorDecl], paddable: Set[str], sizes: Sequence[str],
               assumptions: Sequence[Constraint], used: Set[str]) -> Optional[PaddedGather]:
    """The padded form of the gather `st` (see the module docstring), or None where it does not
    apply.  `decls`: every array the gather may read, by name; `paddable`: the arrays that may be
    padded (adjoints, complete when the gather runs); `used`: names new ones must avoid."""
    free = [i for i in st.iterators if i in st.reduction]
    coords = [i for i in st.iterators if i not in free]
    if not free or not coords or st.update != "+" or any(c.kind == "mod" for conj in st.domain for c in conj):
        return None
    factors = _factors(st.value)
    sliding = [f for f in factors if isinstance(f, Access) and f.tensor in paddable
               and any(ix.coeff(v) for ix in f.indices for v in free)]
    if len(sliding) != 1:
        return None
    acc = sliding[0]
    others = [a for a in st.value.accesses() if a is not acc]
    if any(a.tensor == acc.tensor for a in others) or any(decls[a.tensor].shape is None for a in others):
        return None
    shape = decls[acc.tensor].shape
    p = params_str(sizes)
    space = tuple_str("G", coords + free)
    with isl_budget(f"padding the adjoint {acc.tensor} of gradient statement {st.target}"):
        ctx = isl.Set(f"{p} -> {{ : {conjunction_str(assumptions)} }}")
        dom = isl.Set(f"{p} -> {{ {space} : {disjunction_str(st.domain)} }}").intersect_params(ctx)
        box = summed_box(dom, len(coords), len(free)).coalesce()
        if box.n_basic_set() != 1 or box.is_equal(dom):
            return None
        box_cs = basic_set_constraints(box.get_basic_sets()[0])
        if box_cs is None:
            return None
        reads_in = isl.Set(f"{p} -> {{ {space} : {conjunction_str(within(acc.indices, shape))} }}")
        if not box.intersect(reads_in).is_equal(dom):
            return None
        for a in others:
            inside = isl.Set(f"{p} -> {{ {space} : {conjunction_str(within(a.indices, decls[a.tensor].shape))} }}")
            if not box.is_subset(inside):
                return None
        ranges = [_range_of(ix, box, space, p, ctx) for ix in acc.indices]
        if any(r is None for r in ranges):
            return None
        nonempty = box.params()
        fits = " and ".join(f"{affine_str(lo)} <= 0 and {affine_str(hi)} >= {affine_str(e)} - 1"
                            for (lo, hi), e in zip(ranges, shape))
        if not nonempty.is_subset(isl.Set(f"{p} -> {{ : {fits} }}")):
            return None
        guard = params_set_to_constraints(nonempty.gist_params(ctx))
    if guard is None:
        return None
    t = decls[acc.tensor]
    name = fresh_name(f"{acc.tensor}_padded", used)
    decl = TensorDecl(name, t.dtype, tuple(hi - lo + 1 for lo, hi in ranges), "temp")
    taken = set(used)
    iters = [fresh_name(f"i{d}", taken) for d in range(len(shape))]
    own = tuple(Affine.var(n) for n in iters)

    base = dict(name="", iterators=tuple(iters), location=st.location, text=st.text)
    zero = Statement(domain=(within(own, decl.shape),), target=Access(name, own), value=ZERO, **base)
    copy = Statement(domain=(within(own, shape) + guard,), value=Access(acc.tensor, own),
                     target=Access(name, tuple(v - lo for v, (lo, _) in zip(own, ranges))), **base)
    padded = Access(name, tuple(ix - lo for ix, (lo, _) in zip(acc.indices, ranges)))
    gather = st.with_(domain=(box_cs,), value=substitute_access(st.value, acc, padded))
    return PaddedGather(decl, zero, copy, gather)
