"""`schedule="auto"`: an automatic, proven-legal schedule (Pluto/isl tradition).

1. isl's scheduler (validity = proximity = coincidence = all exact dependences) finds permutable
   bands of affine loops, skewed where needed so stencil time loops can be tiled, with coincident
   (parallel) members marked.  It runs with `serialize_sccs` (maximal distribution of strongly
   connected components): every band it returns is then a clean nest, and fusion is left where
   the dependences force it (a time loop and its statements).
2. Each band is decided (see `auto_decide`): permutable bands of two or more loops are tiled with
   sizes from a cache model; tile loops put parallel members outermost, or run as a wavefront
   (sum of the first two tile loops) when no member is parallel (time tiling); point loops put the
   best unit-stride parallel loop innermost, or keep the original loop order inside skewed tiles.
3. The tree is flattened into a `Schedule` (named dimensions, one map per statement); then
   `check_legal` proves the whole schedule, and every mark is proven with `check_parallel`: the
   outermost loop that carries no dependence (and is worth it) becomes "parallel", a statement's
   innermost loop that carries none and touches memory with unit stride becomes "vector".
   Before the marks, statements left walking columns are turned to walk rows where proven
   (`auto_stride.row_walking`: distribute, interchange, one set of loop dimensions per nest;
   `auto_stride.commuted_rows`: integer max/min updates, whose order is free, swap their loops;
   `auto_stride.recurrence_lanes`: recurrences inside a free loop run side by side as SIMD lanes).
Any failure (isl budget exceeded, an unexpected tree, an unproven step) falls back to a simpler
variant and finally to source order with proven parallel marks, with a warning; never a hang.

Compile time is bounded by construction: tile sizes are searched exhaustively only for bands of up
to four loops and locally beyond (`auto_cost.tile_sizes`), and legality questions are memoised
(`legality`).  A deadline (`AUTO_DEADLINE`, `POLYC_AUTO_DEADLINE`, or `deadline=`; seconds of
this process's CPU time, see `auto_cost.SearchBudget`) is the guard behind that: once it has passed, every search keeps the best it has found (tile sizes
chosen so far, marks and packings proven so far) and the rest is skipped, with one debug log line.
"""
from __future__ import annotations

import logging
import os
import warnings
import weakref
from dataclasses import dataclass, replace
from typing import Dict, Mapping, Optional, Set, Tuple

import islpy as isl

from ..errors import IllegalScheduleError, IslBudgetError, PolycError
from ..poly import islutil
from ..poly.dependences import Dependences
from ..target import Target
from .auto_cost import SearchBudget, all_unit_or_invariant
from .auto_decide import Decider, DecideOptions
from .auto_fuse import fuse_memory_bound
from .auto_jam import jam_reductions, packable_statements, split_reduction_chains
from .auto_loops import accumulates_inside, real_loops
from .auto_reduce import direction_of as _direction_of
from .auto_size import pack_lanes, pack_pays, worth_parallel, worth_vector
from .auto_split import split_pinned_loops
from .auto_stride import commuted_rows, recurrence_lanes, row_walking
from .auto_sweep import jammed_sweeps
from .auto_tree import UnsupportedTree, flatten, is_constant, tree_from_isl
from .legality import check_legal, check_mark, with_proven_dims
from . import saved_auto, serialize
from .schedule import LoopKind, Schedule

#: isl operations the scheduler itself may use (the proofs run under the default budget).
SCHEDULER_BUDGET = 8_000_000

#: Seconds `schedule="auto"` may spend searching before it settles for the best found so far
#: (`POLYC_AUTO_DEADLINE` overrides; 0 or a negative value: no deadline).
AUTO_DEADLINE = 2.0

log = logging.getLogger("polyc.schedule.auto")


def _deadline_seconds(deadline: Optional[float]) -> Optional[float]:
    """The deadline in seconds (None: no deadline) from the argument, the environment or the default."""
    if deadline is None:
        text = os.environ.get("POLYC_AUTO_DEADLINE")
        try:
            deadline = float(text) if text else AUTO_DEADLINE
        except ValueError:
            deadline = AUTO_DEADLINE
    return deadline if deadline > 0 and deadline != float("inf") else None


#: The search budget of the latest `auto_schedule` call (its counters, for tests and debugging).
last_search: Optional[SearchBudget] = None

_ISL_OPTIONS = {
    "serialize_sccs": 1,
    "outer_coincidence": 0,
    "maximize_band_depth": 0,
    "treat_coalescing": 1,
    "whole_component": 0,
}


class AutoScheduleWarning(UserWarning):
    """The automatic scheduler fell back to a simpler schedule (the result is still legal)."""


#: isl's schedule per model and budget: a size-specialised variant reuses it (`auto_schedule(sizes=)`).
_ISL_SCHEDULES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def isl_schedule(model, deps: Dependences, budget: Optional[int] = None) -> isl.Schedule:
    """isl's schedule for `model` under an operation budget (raises IslBudgetError beyond it);
    computed once per model and budget."""
    try:
        memo = _ISL_SCHEDULES.setdefault(model, {})
    except TypeError:  # a model that cannot be weakly referenced: no memo
        memo = {}
    key = (budget, islutil.DEFAULT_BUDGET)
    if key not in memo:
        memo[key] = _compute_isl_schedule(model, deps, budget)
    return memo[key]


def _compute_isl_schedule(model, deps: Dependences, budget: Optional[int] = None) -> isl.Schedule:
    ctx = isl.DEFAULT_CONTEXT
    domain = model.domain.intersect_params(model.context)
    umap = deps.union_map().intersect_params(model.context)
    previous = {k: getattr(ctx, f"get_schedule_{k}")() for k in _ISL_OPTIONS}
    try:
        for k, v in _ISL_OPTIONS.items():
            getattr(ctx, f"set_schedule_{k}")(v)
        limit = SCHEDULER_BUDGET if budget is None else budget
        limit = min(limit, islutil.DEFAULT_BUDGET) if islutil.DEFAULT_BUDGET else limit
        with islutil.isl_budget(f"scheduling {model.program.name} automatically", limit):
            sc = (isl.ScheduleConstraints.on_domain(domain).set_validity(umap)
                  .set_proximity(umap).set_coincidence(umap))
            return sc.compute_schedule()
    finally:
        for k, v in previous.items():
            getattr(ctx, f"set_schedule_{k}")(v)


#: Unroll-and-jam factor for register blocking of contractions.
JAM = 4


#: What the scheduler requires of the C code generator, and relies on: each parallel loop body runs
#: in a helper whose array parameters are `restrict` (polyc.codegen.c does so; its
#: `PARALLEL_LOOPS_KEEP_RESTRICT` states it).  OpenMP outlines a `#pragma omp parallel for` body into
#: a function that receives the arrays through a struct, so without the helper gcc would lose the
#: no-alias facts there, and register blocking (several updates of one target element per vector)
#: would cost more than it saves.  A fact the scheduler owns, so it never reaches into codegen.
PARALLEL_LOOPS_KEEP_RESTRICT = True


def codegen_keeps_restrict() -> bool:
    """Whether parallel loop bodies keep `restrict` in the generated C (`PARALLEL_LOOPS_KEEP_RESTRICT`)."""
    return PARALLEL_LOOPS_KEEP_RESTRICT


@dataclass(frozen=True)
class AutoRequest:
    """How an automatic schedule was asked for (its `auto_schedule` arguments), kept on the
    schedule as option "auto_request" so the C runtime can decide it again for a call's size
    class (`specialised`).  `history` is the schedule's history when it was made: a schedule
    transformed afterwards (a longer history) is the user's, and is never re-decided."""

    target: Target
    tile: bool
    budget: Optional[int]
    tile_sizes: Tuple[Tuple[str, int], ...]
    register_blocking: Optional[bool]
    pack: bool
    jam_rows: Optional[bool]
    deadline: Optional[float]
    reassociate: Optional[bool]
    history: Tuple[str, ...] = ()

    def applies_to(self, schedule: Schedule) -> bool:
        """Whether `schedule` is still the automatic one this request made."""
        return tuple(schedule.history) == self.history


def specialised(kernel, schedule: Schedule, sizes: Mapping[str, int]) -> Schedule:
    """The automatic schedule of `kernel` decided again for a call's `sizes` (`auto_size`: no
    parallel loop whose entries do too little work, no time tiling of a working set that fits in
    cache); `schedule` itself when it was not made by `auto_schedule` or was transformed since."""
    request = schedule.auto_request
    if not isinstance(request, AutoRequest) or not request.applies_to(schedule):
        return schedule
    return auto_schedule(kernel, request.target, tile=request.tile, budget=request.budget,
                         tile_sizes=dict(request.tile_sizes) or None, register_blocking=request.register_blocking,
                         pack=request.pack, jam_rows=request.jam_rows, deadline=request.deadline,
                         reassociate=request.reassociate, sizes=sizes)


def auto_schedule(kernel, target: Optional[Target] = None, *, tile: bool = True, budget: Optional[int] = None,
                  tile_sizes: Optional[Dict[str, int]] = None,
                  register_blocking: Optional[bool] = None, pack: bool = True,
                  jam_rows: Optional[bool] = None, deadline: Optional[float] = None,
                  reassociate: Optional[bool] = None, sizes: Optional[Mapping[str, int]] = None) -> Schedule:
    """A legal, optimised schedule for `kernel` on `target` (see the module docstring).

    `target`: a `polyc.Target` (default `Target.host()`; the strings "c", "cuda", "cuda-emu" are
    read as `Target.resolve` does).  Every machine fact (cache sizes, cores, SIMD width) comes
    from it, so the same Target gives the same schedule on any machine; the result records it
    (`schedule.target`, saved by `to_json`).
    `budget`: isl operations the scheduler may spend (default `SCHEDULER_BUDGET`, never more than
    `POLYC_ISL_BUDGET`); beyond it the result is the source order with proven parallel marks and
    an `AutoScheduleWarning`.  `tile=False` skips tiling; `tile_sizes` overrides the cache model
    per loop name; `register_blocking` (default: `codegen_keeps_restrict()`) unrolls-and-jams a
    reduction loop of contractions into the SIMD loop; `pack=False` leaves matmul-like statements
    to the tiled loops instead of packed BLAS-style code (`Schedule.pack`); `jam_rows` runs rows of
    reduction chains side by side (`jam_reductions`): by default every ordered chain (loop kernels,
    `reassociate=False`: atax and bicg at LARGE 2.3-2.5x faster) and reassociated chains whose
    row loop holds nothing else (matvec, row sums; see `_jam_mode`); True: every chain; False: none.
    `deadline`: seconds of searching, counted after isl's scheduler, after which the best schedule
    found so far is kept (default `AUTO_DEADLINE`; 0: none).

    `reassociate`: whether reductions may be reassociated (vector accumulators, OpenMP reduction
    clauses; see `reduction_marks`).  Default: yes for Einstein reductions (`+=!`, `*=!`, `max=!`,
    `min=!` are unordered by definition), no for loop kernels, which keep Python's order unless
    `reassociate=True`.  `False` keeps the written order of every reduction exactly.

    `sizes`: the sizes of the calls the schedule is for (a size class; see `auto_size`): parallel
    loops only where an entry does enough work, time tiling only past the cache.  Without them
    the schedule serves every size.  The result carries its `AutoRequest` (option
    "auto_request"), so a size-specialising runtime can call `specialised` per size class.
    """
    global last_search
    target = Target.resolve(target)
    search = last_search = SearchBudget(_deadline_seconds(deadline))
    request = AutoRequest(target, tile, budget, tuple(sorted((tile_sizes or {}).items())), register_blocking,
                          pack, jam_rows, deadline, reassociate)
    try:
        mode = reassociate_default(kernel.model.program, reassociate)
        sched = _auto_schedule(kernel, target, tile, budget, tile_sizes, register_blocking, pack,
                               _jam_mode(jam_rows, mode), search, mode, dict(sizes) if sizes else None)
        request = replace(request, history=tuple(sched.history))
        return replace(sched, target=target, auto_request=request)
    finally:
        if search.expired_at is not None:
            log.debug("schedule='auto' for %s: the %.3g s deadline passed during %s; kept the best found so "
                      "far (%d tile-size candidates evaluated)", kernel.model.program.name, search.seconds,
                      search.expired_at, search.candidates)


def _auto_schedule(kernel, target: Target, tile: bool, budget: Optional[int], tile_sizes, register_blocking,
                   pack: bool, jam_rows: str, search: SearchBudget, reassociate: str = "none",
                   sizes: Optional[Dict[str, int]] = None) -> Schedule:
    model = kernel.model
    deps = kernel.dependences() if hasattr(kernel, "dependences") else Dependences(model)
    try:
        tree = tree_from_isl(isl_schedule(model, deps, budget), model)
    except (IslBudgetError, UnsupportedTree, PolycError) as e:
        return fallback_schedule(kernel, deps, f"isl's scheduler gave no usable answer ({e})", pack, search,
                                 reassociate, target, sizes)
    # isl's scheduler took 2.4 s of a 2 s deadline for heat-3d on a slower machine, and the marks
    # were skipped (scalar, serial code, 0.54x the source order): the deadline bounds what follows.
    search.restart()
    cpu = target.is_cpu
    if register_blocking is None:
        register_blocking = codegen_keeps_restrict()
    jam = JAM if (register_blocking and cpu and tile) else 0
    variants = [DecideOptions(tile=tile and cpu, wavefront=cpu, fuse=cpu, jam=jam, stride_order=cpu,
                              tile_sizes=tile_sizes)]
    if jam:
        variants.append(DecideOptions(tile=True, wavefront=True, fuse=True, tile_sizes=tile_sizes))
    if cpu:
        variants.append(DecideOptions(tile=tile, wavefront=True, fuse=False, tile_sizes=tile_sizes))
    if tile and cpu:
        variants.append(DecideOptions(tile=False, wavefront=False, fuse=False))
    reasons = []
    for index, opts in enumerate(variants):
        if index and index < len(variants) - 1 and search.expired("the fallback variants"):
            continue  # out of time: straight to the simplest variant
        try:
            start = fuse_memory_bound(tree, model, deps) if opts.fuse else tree
            decided = Decider(model, opts, target, search, sizes).decide(start)
            note = "auto(" + ", ".join(opts.describe()) + ")"
            sched = flatten(model, decided, history=(note,))
            check_legal(sched, deps, "the automatic schedule")
            if cpu:
                if not search.expired("turning column walks into row walks"):
                    sched = commuted_rows(row_walking(sched, Schedule.source_order(model), deps))
                if not search.expired("running independent recurrences side by side"):
                    sched = recurrence_lanes(sched, deps)
                if not search.expired("running the rows of in-place sweeps together"):
                    sched = jammed_sweeps(sched, deps)
                sched = split_pinned_loops(sched, add_marks(sched, deps, search, reassociate, sizes), deps,
                                           lambda s: add_marks(s, deps, search, reassociate, sizes),
                                           markable_loops, search)
                if jam_rows != "none" and not search.expired("jamming reduction rows"):
                    # Before packing, whose plans would not survive a later change of the loops;
                    # the statements packing will take are left to it.
                    skip = packable_statements(model.program) if pack else ()
                    sched = (jam_reductions(split_reduction_chains(sched), skip=skip) if jam_rows == "all"
                             else jam_reductions(sched, skip=skip, lone_only=True))
                if pack:
                    sched = pack_contractions(sched, deps, search, target, sizes)
            return sched
        except (IllegalScheduleError, IslBudgetError, UnsupportedTree, PolycError) as e:
            reasons.append(str(e).splitlines()[0])
    return fallback_schedule(kernel, deps, "; ".join(reasons), pack, search, reassociate, target, sizes)


def _jam_mode(jam_rows: Optional[bool], reassociate: str) -> str:
    """Which reduction chains `jam_reductions` runs side by side: "all" (`jam_rows=True`, and by
    default where reductions keep their written order: a scalar chain runs one add per latency),
    "lone" (by default where reductions are reassociated: rows whose loop holds nothing but
    reductions, each row one vector accumulator: matvec 2048² 0.83 -> 0.54 ms, row sums 1.4x) or
    "none" (`jam_rows=False`)."""
    if jam_rows is None:
        return "all" if reassociate == "none" else "lone"
    return "all" if jam_rows else "none"


def reassociate_default(program, reassociate: Optional[bool]) -> str:
    """Which reductions `schedule="auto"` may reassociate: "einstein" (statements with reduction
    axes), "all" (every reduction update, asked for with `reassociate=True`) or "none"."""
    if reassociate is None:
        return "einstein" if program.frontend == "einsum" else "none"  # loop kernels keep their order
    if not isinstance(reassociate, bool):
        raise PolycError(f"reassociate must be True, False or None, not {reassociate!r}")
    return "all" if reassociate else "none"


# -- marks ---------------------------------------------------------------------------------------

def markable_loops(schedule: Schedule) -> Set[str]:
    """The loops `add_marks` would consider in the marked `schedule`, were they free of
    dependences: a loop innermost in every statement in it (a vector loop), or one with no parallel
    loop around or inside it in any of its statements."""
    _, loops_of = real_loops(schedule)
    out = set()
    for p, d in enumerate(schedule.dims):
        users = [s for s, ps in loops_of.items() if p in ps]
        if d.name is None or not users:
            continue
        if all(loops_of[s][-1] == p for s in users) or \
                not any(LoopKind.PARALLEL in schedule.dims[q].kinds for s in users for q in loops_of[s]):
            out.add(d.name)
    return out


def add_marks(schedule: Schedule, deps: Dependences, search: Optional[SearchBudget] = None,
              reassociate: str = "none", sizes: Optional[Mapping[str, int]] = None) -> Schedule:
    """Mark proven-parallel loops "parallel" (outermost worth it) and innermost ones "vector".

    With a code generator that loses `restrict` inside parallel loops (`codegen_keeps_restrict`
    false), a loop whose body accumulates along its innermost loop (`y[i] += ...` over j) stays
    sequential: the lost register promotion would cost more than a second core gains.

    Fully unrolled dimensions (register-blocking lanes) are not loops in the generated code: they
    are never marked and do not count when looking for a statement's innermost loop.  Past the
    `search` deadline no further loop is tried (the marks proven so far stay).  With the call's
    `sizes`, a loop whose entries do too little work to pay for a fork/join is not made parallel
    (`auto_size.worth_parallel`)."""
    cols, loops_of = real_loops(schedule)
    keeps_restrict = codegen_keeps_restrict()
    dims = list(schedule.dims)
    statements = list(loops_of)
    has_parallel = {s: False for s in statements}
    model = schedule.model
    for p, d in enumerate(dims):
        if d.name is None:
            continue
        if search is not None and search.expired("marking parallel loops"):
            break
        users = [s for s in statements if p in loops_of[s]]
        if not users or any(has_parallel[s] for s in users):
            continue
        outermost = all(loops_of[s][0] == p for s in users)
        has_inner = any(loops_of[s][-1] != p for s in users)
        if not (outermost or has_inner):
            continue
        if not keeps_restrict and any(accumulates_inside(model, s, cols, loops_of[s]) for s in users
                                      if loops_of[s][-1] != p):
            continue
        if not worth_parallel(schedule, users, p, loops_of, sizes):
            continue
        if _proves(schedule, _touching(deps, cols, p), d.name, "parallel"):
            dims[p] = d.with_kind(LoopKind.PARALLEL)
            for s in users:
                has_parallel[s] = True
    for p, d in enumerate(dims):
        if d.name is None or LoopKind.PARALLEL in dims[p].kinds or not d.unroll.is_none:
            continue
        if search is not None and search.expired("marking vector loops"):
            break
        users = [s for s in statements if p in loops_of[s]]
        if not users or not all(loops_of[s][-1] == p for s in users) or not worth_vector(schedule, p):
            continue
        if not all(all_unit_or_invariant(model.program, s, _direction_of(model, s, cols, loops_of[s], p))
                   for s in users):
            continue
        if _proves(schedule, _touching(deps, cols, p), d.name, "vector"):
            dims[p] = dims[p].with_kind(LoopKind.VECTORIZED)
    if reassociate != "none":
        from .auto_reduce import reduction_marks
        dims = reduction_marks(schedule, dims, deps, cols, loops_of, has_parallel, reassociate, search, sizes)
    marked = [f"{m}({d.name})" for d in dims for m in sorted(d.labels()) if m != "unroll"]
    # Every mark chosen above is proven once more on the whole kernel, through the one path.
    return with_proven_dims(schedule, dims, ".".join(marked), deps) if marked else schedule


def _touching(deps: Dependences, cols, p: int) -> list:
    """The dependences that can be carried at position `p`: those with an end whose value there is
    not the constant 0 (pairs where both ends sit at 0 never differ at `p`)."""
    moving = set()
    for name, col in cols.items():
        pa = col.get(p)
        if pa is None:
            continue
        if not is_constant(pa) or any(not aff.get_constant_val().is_zero() for _, aff in pa.get_pieces()):
            moving.add(name)
    return [d for d in deps if d.source in moving or d.sink in moving]


def _proves(schedule: Schedule, deps, loop: str, mark: str) -> bool:
    """Whether `mark` on `loop` is proven (`legality.check_mark`) against `deps`, a subset of the
    kernel's dependences that holds every one the loop could carry (`_touching`)."""
    try:
        marked = schedule.with_mark(loop, LoopKind(mark), "")
        check_mark(marked, deps, loop, f"marking loop {loop!r} {mark} automatically")
        return True
    except (IllegalScheduleError, IslBudgetError, PolycError):
        return False


# -- packed contractions ---------------------------------------------------------------------------

def pack_contractions(schedule: Schedule, deps: Dependences, search: Optional[SearchBudget] = None,
                      target: Optional[Target] = None, sizes: Optional[Mapping[str, int]] = None) -> Schedule:
    """Run every matmul-like statement that `Schedule.pack` can prove as packed BLAS-style code
    (blocked for `target`, default `Target.host()`), its m-block loop parallel (proven) when the
    target has several cores and no enclosing loop of the
    statement is parallel already.  Statements are recognised from their access relations
    (`packing.contraction_form`); one that cannot be packed keeps its schedule.

    Packing needs the batch loops outside the contraction's loops; where the scheduler tiled them
    into one band and every other statement only initialises (reads no array), the statement is
    packed from the source order instead (with its proven parallel marks).  Past the `search`
    deadline no further statement is packed (those packed so far stay).  At a call's `sizes`, a
    statement whose arrays all fit in the L1 cache is not packed (`auto_size.pack_pays`)."""
    from .packing import BatchLoopsInside, contraction_form
    from .rewrite import statement_varies
    target = Target.resolve(target)
    program = schedule.model.program
    forms = {st.name: contraction_form(program, st.name) for st in program.statements}
    if all(isinstance(f, str) for f in forms.values()):
        return schedule
    only_inits = all(not isinstance(forms[st.name], str) or not st.value.accesses()
                     for st in program.statements)
    for st in program.statements:
        if isinstance(forms[st.name], str) or not pack_pays(program, forms[st.name], sizes, target):
            continue
        if search is not None and search.expired("packing contractions"):
            break
        turned = pack_lanes(schedule.model, forms[st.name], sizes, target)
        try:
            packed = schedule.pack(st.name, target=target, **turned)
        except BatchLoopsInside:
            if not only_inits:
                continue
            try:
                schedule = add_marks(Schedule.source_order(schedule.model), deps, search)
                packed = schedule.pack(st.name, target=target, **turned)
            except (PolycError, IslBudgetError, isl.Error):
                continue
        except (PolycError, IslBudgetError, isl.Error):
            continue
        plan = packed.packing[-1]
        outer_parallel = any(LoopKind.PARALLEL in d.kinds and statement_varies(packed, st.name, k)
                             for k, d in enumerate(packed.dims) if d.name is not None)
        if target.cores > 1 and not outer_parallel:
            try:
                packed = packed.parallel(plan.m_block_loop)
            except (PolycError, IslBudgetError, isl.Error):
                pass
        schedule = packed
    return schedule


# -- fallback ------------------------------------------------------------------------------------

def fallback_schedule(kernel, deps: Dependences, reason: str, pack: bool = True,
                      search: Optional[SearchBudget] = None, reassociate: str = "none",
                      target: Optional[Target] = None, sizes: Optional[Mapping[str, int]] = None) -> Schedule:
    """Source order with proven parallel/vector marks; warns with `reason`."""
    warnings.warn(f"schedule='auto' for {kernel.model.program.name}: using the source order with "
                  f"proven parallel marks instead ({reason})", AutoScheduleWarning, stacklevel=4)
    sched = Schedule.source_order(kernel.model)
    try:
        sched = add_marks(sched, deps, search, reassociate, sizes)
        return pack_contractions(sched, deps, search, target, sizes) if pack else sched
    except (PolycError, isl.Error):
        return sched


def _rederive_saved(start: Schedule, restored: Schedule, fields: dict, saved_dims) -> Optional[Schedule]:
    """A saved automatic schedule made again from its checked request (see `saved_auto.rederive`)."""
    return saved_auto.rederive(restored, AutoRequest(**fields), saved_dims, auto_schedule, serialize._dim_dict)


serialize.REDERIVERS["auto_request"] = _rederive_saved
