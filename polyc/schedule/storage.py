"""Storage that a schedule lets shrink: an intermediate whose every element lives inside one
iteration of a loop needs only the slice one iteration touches (a full tensor becomes a row).

The proof is isl's, on the schedule: for every access of tensor `T` (writes and reads), the pair
(schedule coordinate of the loop, index of `T` along dimension `d`) is the same value, i.e. slice
`T[.., x, ..]` is touched only in iteration `x` of the loop, all inside one instance of it; and
every value-based flow dependence on `T` stays inside one iteration.  Then each iteration can keep
its slice in private storage: operator programs contract a fused intermediate this way
(`polyc.program.fusion`), and the C generator gives the iterations of a parallel loop a row buffer
each (`row_buffers`): written and read in L1 instead of streaming a full temporary through memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, Optional, Tuple

import islpy as isl

from ..errors import IslBudgetError, PolycError
from ..poly.islutil import isl_budget, isl_name
from ..ir import Statement
from ..poly.model import PolyModel
from .state import LoopKind, ScheduleState as Schedule


def _slice_in_iteration(model: PolyModel, schedule: Schedule, tensor: str, dim: int, level: int) -> bool:
    """isl proof that every access of `tensor` at index `x` along `dim` runs in iteration `x` of
    schedule dimension `level`."""
    found = False
    prefixes = None   # the schedule coordinates outside the loop: one loop instance for every access
    for info in model.accesses:
        if info.access.tensor != tensor:
            continue
        found = True
        access = model.access_map(info.statement, info.access, info.guard)   # S[x] -> T[a]
        when = schedule.statement_map(info.statement.name)                    # S[x] -> [t]
        pairs = access.reverse().apply_range(when.intersect_domain(model.domains[info.statement.name]))
        rank = pairs.dim(isl.dim_type.in_)
        n_out = pairs.dim(isl.dim_type.out)
        a = ", ".join(f"a{k}" for k in range(rank))
        t = ", ".join(f"t{k}" for k in range(n_out))
        same = isl.Map(f"{model.pstr} -> {{ {isl_name(tensor)}[{a}] -> [{t}] : a{dim} = t{level} }}")
        if not pairs.is_subset(same):
            return False
        outside = pairs.range().project_out(isl.dim_type.set, level, n_out - level)
        prefixes = outside if prefixes is None else prefixes.union(outside)
    if prefixes is not None and prefixes.coalesce().params().is_empty():
        return False
    if prefixes is not None:  # every access runs inside the same instance of the loop
        point = prefixes.coalesce()
        if not (point.lexmin().is_equal(point.lexmax()) and point.lexmin().is_equal(point)):
            return False
    return found


def _flow_within_iteration(model: PolyModel, schedule: Schedule, tensor: str, level: int) -> bool:
    """Every value-based flow dependence on `tensor` stays inside one iteration of one instance of
    the loop at schedule dimension `level` (equal coordinates up to and including it)."""
    for dep in model.dependences.of_kind("flow"):
        if dep.array != tensor:
            continue
        src = schedule.statement_map(model.statement_by_isl_name(dep.source).name)
        dst = schedule.statement_map(model.statement_by_isl_name(dep.sink).name)
        times = dep.relation.apply_domain(src).apply_range(dst)          # [t] -> [t']
        n = times.dim(isl.dim_type.in_)
        t = ", ".join(f"t{k}" for k in range(n))
        u = ", ".join(f"u{k}" for k in range(n))
        same = " and ".join(f"t{k} = u{k}" for k in range(level + 1))
        equal = isl.Map(f"{model.pstr} -> {{ [{t}] -> [{u}] : {same} }}")
        if not times.is_subset(equal):
            return False
    return True


def contractible_dim(model: PolyModel, schedule: Schedule, tensor: str, rank: int, level: int) -> Optional[int]:
    """The dimension of `tensor` that can be dropped under the fused loop at schedule dimension
    `level` (proven with isl), or None."""
    if not _flow_within_iteration(model, schedule, tensor, level):
        return None
    for d in range(rank):
        if _slice_in_iteration(model, schedule, tensor, d, level):
            return d
    return None


def row_buffers(schedule: Schedule) -> Dict[str, Tuple[int, str]]:
    """Intermediates (rank 2 and more) that each iteration of a parallel loop can keep in a private
    buffer: tensor -> (the dimension the loop fixes, the loop's name).  Proven by isl (see the
    module docstring); a tensor isl cannot decide within its budget is left out."""
    model = schedule.model
    out: Dict[str, Tuple[int, str]] = {}
    temps = [t for t in model.program.tensors if t.role == "temp" and t.shape and len(t.shape) >= 2]
    if not temps:
        return out
    parallel = [(k, d.name) for k, d in enumerate(schedule.dims)
                if d.name is not None and LoopKind.PARALLEL in d.kinds]
    for t in temps:
        for level, name in parallel:
            try:
                with isl_budget(f"proving that {t.name} lives inside one iteration of {name}"):
                    d = contractible_dim(model, schedule, t.name, len(t.shape), level)
            except (IslBudgetError, PolycError, isl.Error):
                d = None
            if d is not None:
                out[t.name] = (d, name)
                break
    return out


# -- per-thread copies of reductions across a parallel loop ---------------------------------------

#: Update operators whose per-thread partial results combine exactly like the updates themselves
#: (float max/min are left out: OpenMP-style combining would have to carry NaN like the kernel does).
PRIVATE_OPERATORS = ("+", "*")
#: A reduced tensor is copied per thread when it holds at most this many bytes (the copies live on
#: the threads' stacks); larger ones keep atomic updates.
PRIVATE_COPY_BYTES = 65536


def shared_reductions(schedule: Schedule, level: int) -> FrozenSet[str]:
    """Tensors whose elements two iterations of loop dimension `level` both update: the targets of
    the reduction dependences it carries (a legal reduction-parallel loop carries no others)."""
    from .legality import carried_at
    from .rewrite import dependences_of, is_reduction_dependence
    model = schedule.model
    with isl_budget(f"finding the reductions across loop {schedule.dims[level].name!r}"):
        carried = carried_at(schedule, dependences_of(model), level)
    return frozenset(model.program.statement(d.source).target.tensor for d, _ in carried
                     if is_reduction_dependence(model, d))


def private_copies(shared: Iterable[str], inside: Iterable[Statement]) -> Optional[FrozenSet[str]]:
    """The tensors of `shared` (reduced across a parallel loop) that the statements `inside` it
    update, when each thread may reduce them into copies of its own and add those to the tensors
    at the end (per-thread partials, a tree of two levels instead of an atomic update per element);
    None when some may not.

    Each must be touched by the statements `inside` the loop only as the target of updates with one
    operator of `PRIVATE_OPERATORS` whose values do not read it: a copy starts at the operator's
    identity, so any other read or write inside the loop would see a partial value."""
    shared = frozenset(shared)
    ops: Dict[str, str] = {}
    for st in inside:
        read = {a.tensor for a in st.value.accesses()}
        if read & shared:
            return None
        t = st.target.tensor
        if t not in shared:
            continue
        if st.update not in PRIVATE_OPERATORS or ops.setdefault(t, st.update) != st.update:
            return None
    return frozenset(ops)


# -- the storage a schedule implies, as one typed value ----------------------------------------------

@dataclass(frozen=True)
class StoragePlan:
    """The storage a schedule implies on the C target, each decision proven by isl on the schedule:

    - `row_buffers`: (tensor, dimension fixed, parallel loop): the intermediate lives inside one
      iteration of the loop, which keeps its row in a stack buffer per iteration (`row_buffers`);
    - `private`: (parallel loop, tensors): intermediates the loop reuses, no value crossing its
      iterations; each thread keeps a copy (`legality.private_temporaries`);
    - `reductions`: (reduction-parallel loop, tensors): arrays that several iterations update at one
      element (`shared_reductions`); the C generator gives each thread a copy added at the end where
      `private_copies` allows, else atomic updates; None where isl could not tell.

    `Schedule.storage` gives it; the C generator reads it; `str()` lists it."""

    row_buffers: Tuple[Tuple[str, int, str], ...] = ()
    private: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    reductions: Tuple[Tuple[str, Optional[Tuple[str, ...]]], ...] = ()

    def __str__(self) -> str:
        lines = [f"{t}: a row per iteration of parallel loop {loop!r} (dimension {d} fixed)"
                 for t, d, loop in self.row_buffers]
        lines += [f"{', '.join(ts)}: a copy per thread of parallel loop {loop!r}" for loop, ts in self.private]
        lines += [f"{', '.join(ts) if ts is not None else 'every array updated inside'}: reduced across the "
                  f"iterations of loop {loop!r}" for loop, ts in self.reductions]
        return "\n".join(lines) if lines else "no storage decisions (every tensor in full, shared)"


def storage_plan(schedule: Schedule) -> StoragePlan:
    """The `StoragePlan` of `schedule` (see `StoragePlan`)."""
    from .legality import private_temporaries
    rows = tuple(sorted((t, d, loop) for t, (d, loop) in row_buffers(schedule).items()))
    private, reductions = [], []
    for k, d in enumerate(schedule.dims):
        if not (d.is_loop and LoopKind.PARALLEL in d.kinds):
            continue
        if d.reduction:
            try:
                reductions.append((d.name, tuple(sorted(shared_reductions(schedule, k)))))
            except PolycError:
                reductions.append((d.name, None))
        elif d.kinds == frozenset({LoopKind.PARALLEL}):
            ts = private_temporaries(schedule, k)   # as proven: a failure here must not pass silently
            if ts:
                private.append((d.name, tuple(sorted(ts))))
    return StoragePlan(rows, tuple(private), tuple(reductions))
