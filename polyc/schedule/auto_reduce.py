"""The automatic scheduler's reduction strategy: reassociate reductions where that is proven legal.

Einstein reductions (`+=!`, `*=!`, `max=!`, `min=!`) are unordered by definition (Tensor
Comprehensions), so `schedule="auto"` may run them as

- a vector reduction: the statement's innermost loop, carrying only the reduction's own updates of
  one target element, is marked "reduction_vector" (code: the element in a scalar accumulator,
  `#pragma omp simd reduction(op:acc)`; this is what makes matvec and row reductions run at
  memory speed instead of one add per latency);
- a parallel reduction: when a statement has no parallel loop at all (a full reduction such as
  `s +=! A[i, j]`), its outermost loop, carrying only reduction updates of one element, is marked
  "reduction_parallel" (code: `omp parallel for reduction(op:acc)`, per-thread partials combined
  by OpenMP).

Legality is proven with the exact dependences exactly as `Schedule.vectorize(loop, reduction=True)`
and `Schedule.parallel(loop, reduction=True)` prove it (`legality.check_parallel` ignoring only
`rewrite.is_reduction_dependence`, and `rewrite.reduction_target_problem`).  Which statements may
be reassociated is the caller's choice (`auto.reassociate_default`): Einstein reductions by
default, loop kernels only when the user asks.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional

from ..errors import IllegalScheduleError, IslBudgetError, PolycError
from ..poly.dependences import Dependences
from .auto_cost import SearchBudget, all_unit_or_invariant, direction
from .auto_size import worth_parallel, worth_vector
from .auto_tree import aff_coefficients
from .legality import check_parallel
from .rewrite import is_reduction_dependence, reduction_target_problem
from .state import Dim, LoopKind, ScheduleState as Schedule
from .storage import private_copies, shared_reductions

#: Update operators OpenMP can reduce (and the C emitter keeps in an accumulator).
REASSOCIABLE = ("+", "*", "max", "min")


def reassociable(statement, mode: str) -> bool:
    """Whether `statement` may be reassociated under `mode` ("einstein", "all" or "none")."""
    if mode == "none" or statement.update not in REASSOCIABLE:
        return False
    return mode == "all" or bool(statement.reduction)


def direction_of(model, name: str, cols, loops: List[int], p: int):
    """The direction (per iterator) in which statement `name` moves along loop position `p`, from
    its schedule columns `cols` over its loop positions `loops` (None when `p` is not one of them)."""
    st = model.program.statement(name)
    n = len(st.iterators)
    rows, target = [], None
    for q in loops:
        coeffs = aff_coefficients(cols[name].get(q, 0), n)
        if coeffs is None:
            continue  # tile loops (floor) are fixed when the point loops are
        if q == p:
            target = len(rows)
        rows.append(coeffs[0])
    if target is None:
        return None
    return direction(rows, target, n)


def _proves_reduction(schedule: Schedule, dims: List[Dim], deps: Dependences, p: int, mark: str,
                      mode: str) -> bool:
    """Whether loop `p` carries only reduction self-dependences of statements that may be
    reassociated (`mode`) and keep one target element for the whole loop (so `mark` is legal)."""
    trial = schedule.with_dims(tuple(dims), f"trying {mark}")
    name = dims[p].name
    program = schedule.model.program

    def allowed(d) -> bool:
        return is_reduction_dependence(schedule.model, d) and reassociable(program.statement(d.source), mode)
    try:
        check_parallel(trial, deps, name, f"marking loop {name!r} {mark} automatically", ignore=allowed)
        return reduction_target_problem(trial, p) is None
    except (IllegalScheduleError, IslBudgetError, PolycError):
        return False


def reduction_marks(schedule: Schedule, dims: List[Dim], deps: Dependences, cols, loops_of: Dict[str, List[int]],
                    has_parallel: Dict[str, bool], mode: str,
                    search: Optional[SearchBudget] = None, sizes: Optional[Mapping[str, int]] = None) -> List[Dim]:
    """`dims` with "reduction_vector" on reducing innermost loops and "reduction_parallel" on the
    outermost loop of reductions that have no parallel loop (see the module docstring); with the
    call's `sizes`, only where an entry of that loop does enough work (`auto_size`)."""
    model = schedule.model
    program = model.program
    dims = list(dims)
    for p, d in enumerate(dims):
        if d.name is None or d.kinds & {LoopKind.VECTORIZED, LoopKind.PARALLEL} or not d.unroll.is_none:
            continue
        if search is not None and search.expired("marking reduction loops"):
            return dims
        users = [s for s in loops_of if p in loops_of[s]]
        if not users or not all(loops_of[s][-1] == p for s in users) or not worth_vector(schedule, p):
            continue
        if not any(reassociable(program.statement(s), mode) for s in users):
            continue
        if not all(all_unit_or_invariant(program, s, direction_of(model, s, cols, loops_of[s], p)) for s in users):
            continue
        if _proves_reduction(schedule, dims, deps, p, "reduction_vector", mode):
            dims[p] = d.with_kind(LoopKind.VECTORIZED, reduction=True)
    tried = set()
    for s, ps in loops_of.items():
        if has_parallel.get(s) or not ps or not reassociable(program.statement(s), mode):
            continue
        p = ps[0]
        users = [o for o in loops_of if p in loops_of[o]]
        if p in tried or LoopKind.PARALLEL in dims[p].kinds or any(has_parallel.get(o) for o in users):
            continue
        tried.add(p)
        if not worth_parallel(schedule, users, p, loops_of, sizes):
            continue
        if search is not None and search.expired("marking parallel reductions"):
            return dims
        if (users == [s] and _proves_reduction(schedule, dims, deps, p, "reduction_parallel", mode)) \
                or _proves_private_reduction(schedule, dims, deps, p, mode, users):
            dims[p] = dims[p].with_kind(LoopKind.PARALLEL, reduction=True)
    return dims


def _proves_private_reduction(schedule: Schedule, dims: List[Dim], deps: Dependences, p: int, mode: str,
                              users: List[str]) -> bool:
    """Whether loop `p` carries only reduction self-dependences of statements that may be
    reassociated, on tensors each thread can reduce into a private copy (`storage.private_copies`:
    a bias or weight gradient summed over the rows a parallel row loop hands out)."""
    trial = schedule.with_dims(tuple(dims), "trying a parallel reduction into private copies")
    program = schedule.model.program

    def allowed(d) -> bool:
        return is_reduction_dependence(schedule.model, d) and reassociable(program.statement(d.source), mode)
    try:
        check_parallel(trial, deps, dims[p].name, f"marking loop {dims[p].name!r} parallel automatically",
                       ignore=allowed)
        shared = shared_reductions(trial, p)
    except (IllegalScheduleError, IslBudgetError, PolycError):
        return False
    return bool(shared) and private_copies(shared, [program.statement(u) for u in users]) is not None
