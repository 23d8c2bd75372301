"""Recognising contractions: the one analysis both the CPU packing and the CUDA tiling use.

A *contraction* is an update `T[..] += f(P1, P2)` whose loops fall into groups by which of the
target and the two factors they index (never by a kernel's name):

- row loops (the target and the first factor), column loops (the target and the second factor),
- reduction loops (both factors, not the target), batch loops (all three).

Two consumers ask two questions of the same classification (`loop_groups`):

- `contraction_form`: the CPU packing (`Schedule.pack`) runs `T += P1 * P2`, where each factor may
  fold loop-invariant scalars (`alpha * A[i, k] * B[k, j]`), any number of loops per group, as a
  BLAS micro-kernel; also a sum of such products over the same loops, `T += P1 * P2 + Q1 * Q2`
  (PolyBench's syr2k, a rank-2k update), each term packed beside the others and summed in the
  order written before it is added;
- `tiled_contraction`: the CUDA scheduler (`polyc.schedule.auto_gpu`) runs `T[b?, i, j] += f(A, B)`
  with exactly one row, column and reduction loop over a rectangular domain (isl proves it) as a
  shared-memory, register-tiled kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, Optional, Tuple, Union

import islpy as isl

from ..ir import Access, Affine, Binary, Expr, IndexExpr, Program, Statement
from ..ir.text import expr_text
from .islutil import affine_str, isl_budget, isl_name, pw_aff_to_affine
from .model import PolyModel


@dataclass(frozen=True)
class Contraction:
    """A statement `T += P1 * P2` classified by loops.  Each group is one loop for a matmul; a
    convolution has several (m: `f`; n: `n, h, w`; k: `c, kh, kw`), which the packed code runs as
    one linear index each, in source order."""

    statement: str
    m: Tuple[str, ...]
    n: Tuple[str, ...]
    k: Tuple[str, ...]
    batch: Tuple[str, ...]
    m_factor: Expr        # the factor indexed by (m, k): packed as broadcast rows
    n_factor: Expr        # the factor indexed by (k, n): packed as SIMD lanes
    m_first: bool         # whether the m-side factor is the left operand of the product as written
    #: Further terms of a sum of products, (m-side factor, n-side factor) each, in the order written:
    #: the statement adds `m_factor * n_factor + m1 * n1 + ...`, summed left to right.
    more: Tuple[Tuple[Expr, Expr], ...] = ()

    @property
    def terms(self) -> Tuple[Tuple[Expr, Expr], ...]:
        """Every product of the sum as (m-side factor, n-side factor); one for a plain contraction."""
        return ((self.m_factor, self.n_factor),) + self.more


@dataclass(frozen=True)
class LoopGroups:
    """The loops of a statement grouped by which of target, left and right factor they index."""

    batch: Tuple[str, ...]
    left_only: Tuple[str, ...]
    right_only: Tuple[str, ...]
    reduction: Tuple[str, ...]
    unclassified: Tuple[str, ...]


def iterators_in(e: Union[Expr, Access], iterators: Tuple[str, ...]) -> set:
    """The loop iterators `e` uses in subscripts or index values."""
    out = set()
    for node in e.walk():
        if isinstance(node, Access):
            for ix in node.indices:
                out |= {v for v in ix.variables if v in iterators}
        elif isinstance(node, IndexExpr):
            out |= {v for v in node.value.variables if v in iterators}
    return out


def loop_groups(st: Statement, left: Union[Expr, Access], right: Union[Expr, Access]) -> LoopGroups:
    """Classify the loops of `st` by the target and the two factors `left` and `right`."""
    its = st.iterators
    t_its = iterators_in(st.target, its)
    l_its, r_its = iterators_in(left, its), iterators_in(right, its)
    batch = tuple(i for i in its if i in t_its and i in l_its and i in r_its)
    lhs_only = tuple(i for i in its if i in t_its and i in l_its and i not in r_its)
    rhs_only = tuple(i for i in its if i in t_its and i in r_its and i not in l_its)
    ks = tuple(i for i in its if i in l_its and i in r_its and i not in t_its)
    classified = set(batch) | set(lhs_only) | set(rhs_only) | set(ks)
    return LoopGroups(batch, lhs_only, rhs_only, ks, tuple(i for i in its if i not in classified))


def _one_element_per(indices: Tuple[Affine, ...], loops: Tuple[str, ...]) -> bool:
    """Whether the subscripts select a different element for different values of `loops` (isl:
    the linear map from the loops to the subscripts is injective)."""
    if not indices:
        return not loops
    names = [isl_name(v) for v in loops]
    exprs = [affine_str(Affine.from_dict({v: ix.coeff(v) for v in loops})) for ix in indices]
    with isl_budget("checking that a contraction's target is one element per row and column"):
        return isl.Map(f"{{ [{', '.join(names)}] -> [{', '.join(exprs)}] }}").is_injective()


def _products(v: Expr) -> Optional[Tuple[Binary, ...]]:
    """The products `v` sums, left to right (`p1 + p2 + p3` parses as `(p1 + p2) + p3`), or None
    when it is not a sum of products."""
    if isinstance(v, Binary) and v.op == "*":
        return (v,)
    if isinstance(v, Binary) and v.op == "+":
        left = _products(v.lhs)
        if left is not None and isinstance(v.rhs, Binary) and v.rhs.op == "*":
            return left + (v.rhs,)
    return None


def contraction_form(program: Program, name: str, lanes: Optional[str] = None) -> Union[Contraction, str]:
    """The statement as a `Contraction` (for `Schedule.pack`), or a sentence saying why it is not one.

    SIMD lanes go along the loops of the factor the target is laid out along (unit stride), when
    there is one; `lanes` (a tensor only one factor reads) puts them along that factor's loops
    instead, the other factor's loops becoming the rows (`pack(..., lanes=...)`).  A sum of
    products is one when every product is one over the same row, column and reduction loops."""
    st: Statement = program.statement(name)
    if st.update != "+":
        return f"{name} is not an accumulation `+=`"
    products = _products(st.value)
    if products is None:
        return f"{name} does not accumulate a product of two factors (or a sum of such products)"
    if lanes is not None and len(products) > 1:
        return f"lanes={lanes!r}: {name} sums {len(products)} products; lanes= chooses the lanes of a single product"
    forms = []
    for product in products:
        form = _product_form(st, product, lanes)
        if isinstance(form, str):
            return form if len(products) == 1 else f"{form}, in the product `{expr_text(product)}`"
        forms.append(form)
    first = forms[0]
    for form, product in zip(forms[1:], products[1:]):
        if (form.m, form.n, form.k, form.batch) != (first.m, first.n, first.k, first.batch):
            return (f"{name} sums products over different loops: `{expr_text(product)}` has rows {list(form.m)}, columns "
                    f"{list(form.n)} and reductions {list(form.k)}, the first product {list(first.m)}, "
                    f"{list(first.n)} and {list(first.k)}")
    return replace(first, more=tuple((f.m_factor, f.n_factor) for f in forms[1:]))


def _product_form(st: Statement, v: Binary, lanes: Optional[str]) -> Union[Contraction, str]:
    """The product `v` that `st` accumulates, classified as a `Contraction` (or why it is not one)."""
    name = st.name
    target = st.target.tensor
    for side in (v.lhs, v.rhs):
        if not side.accesses():
            return f"{name}: a factor of the product reads no array"
        if any(a.tensor == target for a in side.accesses()):
            return f"{name} reads its own target {target} in the product"
    g = loop_groups(st, v.lhs, v.rhs)
    if not g.left_only or not g.right_only or not g.reduction or g.unclassified:
        its = st.iterators
        return (f"{name} is not a contraction: it needs row loops, column loops and reduction loops, each "
                f"indexing exactly two of the target and the two factors (target loops "
                f"{sorted(iterators_in(st.target, its))}, factor loops {sorted(iterators_in(v.lhs, its))} and "
                f"{sorted(iterators_in(v.rhs, its))})")
    lhs_only, rhs_only = g.left_only, g.right_only
    # SIMD lanes go along the loops the target is laid out along (unit stride), when there are some.
    last = st.target.indices[-1] if st.target.indices else Affine.const(0)
    lanes_left = any(abs(last.coeff(x)) == 1 for x in lhs_only) and not any(last.coeff(x) for x in rhs_only)
    if lanes is not None:
        left, right = ({a.tensor for a in side.accesses()} for side in (v.lhs, v.rhs))
        if (lanes in left) == (lanes in right):
            where = "both factors" if lanes in left else "neither factor"
            return (f"lanes={lanes!r} must name a tensor that exactly one factor of the product reads "
                    f"({lanes!r} is in {where}; the factors read {', '.join(sorted(left))} and "
                    f"{', '.join(sorted(right))})")
        lanes_left = lanes in left
    m_first = not lanes_left
    m, n = (lhs_only, rhs_only) if m_first else (rhs_only, lhs_only)
    if not _one_element_per(st.target.indices, m + n):
        return f"{name}: the target {target} is not one element per ({', '.join(m + n)})"
    m_factor, n_factor = (v.lhs, v.rhs) if m_first else (v.rhs, v.lhs)
    return Contraction(name, m, n, g.reduction, g.batch, m_factor, n_factor, m_first)


# -- the CUDA tiled form ----------------------------------------------------------------------------

@dataclass(frozen=True)
class TiledContraction:
    """The roles of a statement `C[.., b?, .., i.., .., j.., ..] += f(A[.. i.., k.. ..], B[.. k.., j.. ..])`
    over a box, for the CUDA tiled kernel (an implicit matrix product): `i` are the target's loops
    only `a` reads (the rows, in the target's index order), `j` those only `b` reads (the columns;
    `b` reads the target's last loop), `k` the reduction loops both read (in loop order), `batch`
    the one target loop both read, if any.  A group of several loops is one dimension of the
    product, enumerated row-major (a convolution: rows f, columns (n, h, w), k (c, kh, kw)).
    `extents` gives, per iterator, E in `0 <= it < E` (affine in the sizes)."""

    statement: str
    i: Tuple[str, ...]
    j: Tuple[str, ...]
    k: Tuple[str, ...]
    batch: Optional[str]
    a: Access
    b: Access
    extents: Tuple[Tuple[str, Affine], ...]

    def extent(self, iterator: str) -> Affine:
        return dict(self.extents)[iterator]

    @property
    def grouped(self) -> bool:
        """Whether some dimension of the product is several loops."""
        return max(len(self.i), len(self.j), len(self.k)) > 1


def box_extents(model: PolyModel, st: Statement) -> Optional[Dict[str, Affine]]:
    """Per iterator, the extent E of `0 <= it < E` when the domain is exactly that box (isl proves it)."""
    dom = model.domains[st.name]
    extents: Dict[str, Affine] = {}
    with isl_budget(f"checking whether {st.name} is a rectangular contraction"):
        parts = []
        for d, it in enumerate(st.iterators):
            lo = pw_aff_to_affine(dom.dim_min(d), model.context)
            hi = pw_aff_to_affine(dom.dim_max(d), model.context)
            if lo is None or hi is None or lo.variables or lo.constant != 0 or set(hi.variables) & set(st.iterators):
                return None
            extents[it] = hi + 1
            parts.append(f"0 <= {isl_name(it)} <= {affine_str(hi)}")
        box = isl.Set(f"{model.pstr} -> {{ {isl_name(st.name)}[{', '.join(isl_name(i) for i in st.iterators)}] : "
                      f"{' and '.join(parts) or 'true'} }}")
        if not dom.intersect_params(model.context).is_equal(box.intersect_params(model.context)):
            return None
    return extents


def tiled_contraction(model: PolyModel, name: str) -> Optional[TiledContraction]:
    """The CUDA tiled-contraction roles of statement `name`, or None when it is not one.

    The value reads exactly two arrays, neither the target nor written by any statement (scalars are
    fine); the target's subscripts are distinct plain loops; every loop is a row loop (target and
    one factor), a column loop (target and the other factor, the one that reads the target's last
    loop), a reduction loop (both factors, not the target) or the one batch loop (all three); there
    is at least one of each but batch; the domain is a box."""
    program = model.program
    st = program.statement(name)
    if st.update != "+" or len(st.target.indices) < 2:
        return None
    tvars = [e.as_single_var() for e in st.target.indices]
    if any(v is None or e.coeff(v) != 1 or e.constant for v, e in zip(tvars, st.target.indices)):
        return None
    if len(set(tvars)) != len(tvars) or any(isinstance(e, IndexExpr) for e in st.value.walk()):
        return None
    reads = list(st.value.accesses())
    if len(reads) != 2 or any(r.tensor == st.target.tensor for r in reads):
        return None
    a, b = reads
    if tvars[-1] in iterators_in(a, st.iterators):
        a, b = b, a
    g = loop_groups(st, a, b)
    if not g.left_only or not g.right_only or not g.reduction or len(g.batch) > 1 or g.unclassified:
        return None
    order = {v: n for n, v in enumerate(tvars)}
    i = tuple(sorted(g.left_only, key=order.__getitem__))
    j = tuple(sorted(g.right_only, key=order.__getitem__))
    written = {s.target.tensor for s in program.statements}
    if a.tensor in written or b.tensor in written:
        return None
    extents = box_extents(model, st)
    if extents is None:
        return None
    return TiledContraction(name, i, j, g.reduction, g.batch[0] if g.batch else None, a, b, tuple(extents.items()))
