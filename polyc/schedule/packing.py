"""`Schedule.pack(statement)`: run a contraction the way BLAS does, proven legal like any primitive.

A *contraction* is recognised from the statement's access relations, never from a kernel's name:
an update `T[..] += P1 * P2` whose loops split into

- row loops `m` (indexing the target and one factor), column loops `n` (the target and the other
  factor), reduction loops `k` (both factors, not the target) and batch loops (all three);
- factors that may also use loop-invariant scalars and constants, so `alpha * A[i, k] * B[k, j]`
  (read `(alpha * A[i, k]) * B[k, j]`) qualifies, and that do not read the target's array;
- a target that is one element per `(m, n)`.

Each group may hold several loops: a convolution `Y[n, f, h, w] += X[n, c, h + kh, w + kw] *
K[f, c, kh, kw]` has m = (f), n = (n, h, w), k = (c, kh, kw); each group then runs as one linear
index in source order, and packing the X side is an implicit im2col.  SIMD lanes go along the
group the target is laid out along.

Packing runs such a statement in the loop order of a BLAS micro-kernel design (BLIS):

    for n_block (NC) / for k_block (KC) / for m_block (MC) / for n_panel (NR) / for m_panel (MR)
        for k / for m (MR rows, in registers) / for n (NR lanes, SIMD)

with the current `k_block` slice of the `n`-side factor copied ("packed") into a contiguous
buffer once per `(n_block, k_block)`, and the `m`-side factor packed once per `m_block`, so the
micro-kernel streams both from cache with unit stride.  Scalars folded into a factor are applied
while packing (the product is evaluated in the same order as written).  Each target element is
loaded before its micro-kernel runs and accumulated in the source order of `k`, so the result is
the same, bit for bit, as the source order's (with the same contraction of multiply-adds).

The domain must be a box in the m, n and k loops, or a region of (m, n) times a box of k (syrk's
triangle): then the packed code computes the bounding box, keeps only the region's elements, and
is accepted only when every factor read over the box stays inside its array.

Legality, exactly: the packed code keeps, for every target element, its updates in increasing
order of the k loops and may reorder everything else.  So every dependence of the statement on
itself (with equal batch values) must join two updates of one element in that order
(`_check_order_kept`), and the whole new schedule (the statement taken out of the loops it shared
into its own nest at the same place) is proven with `check_legal` as usual.  For single loops the
new schedule dimensions are the blocked order itself; for groups, whose blocks are not affine in
the loops, they are the order of the groups (n, k, m).  The C generator emits the packed code for
them (`polyc.codegen.c_packed`) and falls back to plain loops where it cannot (integer types, mixed
precision, or a later primitive that changed the statement's loops).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Dict, Optional, Tuple, Union

import islpy as isl

from ..errors import IllegalScheduleError, PolycError, ScheduleArgumentError
from ..ir import Affine
from ..poly.contraction import Contraction, contraction_form  # noqa: F401  (re-exported)
from ..poly.islutil import affine_str, isl_budget, isl_name, pw_aff_to_affine
from .integers import optional_positive_int
from .rewrite import dependences_of, finish, fresh_name, kernel_names, statement_name, step, time_vars
from .state import Dim, ScheduleState as Schedule

#: Micro-kernel shape and blocking defaults.  The register tile is `mr` rows by `DEFAULT_NV`
#: vectors: mr * nv accumulators, nv vectors of the n-side panel and one broadcast m-side element
#: must all stay in SIMD registers (`register_tile`).  With 32 registers (AVX-512, AArch64) that is
#: the measured 8 x 2 (19 registers); with x86's 16 (AVX2, SSE) 6 x 2 (15): 1024^3 matmul on an AVX2
#: EPYC ran at 0.55x OpenBLAS (f32) and 0.57x (f64) with 8 x 2, whose 19 registers spill, and at
#: 0.83x / 0.80x with 6 x 2 (4 x 3: 0.34x, 3 x 4: 0.72x f64, 5 x 2: 0.68x f64).
DEFAULT_MR = 8
DEFAULT_NV = 2
DEFAULT_KC = 256
#: Bounds on `pack`'s arguments: mr and nv size the register tile (mr * nv accumulators are written
#: out in the micro-kernel), kc, mc and nc the packed blocks (elements along one loop).
MAX_REGISTER_TILE = 64
#: Accumulator vectors of one register tile (mr * nv): 16 or 32 SIMD registers hold the tile; past
#: 64 the micro-kernel is spill code whose compile time explodes (64 x 64: gcc still at it after
#: five minutes, 1 MB of C).
MAX_ACCUMULATORS = 64
MAX_BLOCK = 2**24


if TYPE_CHECKING:
    from ..target import Target


class BatchLoopsInside(PolycError):
    """`pack` refused because a batch loop of the contraction runs inside its other loops."""


@dataclass(frozen=True)
class PackPlan:
    """What the C generator needs to emit a packed contraction (recorded in `Schedule.packing`)."""

    contraction: Contraction
    bounds: Tuple[Tuple[str, Affine, Affine], ...]   # (iterator, lowest, highest) for m, n, k
    nonempty: str          # isl set of sizes and batch values where the statement has instances
    mr: int
    nv: int
    kc: int
    mc: int
    nc: int
    map_text: str          # the statement's schedule right after packing (later changes disable it)
    loops: Tuple[str, ...]  # the packed loops, outermost first
    m_block_loop: str      # the loop over m blocks (parallel when marked so)
    mask: Optional[str] = None  # isl set of (sizes, batch, m, n) in the domain, when not the whole box
    vector_bytes: int = 16      # the SIMD width the register tile is built for (the target's)

    @property
    def statement(self) -> str:
        return self.contraction.statement

    def bound(self, iterator: str) -> Tuple[Affine, Affine]:
        for it, lo, hi in self.bounds:
            if it == iterator:
                return lo, hi
        raise KeyError(iterator)


# -- recognising contractions --------------------------------------------------------------------

# Recognition is `polyc.poly.contraction.contraction_form` (shared with the CUDA scheduler).


# -- the domain must be a box in (m, n, k) --------------------------------------------------------

def _box_bounds(s: Schedule, c: Contraction) -> Tuple[Tuple[Tuple[str, Affine, Affine], ...], str, Optional[str]]:
    """Bounds `lo <= x <= hi` of m, n and k as affine functions of the sizes and batch loops, the
    condition on sizes and batch loops under which the statement has instances (isl text), and,
    when the domain is a region of (m, n) times a range of k rather than the whole box, that region
    (`_region_mask`).  PolycError for other domains (strided, k depending on m or n, piecewise)."""
    model = s.model
    st = model.program.statement(c.statement)
    dom = model.domains[c.statement].intersect_params(model.codegen_context)
    n_par = dom.dim(isl.dim_type.param)
    # Batch iterators become parameters: the box may depend on them.
    for b in c.batch:
        pos = dom.find_dim_by_name(isl.dim_type.set, isl_name(b))
        dom = dom.move_dims(isl.dim_type.param, n_par, isl.dim_type.set, pos, 1)
        n_par += 1
    names = [dom.get_dim_name(isl.dim_type.set, k) for k in range(dom.dim(isl.dim_type.set))]
    bounds = []
    for it in c.m + c.n + c.k:
        pos = names.index(isl_name(it))
        lo = pw_aff_to_affine(dom.dim_min(pos), model.codegen_context)
        hi = pw_aff_to_affine(dom.dim_max(pos), model.codegen_context)
        if lo is None or hi is None:
            raise PolycError(f"pack({c.statement}) needs bounds of loop {it!r} that are affine in the sizes "
                             f"(no min/max): the loops of `{st.text}` must form a rectangular box")
        bounds.append((it, lo, hi))
    params = [dom.get_dim_name(isl.dim_type.param, k) for k in range(n_par)]
    # Bounds come back in user names (batch iterators among them); isl text spells them again.
    text = affine_str

    cond = " and ".join(f"{text(lo)} <= {isl_name(it)} <= {text(hi)}" for it, lo, hi in bounds)
    box = isl.Set(f"[{', '.join(params)}] -> {{ [{', '.join(names)}] : {cond} }}")
    box = box.intersect_params(model.codegen_context.align_params(box.get_space()))
    dom_cmp = dom.reset_tuple_id().align_params(box.get_space())
    # Where the statement has instances (for these sizes and batch values) the box is its domain;
    # the packed code tests that condition (`PackPlan.nonempty`) before it runs the box.
    where = dom_cmp.params()
    box = box.intersect_params(where)
    if box.is_equal(dom_cmp):
        return tuple(bounds), str(where), None
    k_cond = " and ".join(f"{text(lo)} <= {isl_name(it)} <= {text(hi)}" for it, lo, hi in bounds if it in c.k)
    k_range = isl.Set(f"[{', '.join(params)}] -> {{ [{', '.join(names)}] : {k_cond} }}")
    mask = _region_mask(s, c, dom_cmp, box, k_range, names, n_par)
    if mask is None:
        raise PolycError(f"pack({c.statement}) needs an iteration domain that is a region of loops "
                         f"{', '.join(c.m + c.n)} times a range of {', '.join(c.k)} (no strides), and reads of "
                         f"its factors that "
                         f"stay in bounds over the bounding box; `{st.text}` has {model.domains[c.statement]}")
    return tuple(bounds), str(where), mask


def _region_mask(s: Schedule, c: Contraction, dom: isl.Set, box: isl.Set, k_range: isl.Set, names,
                 n_par: int) -> Optional[str]:
    """For a domain `region(m, n) x interval(k)` (a triangle, as in syrk): the region as an isl set
    of the sizes, batch loops, m and n (all parameters), provided every factor read over the whole
    bounding `box` stays inside its array (the packed code computes the box and keeps the region).
    None when the domain has another shape or some read would leave its array."""
    k_positions = sorted(names.index(isl_name(x)) for x in c.k)
    region = dom
    for pos_k in reversed(k_positions):
        region = region.project_out(isl.dim_type.set, pos_k, 1)
    lifted = region
    for pos_k in k_positions:
        lifted = lifted.insert_dims(isl.dim_type.set, pos_k, 1)
    for q, nm in enumerate(names):
        lifted = lifted.set_dim_name(isl.dim_type.set, q, nm)
    rebuilt = lifted.intersect(k_range.align_params(lifted.get_space())).intersect_params(dom.params())
    if not rebuilt.is_equal(dom):
        return None
    model = s.model
    program = model.program
    params = [box.get_dim_name(isl.dim_type.param, q) for q in range(n_par)]
    from ..poly.islutil import affine_str
    for factor in (f for term in c.terms for f in term):
        for acc in factor.accesses():
            shape = program.tensor(acc.tensor).shape
            if shape is None:
                return None
            idx = ", ".join(affine_str(e) for e in acc.indices)
            reads = isl.Map(f"[{', '.join(params)}] -> {{ [{', '.join(names)}] -> {isl_name(acc.tensor)}[{idx}] }}")
            reads = reads.intersect_domain(box.align_params(reads.get_space()))
            avars = [f"a{q}" for q in range(len(shape))]
            inside = " and ".join(f"0 <= {a} < {affine_str(e)}" for a, e in zip(avars, shape)) or "true"
            arr = isl.Set(f"{model.pstr} -> {{ {isl_name(acc.tensor)}[{', '.join(avars)}] : {inside} }}")
            if not reads.range().is_subset(arr.align_params(reads.get_space())):
                return None
    # m and n become parameters: the packed code tests the region element by element.
    out = region
    for it in c.m + c.n:
        q = out.find_dim_by_name(isl.dim_type.set, isl_name(it))
        out = out.move_dims(isl.dim_type.param, out.dim(isl.dim_type.param), isl.dim_type.set, q, 1)
    return str(out)


def _check_order_kept(s: Schedule, c: Contraction) -> None:
    """Every dependence of the statement on itself (with equal batch values) joins two updates of one
    target element (same m and n) in increasing source order of the k loops: the packed code keeps
    exactly that order per element and may reorder everything else."""
    st = s.model.program.statement(c.statement)
    its = st.iterators
    d = {x: f"d{its.index(x)}" for x in its}
    same_batch = " and ".join(f"{d[b]} = 0" for b in c.batch) or "true"
    same_element = " and ".join(f"{d[x]} = 0" for x in c.m + c.n)
    k_forward = " or ".join("(" + " and ".join([f"{d[x]} = 0" for x in c.k[:q]] + [f"{d[c.k[q]]} > 0"]) + ")"
                            for q in range(len(c.k)))
    dvars = ", ".join(d[x] for x in its)
    bad = isl.Set(f"{{ [{dvars}] : {same_batch} and not ({same_element} and ({k_forward})) }}")
    for dep in dependences_of(s.model):
        if dep.source != c.statement or dep.sink != c.statement:
            continue
        deltas = dep.relation.deltas().reset_tuple_id()
        hit = deltas.intersect(bad.align_params(deltas.get_space()))
        if not hit.is_empty():
            raise IllegalScheduleError(
                f"pack({c.statement}) is illegal: the {dep.kind} dependence {dep.source} -> {dep.sink} on "
                f"{dep.array} (distances {deltas}) does not only join updates of one element in increasing "
                f"order of {', '.join(c.k)}, which is all the packed order keeps", dependence=dep)


# -- the primitive --------------------------------------------------------------------------------

def _first_band_dim(s: Schedule, c: Contraction) -> int:
    """The outermost schedule dimension along which the statement moves with m, n or k."""
    m = s.statement_map(c.statement)
    st = s.model.program.statement(c.statement)
    positions = [st.iterators.index(x) for x in c.m + c.n + c.k]
    fixed = s.fixed_positions[c.statement]
    for q in range(len(s.dims)):
        if fixed[q] is not None:
            continue  # a constant (known without isl) moves with nothing
        col = m.project_out(isl.dim_type.out, q + 1, len(s.dims) - q - 1).project_out(isl.dim_type.out, 0, q)
        pwa = isl.PwMultiAff.from_map(col).get_pw_aff(0) if col.is_single_valued() else None
        if pwa is None or any(pwa.involves_dims(isl.dim_type.in_, p, 1) for p in positions):
            return q
    raise PolycError(f"pack({c.statement}): the statement's loops {', '.join(c.m + c.n + c.k)} are not in "
                     f"this schedule")


def _prefix_fixes_batch(s: Schedule, c: Contraction, p: int) -> bool:
    """Whether the dimensions before `p` determine the batch loops (each packed nest is one batch)."""
    st = s.model.program.statement(c.statement)
    m = s.statement_map(c.statement).intersect_domain(s.model.domains[c.statement])
    prefix = m.project_out(isl.dim_type.out, p, len(s.dims) - p).reverse()
    drop = sorted((st.iterators.index(x) for x in c.m + c.n + c.k), reverse=True)
    for pos in drop:
        prefix = prefix.project_out(isl.dim_type.out, pos, 1)
    return prefix.is_single_valued()


def register_tile(vector_registers: int, terms: int = 1) -> Tuple[int, int]:
    """(mr, nv) of the micro-kernel for a CPU with `vector_registers` SIMD registers: `DEFAULT_NV`
    vectors per row and as many rows as fit beside them and, per product of a sum of `terms`
    products (`Contraction.terms`), its nv lane vectors and one broadcast operand (at most
    `DEFAULT_MR`, the widest tile measured)."""
    nv = DEFAULT_NV
    return max(1, min(DEFAULT_MR, (vector_registers - terms * (nv + 1)) // nv)), nv


def default_blocking(elem_bytes: int = 4, target: Optional["Target"] = None,
                     terms: int = 1) -> Tuple[int, int, int, int, int]:
    """(mr, nv, kc, mc, nc) for `target` (default: `Target.host()`): the register tile from its
    SIMD registers (`register_tile`); the packed m block (MC x KC) fills a quarter of the L2 cache
    of a core, the packed n block (KC x NC) a quarter of the L3.  A sum of `terms` products packs
    `terms` values per k position: kc shrinks by that factor, so the blocks keep their bytes."""
    mach = _target(target)
    mr, nv = register_tile(mach.vector_registers, terms)
    kc = max(16, DEFAULT_KC // terms)
    mc = max(mr, min(256, mach.l2 // (4 * kc * terms * elem_bytes)) // mr * mr)
    nc = max(256, min(8192, mach.l3 // (4 * kc * terms * elem_bytes)) // 256 * 256)
    return mr, nv, kc, mc, nc


def vector_bytes(target: Optional["Target"] = None) -> int:
    """Width of `target`'s widest SIMD registers in bytes (default: `Target.host()`'s)."""
    return _target(target).vector_bytes


def _target(target: Optional["Target"]) -> "Target":
    from ..target import Target
    return Target.host() if target is None else target


def pack(s: Schedule, statement: Union[str, int], *, mr: Optional[int] = None, nv: Optional[int] = None,
         kc: Optional[int] = None, mc: Optional[int] = None, nc: Optional[int] = None,
         vector_bytes: Optional[int] = None, lanes: Optional[str] = None,
         target: Optional["Target"] = None) -> Schedule:
    """The primitive behind `Schedule.pack` (see the module docstring).  Defaults come from
    `target` (default: `Target.host()`); the recorded step holds the values used, so a saved
    schedule replays the same on any machine.  `lanes`: see `contraction_form`."""
    name = statement_name(s, statement)
    program = s.model.program
    form = contraction_form(program, name)
    if isinstance(form, str):
        raise PolycError(f"pack({name}) needs a contraction `T[m, n] += X[m, k] * Y[k, n]` (up to layout, "
                         f"batch loops and scalar factors): {form}")
    if lanes is not None:
        form = contraction_form(program, name, lanes)
        if isinstance(form, str):
            raise ScheduleArgumentError(f"pack({name}): {form}")
    c = form
    tensor = program.tensor(program.statement(name).target.tensor)
    elem = tensor.dtype.bits // 8 if tensor.dtype is not None else 4
    for what, v, most in (("mr", mr, MAX_REGISTER_TILE), ("nv", nv, MAX_REGISTER_TILE), ("kc", kc, MAX_BLOCK),
                          ("mc", mc, MAX_BLOCK), ("nc", nc, MAX_BLOCK)):
        optional_positive_int(v, f"pack({name})'s {what}", most)
    optional_positive_int(vector_bytes, f"pack({name})'s vector_bytes", 256)
    d_mr, d_nv, d_kc, d_mc, d_nc = default_blocking(elem, target, len(c.terms))
    mr, nv, kc = (mr or d_mr), (nv or d_nv), (kc or d_kc)
    vbytes = vector_bytes or _target(target).vector_bytes
    nr = nv * max(1, vbytes // elem)
    # default cache blocks round up to whole register tiles of the mr and nv asked for
    mc, nc = (mc or -(-d_mc // mr) * mr), (nc or -(-d_nc // nr) * nr)
    if mr * nv > MAX_ACCUMULATORS:
        raise ScheduleArgumentError(
            f"pack({name}): a register tile of mr x nv = {mr} x {nv} vectors ({mr * nv} accumulators) cannot "
            f"live in registers; keep mr * nv <= {MAX_ACCUMULATORS} (the defaults use {d_mr} x {d_nv})")
    st_call = step("pack", name, mr=mr, nv=nv, kc=kc, mc=mc, nc=nc, vector_bytes=vbytes, lanes=lanes)
    if mc % mr or nc % nr:
        raise ScheduleArgumentError(f"pack({name}): mc must be a multiple of mr ({mr}) and nc of nv * lanes ({nr})")
    with isl_budget(f"checking {st_call.call_text()}"):
        bounds, nonempty, mask = _box_bounds(s, c)
        _check_order_kept(s, c)
        p = _first_band_dim(s, c)
        if not _prefix_fixes_batch(s, c, p):
            raise BatchLoopsInside(f"pack({name}): the batch loops {', '.join(c.batch)} must be outside the loops "
                             f"{', '.join(c.m + c.n + c.k)} in the schedule")
    taken = set(s.loop_names) | kernel_names(program)
    its = ", ".join(isl_name(i) for i in program.statement(name).iterators)
    if len(c.m) == len(c.n) == len(c.k) == 1:
        # The blocked order itself: n blocks, k blocks, m blocks, n panels, m panels, k, m, n.
        m1, n1, k1 = c.m[0], c.n[0], c.k[0]
        loop_names = [fresh_name(f"{n1}_block", taken), fresh_name(f"{k1}_block", taken), fresh_name(f"{m1}_block", taken),
                      fresh_name(f"{n1}_panel", taken), fresh_name(f"{m1}_panel", taken), fresh_name(f"{k1}_packed", taken),
                      fresh_name(f"{m1}_row", taken), fresh_name(f"{n1}_lane", taken)]
        M, N, K = isl_name(m1), isl_name(n1), isl_name(k1)
        packed = [f"floor({N}/{nc})", f"floor({K}/{kc})", f"floor({M}/{mc})", f"floor({N}/{nr})",
                  f"floor({M}/{mr})", K, M, N]
        origins = [n1, k1, m1, n1, m1, k1, m1, n1]
        m_block = loop_names[2]
    else:
        # Groups of loops run as linear indices blocked in the same way; their blocks are not affine
        # in the loops, so the schedule records the order of the groups (n, k, m) and the proof
        # rests on `_check_order_kept`: only the order of updates per element is observable.
        origins = list(c.n + c.k + c.m)
        loop_names = [fresh_name(f"{x}_packed", taken) for x in origins]
        packed = [isl_name(x) for x in origins]
        m_block = loop_names[len(c.n) + len(c.k)]
    n_old = len(s.dims)
    block = _reusable_block(s, c, p, origins)
    if block is not None:
        # The loops of a contraction packed before, with the same loops by name, and nothing of
        # this statement between them and its own loops: run this one there too, after everything
        # that shares its outer dimensions, instead of inserting dimensions into every map (a chain
        # of packed contractions would otherwise grow the schedule by nine dimensions per product).
        q, names = block
        fixed = s.fixed_positions
        after = 1 + max(v[q] for v in fixed.values() if v[q] is not None)
        prefix = s.statement_map(name).project_out(isl.dim_type.out, q, n_old - q)
        tail = ", ".join([str(after)] + packed + ["0"] * (n_old - q - 1 - len(packed)))
        own = isl.Map(f"{s.model.pstr} -> {{ {isl_name(name)}[{its}] -> [{tail}] }}")
        maps = tuple((sname, prefix.flat_range_product(own).coalesce() if sname == name else m)
                     for sname, m in s.maps)
        plan = PackPlan(c, bounds, nonempty, mr, nv, kc, mc, nc, str(dict(maps)[name]), names,
                        names[loop_names.index(m_block)], mask, vbytes)
        try:
            out = finish(replace(s, maps=maps), st_call, dims=s.dims)
            return _with_plan(s, out, plan)
        except IllegalScheduleError:
            pass  # not there: in new dimensions at the statement's own place
    t = time_vars(n_old)
    dims = list(s.dims[:p]) + [Dim(None)] + [
        Dim(nm, origin=origin) for nm, origin in zip(loop_names, origins)] + list(s.dims[p:])
    first_error = None
    for mine, others in ((1, 0), (0, 1)):
        # Every other statement keeps its dimensions around the new ones (zeros for them).
        exprs = t[:p] + [str(others)] + ["0"] * len(packed) + t[p:]
        around = isl.Map(f"{s.model.pstr} -> {{ [{', '.join(t)}] -> [{', '.join(exprs)}] }}")
        maps = []
        for sname in s.statements:
            old = s.statement_map(sname)
            if sname == name:
                prefix = old.project_out(isl.dim_type.out, p, n_old - p)
                tail = ", ".join([str(mine)] + packed + ["0"] * (n_old - p))
                own = isl.Map(f"{s.model.pstr} -> {{ {isl_name(name)}[{its}] -> [{tail}] }}")
                new = prefix.flat_range_product(own)
            else:
                new = old.apply_range(around)
            maps.append((sname, new.coalesce()))
        plan = PackPlan(c, bounds, nonempty, mr, nv, kc, mc, nc, str(dict(maps)[name]), tuple(loop_names), m_block,
                        mask, vbytes)
        candidate = replace(s, maps=tuple(maps), dims=tuple(dims))
        try:
            out = finish(candidate, st_call, dims=dims)
        except IllegalScheduleError as e:
            first_error = first_error or e
            continue
        return _with_plan(s, out, plan)
    assert first_error is not None
    raise first_error


def _reusable_block(s: Schedule, c: Contraction, p: int, origins) -> Optional[Tuple[int, Tuple[str, ...]]]:
    """(q, loop names) of a packed contraction's block of dimensions (a scalar dimension q, then
    its packed loops) that statement `c.statement` can run in instead of new dimensions: the loops
    come from the same user indices in the same roles (`origins`), the statement sits at constants
    from q up to `p` (its first loop of m, n or k), and the dimensions before q fix its batch
    loops.  None when there is no such block."""
    name = c.statement
    fixed = s.fixed_positions[name]
    for plan in packing_plans(s).values():
        positions = [s.dim_index(nm) for nm in plan.loops]
        q = positions[0] - 1
        if positions != list(range(q + 1, q + 1 + len(positions))) or q < 0 or s.dims[q].name is not None:
            continue
        if [s.dims[k].origin for k in positions] != list(origins) or positions[-1] >= p:
            continue
        if any(v is None for v in fixed[q:p]) or not _prefix_fixes_batch(s, c, q):
            continue
        return q, tuple(plan.loops)
    return None


def _with_plan(before: Schedule, after: Schedule, plan: PackPlan) -> Schedule:
    """`after` (a pack of `before`) with `plan` recorded.  Plans of statements packed earlier stay
    valid: their maps changed only by the constant dimensions this pack inserted (zeros in the new
    loops), so their packed code is the same; their `map_text` follows (without that, packing a
    second contraction silently unpacked the first: `packing_plans` compares the map)."""
    valid = packing_plans(before)
    kept = tuple(replace(pl, map_text=after.map_text(pl.statement)) if valid.get(pl.statement) is pl else pl
                 for pl in after.packing if pl.statement != plan.statement)
    return replace(after, packing=kept + (plan,))


def packing_plans(s: Schedule) -> Dict[str, PackPlan]:
    """The packed contractions of `s` that are still valid (the statement's map is unchanged)."""
    return s.valid_packing()  # type: ignore[return-value]
