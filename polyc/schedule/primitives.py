"""Loop primitives on a `Schedule`: each returns a new, re-proved Schedule (see `rewrite.finish`).

Naming rules (loops are addressed by these names afterwards):

- `tile(i=32, j=32)` and `split("i", 32)`: the loop `i` becomes the tile loop `i_outer`
  (`floor(i / 32)`) and the point loop `i_inner` (the original values of `i`, so statement
  subscripts read unchanged).  Tile loops are placed, in the order of the named loops, just
  outside the outermost named loop; point loops stay where the loops were.  Marks follow the
  work: `parallel`/reduction/`block` go to the tile loop, `vector`/`thread`/unroll stay on the
  point loop.
- `interchange`, `reorder`, `skew`, `reverse`, `shift` keep loop names (a skewed `j` still
  iterates under the name `j`, now running over `j + f*i`).
- `unroll_and_jam("i", 4)` splits `i` into `i_outer` and `i_inner`, moves `i_inner` innermost and
  unrolls it fully.
"""
from __future__ import annotations

from dataclasses import replace
from typing import List, Mapping, Optional, Sequence, Tuple, Union

import islpy as isl

from ..errors import PolycError, ScheduleArgumentError
from ..poly.islutil import isl_budget
from .legality import check_parallel
from .rewrite import (MAX_FULL_UNROLL, Step, check_new_names, dependences_of, finish,
                      is_reduction_dependence, loop_index, remap, statement_name, statement_varies, step,
                      time_vars, trip_count_bound)
from .integers import MAX_UNROLL_FACTOR, positive_int, schedule_int
from .schedule import Dim, Schedule

#: Marks that move to the tile loop when a loop is tiled/split (the rest stay on the point loop).
_OUTER_MARKS = frozenset({"parallel", "reduction_parallel", "block"})


def _tile(s: Schedule, sizes: Sequence[Tuple[str, int]], st: Step,
          names: Optional[Mapping[str, Tuple[str, str]]] = None) -> Schedule:
    """Strip-mine the loops in `sizes` and put their tile loops outside the outermost of them."""
    if not sizes:
        raise PolycError(f"tile needs at least one loop and size, e.g. tile(i=32); "
                         f"loops: {', '.join(s.loop_names)}")
    positions = {}
    for loop, size in sizes:
        k = loop_index(s, loop)
        if not s.dims[k].is_loop:
            raise PolycError(f"{loop!r} is not a loop")
        if k in positions:
            raise PolycError(f"loop {loop!r} named twice in {st.call_text()}")
        positions[k] = positive_int(size, f"the tile size of {loop!r}")
    order = sorted(positions)
    names = dict(names or {})
    outer_inner = {k: names.get(s.dims[k].name, (f"{s.dims[k].name}_outer", f"{s.dims[k].name}_inner"))
                   for k in order}
    check_new_names(s, [n for k in order for n in outer_inner[k] if n != s.dims[k].name],
                    replacing=[s.dims[k].name for k in order])
    t = time_vars(len(s.dims))
    exprs: List[str] = []
    dims: List[Dim] = []
    for k, d in enumerate(s.dims):
        if k == order[0]:
            for j in order:
                dj = s.dims[j]
                exprs.append(f"floor({t[j]}/{positions[j]})")
                dims.append(Dim(outer_inner[j][0], marks=dj.marks & _OUTER_MARKS, origin=dj.origin))
        exprs.append(t[k])
        if k in positions:
            dims.append(replace(d, name=outer_inner[k][1], marks=d.marks - _OUTER_MARKS))
        else:
            dims.append(d)
    return finish(s, st, maps=remap(s, exprs), dims=dims)


def tile(s: Schedule, sizes: Optional[Mapping[str, int]] = None, /, **kw_sizes: int) -> Schedule:
    """Rectangular tiling: `tile(i=32, j=32)` (or `tile({"i": 32, "j": 32})`)."""
    if sizes is not None and not isinstance(sizes, Mapping):
        raise ScheduleArgumentError(f"tile takes loop sizes as keywords (tile(i=32)) or a dict, not {sizes!r}",
                                    "sizes")
    all_sizes = dict(sizes or {})
    all_sizes.update(kw_sizes)
    return _tile(s, list(all_sizes.items()), step("tile", **all_sizes))


def split(s: Schedule, loop: str, factor: int, outer: Optional[str] = None,
          inner: Optional[str] = None) -> Schedule:
    """Strip-mine one loop: `loop` -> `{loop}_outer` (floor(loop/factor)), `{loop}_inner` (loop)."""
    positive_int(factor, "the split factor")
    names = {loop: (outer or f"{loop}_outer", inner or f"{loop}_inner")}
    return _tile(s, [(loop, factor)], step("split", loop, factor, outer=outer, inner=inner), names)


def reorder(s: Schedule, *loops: str, _step: Optional[Step] = None) -> Schedule:
    """Permute the named loops among their own positions: `reorder("k", "i", "j")` puts `k` where
    the outermost of the three was, then `i`, then `j`.  Scalar dimensions stay in place."""
    st = _step or step("reorder", *loops)
    if len(loops) < 2:
        raise PolycError(f"{st.call_text()} needs at least two loops")
    ks = [loop_index(s, l) for l in loops]
    if len(set(ks)) != len(ks):
        raise PolycError(f"{st.call_text()} names a loop twice")
    slots = sorted(ks)
    perm = list(range(len(s.dims)))
    for slot, k in zip(slots, ks):
        perm[slot] = k
    t = time_vars(len(s.dims))
    dims = [s.dims[perm[k]] for k in range(len(s.dims))]
    return finish(s, st, maps=remap(s, [t[perm[k]] for k in range(len(s.dims))]), dims=dims)


def interchange(s: Schedule, a: str, b: str) -> Schedule:
    """Swap loops `a` and `b`."""
    return reorder(s, b, a, _step=step("interchange", a, b)) if loop_index(s, a) < loop_index(s, b) \
        else reorder(s, a, b, _step=step("interchange", a, b))


def skew(s: Schedule, loop: str, by_loop: str, factor: int = 1) -> Schedule:
    """`loop += factor * by_loop` (the classic wavefront enabler for stencils)."""
    k, j = loop_index(s, loop), loop_index(s, by_loop)
    if k == j:
        raise PolycError("skew needs two different loops")
    schedule_int(factor, "the skew factor", nonzero=True)
    t = time_vars(len(s.dims))
    exprs = list(t)
    exprs[k] = f"{t[k]} + {factor}*{t[j]}"
    return finish(s, step("skew", loop, by_loop, factor), maps=remap(s, exprs))


def reverse(s: Schedule, loop: str) -> Schedule:
    """Run `loop` from its last iteration to its first."""
    k = loop_index(s, loop)
    t = time_vars(len(s.dims))
    exprs = list(t)
    exprs[k] = f"-{t[k]}"
    return finish(s, step("reverse", loop), maps=remap(s, exprs))


def shift(s: Schedule, statement: Union[str, int], loop: str, amount: int) -> Schedule:
    """Shift one statement's instances along `loop` by `amount` iterations (retiming)."""
    name = statement_name(s, statement)
    k = loop_index(s, loop)
    schedule_int(amount, "the shift amount")
    t = time_vars(len(s.dims))
    exprs = list(t)
    exprs[k] = f"{t[k]} + {amount}"
    return finish(s, step("shift", statement, loop, amount), maps=remap(s, per_statement={name: exprs}))


# -- marks -------------------------------------------------------------------------------------

def _marked(s: Schedule, loop: str, mark: str, st: Step, **dim_changes) -> Schedule:
    k = loop_index(s, loop)
    dims = list(s.dims)
    dims[k] = replace(dims[k], marks=dims[k].marks | {mark}, **dim_changes)
    return finish(s, st, dims=dims, marking=loop)


def parallel(s: Schedule, loop: str, reduction: bool = False) -> Schedule:
    """Run the iterations of `loop` in parallel (OpenMP).  Illegal when `loop` carries a dependence.

    `reduction=True` also accepts a loop whose only carried dependences are those of a reduction
    (`X[..] += f(..)` with f not reading X, likewise `*=`, max, min): the updates are then emitted
    as atomic (or critical) updates.  Reassociating a floating-point reduction changes rounding.
    """
    st = step("parallel", loop, reduction=True if reduction else None)
    if not reduction:
        return _marked(s, loop, "parallel", st)
    deps = dependences_of(s.model)
    loop_index(s, loop)
    with isl_budget(f"checking {st.call_text()}"):
        check_parallel(s, deps, loop, st.call_text(), ignore=lambda d: is_reduction_dependence(s.model, d))
        from .legality import carried_at
        needs_reduction = bool(carried_at(s, deps, s.dim_index(loop)))
    return _marked(s, loop, "reduction_parallel" if needs_reduction else "parallel", st)


def parallel_reduction(s: Schedule, loop: str) -> Schedule:
    """Same as `parallel(loop, reduction=True)`."""
    return parallel(s, loop, reduction=True)


def vectorize(s: Schedule, loop: str, reduction: bool = False) -> Schedule:
    """Run the innermost loop `loop` as SIMD lanes (`omp simd`); needs no carried dependence.

    `reduction=True` also accepts a loop whose only carried dependences are a reduction's updates
    of one element (`y[i] += A[i, j] * x[j]` along j; likewise `*`, max, min): the element lives in
    a scalar accumulator for the loop, reduced across lanes (`omp simd reduction`).  This
    reassociates the reduction: a float result differs from the written order by rounding
    (relative error about `n * eps` for `n` terms); max/min keep numpy's NaN propagation."""
    st = step("vectorize", loop, reduction=True if reduction else None)
    if not reduction:
        return _marked(s, loop, "vector", st)
    deps = dependences_of(s.model)
    k = loop_index(s, loop)
    from .legality import carried_at
    with isl_budget(f"checking {st.call_text()}"):
        needs_reduction = bool(carried_at(s, deps, k))
    return _marked(s, loop, "reduction_vector" if needs_reduction else "vector", st)


def unroll(s: Schedule, loop: str, factor: Optional[int] = None) -> Schedule:
    """Unroll `loop`: fully (`factor=None`; isl writes out every iteration, so the trip count must
    be a small constant, e.g. a point loop after `split`), or by `factor` (a `#pragma GCC unroll`
    hint to the C compiler).  Reordering nothing, it is always legal."""
    k = loop_index(s, loop)
    if factor is None:
        bound = trip_count_bound(s, k)
        if bound is None or bound > MAX_FULL_UNROLL:
            size = "grows with the sizes" if bound is None else f"has up to {bound} iterations"
            raise PolycError(f"cannot fully unroll loop {loop!r}: its trip count {size}; split it first "
                             f"(split({loop!r}, 4) then unroll({loop + '_inner'!r})), or unroll by a factor")
        return _marked(s, loop, "unroll", step("unroll", loop), unroll=-1)
    f = positive_int(factor, "the unroll factor", MAX_UNROLL_FACTOR)
    return _marked(s, loop, "unroll", step("unroll", loop, factor=f), unroll=f)


def unroll_and_jam(s: Schedule, loop: str, factor: int, separate: bool = False) -> Schedule:
    """Split `loop` by `factor`, move the point loop `{loop}_inner` innermost and unroll it fully:
    `factor` consecutive iterations of `loop` are jammed into one copy of the inner loops.

    `separate=True` runs the last, partial group of iterations after the full ones (an ordering
    dimension just outside `{loop}_outer`, computed exactly by isl), so the jammed copies of full
    groups carry no guards and stay vectorisable."""
    positive_int(factor, "the unroll-and-jam factor", MAX_UNROLL_FACTOR)
    st = step("unroll_and_jam", loop, factor, separate=True if separate else None)
    split_s = split(s, loop, factor)
    inner = f"{loop}_inner"
    k = split_s.dim_index(inner)
    last_loop = max((j for j, d in enumerate(split_s.dims) if d.is_loop and j != k), default=-1)
    n = len(split_s.dims)
    order = list(range(n))
    if last_loop > k:  # move the point loop just inside the innermost other loop
        order.remove(k)
        order.insert(order.index(last_loop) + 1, k)
    t = time_vars(n)
    dims = [split_s.dims[j] for j in order]
    dims[order.index(k)] = replace(split_s.dims[k], marks=split_s.dims[k].marks | {"unroll"}, unroll=-1)
    moved = replace(split_s, maps=remap(split_s, [t[j] for j in order]), dims=tuple(dims))
    if separate:
        outer_pos = split_s.dim_index(f"{loop}_outer")
        moved = _separate_partial_groups(s, moved, loop_index(s, loop), outer_pos, factor)
    # Record one step for the whole primitive (the split is part of it).
    base = replace(moved, history=s.history, steps=s.steps)
    return finish(base, st)


def _separate_partial_groups(s: Schedule, moved: Schedule, k: int, pos: int, factor: int) -> Schedule:
    """`moved` with a scalar dimension inserted at `pos`: 0 for instances whose group of `factor`
    iterations of loop dimension `k` (of `s`) is complete, 1 for the rest."""
    n = len(s.dims)
    t = time_vars(k + 1)
    head = ", ".join(t)
    to_group = isl.Map(f"{s.model.pstr} -> {{ [{head}] -> [{', '.join(t[:k] + ['g0'])}] : "
                       f"{factor}g0 <= {t[k]} < {factor}g0 + {factor} }}")
    def at(m: isl.Map, value: int) -> isl.Map:
        return m.fix_val(isl.dim_type.out, pos, isl.Val.int_from_si(m.get_ctx(), value))

    maps = []
    with isl_budget(f"separating the partial groups of loop {s.dims[k].name!r}"):
        for name, text in moved.maps:
            new = isl.Map(text).insert_dims(isl.dim_type.out, pos, 1)
            if not statement_varies(s, name, k):
                maps.append((name, str(at(new, 0))))
                continue
            dom = s.model.domains[name]
            prefix = s.statement_map(name).intersect_domain(dom).project_out(isl.dim_type.out, k + 1, n - k - 1)
            points = prefix.range()
            groups = points.apply(to_group)
            missing = points.complement().apply(to_group).intersect(groups)
            full = prefix.apply_range(to_group).intersect_range(groups.subtract(missing)).domain()
            rest = dom.subtract(full)
            both = at(new.intersect_domain(full), 0).union(at(new.intersect_domain(rest), 1))
            maps.append((name, str(both.coalesce())))
    dims = list(moved.dims)
    dims.insert(pos, Dim(None))
    return replace(moved, maps=tuple(maps), dims=tuple(dims))


# -- GPU mapping (implemented in polyc.schedule.gpu) ---------------------------------------------

def map_to_blocks(s: Schedule, *loops: str) -> Schedule:
    from . import gpu
    return _recorded(s, gpu.map_to_blocks(s, *loops), step("map_to_blocks", *loops))


def map_to_threads(s: Schedule, *loops: str) -> Schedule:
    from . import gpu
    return _recorded(s, gpu.map_to_threads(s, *loops), step("map_to_threads", *loops))


def _recorded(old: Schedule, new: Schedule, st: Step) -> Schedule:
    """`new` with its history replaced by old's history plus the one step `st` (serialisable)."""
    return replace(new, history=old.history + (st.call_text(),), steps=old.steps + (st,))
