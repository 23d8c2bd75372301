"""The machinery every schedule primitive shares: naming, rewriting the time space, re-proving.

A primitive is three steps:

1. resolve the user's names (loops by the index names of the schedule, statements by name or
   position) into dimension positions, with errors that list what exists;
2. build the new per-statement maps by composing each statement's map with a quasi-affine map
   of the time space (`{ [t0, ..., tn] -> [e0, ..., em] }`, spelled as isl text), and the new
   `Dim` list;
3. re-prove the result (`finish`): every dependence stays lexicographically positive, and every
   loop marked parallel / vector / GPU still carries no dependence (a later interchange can
   invalidate an earlier `parallel`), before the new Schedule is returned.

Dependences are computed once per `PolyModel` and cached (weakly, so models can be collected).
"""
from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass, replace
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

import islpy as isl

from ..errors import NameClashError, PackingDroppedWarning, PolycError, ScheduleArgumentError
from ..poly.dependences import Dependence, Dependences
from ..poly.islutil import fixed_value, isl_budget  # noqa: F401  (fixed_value re-exported)
from ..poly.model import PolyModel
from ..poly.reduction import is_reduction_dependence as reduction_rule
from .integers import map_coefficients_fit
from .loop_names import derived_from, loop_name_problem
from .state import Dim, LoopKind, ScheduleState as Schedule, StatementMaps, _fresh

#: Largest trip count a fully unrolled loop may have.
MAX_FULL_UNROLL = 1024


def dependences_of(model: PolyModel) -> Dependences:
    """The exact dependences of `model` (computed once, cached on the model)."""
    return model.dependences


# -- recorded calls ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One primitive call as the user wrote it: replayable (serialisation) and printable."""

    name: str
    args: Tuple[object, ...] = ()
    kwargs: Tuple[Tuple[str, object], ...] = ()

    def call_text(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        return f"{self.name}({', '.join(parts)})"

    def to_dict(self) -> dict:
        return {"primitive": self.name, "args": list(self.args), "kwargs": dict(self.kwargs)}


def step(name: str, *args: object, **kwargs: object) -> Step:
    """A Step, dropping keyword arguments left at None (so replays use the same defaults)."""
    return Step(name, tuple(args), tuple((k, v) for k, v in kwargs.items() if v is not None))


# -- names -------------------------------------------------------------------------------------

def loop_index(s: Schedule, loop: str) -> int:
    """Position of loop `loop`; PolycError listing the loops when there is none by that name."""
    if not isinstance(loop, str):
        raise PolycError(f"loops are named by strings (one of {', '.join(s.loop_names)}), not {loop!r}")
    return s.dim_index(loop)


def statement_name(s: Schedule, statement: Union[str, int]) -> str:
    """A statement given by name ("S0") or position (0) as its name."""
    names = list(s.statements)
    if isinstance(statement, bool) or not isinstance(statement, (str, int)):
        raise PolycError(f"statements are named by name or position, not {statement!r}")
    if isinstance(statement, int):
        if -len(names) <= statement < len(names):
            return names[statement]
        raise PolycError(f"no statement at position {statement}; this kernel has {len(names)} "
                         f"statements: {', '.join(names)}")
    if statement in names:
        return statement
    raise PolycError(f"no statement named {statement!r}; the statements are: {', '.join(names)}")


def kernel_names(program) -> Set[str]:
    """Every name the kernel itself uses: tensors, scalars, sizes and statement indices.  A new loop
    must not take one of them (a loop named `K` beside the size `K` changes what `K` means)."""
    return ({t.name for t in program.tensors} | {x.name for x in program.scalars} | set(program.sizes)
            | {i for st in program.statements for i in st.iterators})


def fresh_name(base: str, taken: Set[str]) -> str:
    """The one helper for names polyc makes up for loops: `base`, or `base_1`, ... not in `taken`
    (which it extends).  Callers pass `kernel_names(program)` plus the schedule's loop names."""
    return _fresh(base, taken)


def check_new_names(s: Schedule, names: Sequence[str], replacing: Sequence[str] = ()) -> None:
    """Refuse new loop names that are not identifiers, repeat, or are already in use as a loop, an
    index, a size, a scalar, a tensor or a statement of the kernel (NameClashError).  `replacing`: the loops the
    primitive removes, whose names may be reused."""
    program = s.model.program
    loops = set(s.loop_names) - set(replacing)
    kinds = [("loop", loops), ("tensor", {t.name for t in program.tensors}),
             ("scalar", {x.name for x in program.scalars}), ("size", set(program.sizes)),
             ("index", {i for st in program.statements for i in st.iterators}),
             ("statement", {st.name for st in program.statements})]     # distribute('S1') means S1
    def article(kind: str) -> str:
        return "an" if kind[0] in "aeiou" else "a"

    seen: Set[str] = set()
    for n in names:
        problem = loop_name_problem(n) if isinstance(n, str) else "is not a string"
        if problem and not derived_from(n, s.loop_names):   # the rule saved schedules are read with
            raise NameClashError(f"cannot name a new loop {n!r}: the name {problem}")
        if n in seen:
            raise NameClashError(f"the name {n!r} is given to two new loops; loop names must be unique")
        for kind, taken in kinds:
            if n in taken:
                raise NameClashError(
                    f"cannot name a new loop {n!r}: the kernel already has {article(kind)} {kind} named {n!r}, and a loop "
                    f"of the same name would change what {n!r} means; choose another name (the loops are "
                    f"{', '.join(s.loop_names)})")
        seen.add(n)


# -- reading the per-statement maps -------------------------------------------------------------

def pieces(s: Schedule, name: str) -> List[isl.BasicMap]:
    """The disjuncts of statement `name`'s map (more than one after `peel`)."""
    return s.statement_map(name).get_basic_maps()


def scalar_value(s: Schedule, name: str, k: int) -> int:
    """The value of scalar dimension `k` for statement `name` (the same in all its pieces)."""
    value = s.fixed_positions[name][k]
    if value is None:
        raise PolycError(f"statement {name} takes several positions at schedule dimension {k} (it was "
                         f"peeled); fuse or distribute it before peeling")
    return value


def statement_varies(s: Schedule, name: str, k: int) -> bool:
    """Whether statement `name` really iterates along loop dimension `k` (not a padded constant)."""
    return any(fixed_value(p, k) is None for p in pieces(s, name))


# -- rewriting the time space -------------------------------------------------------------------

def time_vars(n: int) -> List[str]:
    return [f"t{k}" for k in range(n)]


def time_map(s: Schedule, exprs: Sequence[str], n_in: Optional[int] = None, cond: str = "") -> isl.Map:
    """`{ [t0..] -> [exprs] : cond }` over the kernel's size parameters."""
    n = len(s.dims) if n_in is None else n_in
    where = f" : {cond}" if cond else ""
    return isl.Map(f"{s.model.pstr} -> {{ [{', '.join(time_vars(n))}] -> [{', '.join(exprs)}]{where} }}")


def remap(s: Schedule, exprs: Optional[Sequence[str]] = None,
          per_statement: Optional[Mapping[str, Sequence[str]]] = None) -> StatementMaps:
    """New statement maps: each map composed with `per_statement[name]` if given, else `exprs`."""
    out = []
    shared = time_map(s, exprs) if exprs is not None else None
    for name, m in s.maps:
        own = (per_statement or {}).get(name)
        t = time_map(s, own) if own is not None else shared
        if t is not None:
            m = m.apply_range(t).coalesce()
        out.append((name, m))
    return tuple(out)


def finish_in_parts(s: Schedule, st: "Step", level: int, parts: Sequence[Tuple[int, isl.Set]]):
    """`finish` for a primitive that runs the loop at `level` in parts (`peel`, `index_split`): a
    new constant dimension before it orders the parts (`maps_in_parts`)."""
    dims = list(s.dims)
    dims.insert(level, Dim(None))
    return finish(s, st, maps=maps_in_parts(s, level, parts), dims=dims)


def maps_in_parts(s: Schedule, level: int, parts: Sequence[Tuple[int, isl.Set]], default: int = 1) -> StatementMaps:
    """Statement maps with a constant dimension inserted before dimension `level`, worth `v` on the
    time points of each part `(v, points)` (`peel`, `index_split`); a statement that no part holds
    (it has no instances at all) sits at `default`, a harmless position."""
    t = time_vars(len(s.dims))
    at = {v: time_map(s, t[:level] + [str(v)] + t[level:]) for v in [default] + [v for v, _ in parts]}
    out = []
    for name, m in s.maps:
        new = None
        for v, points in parts:
            if points.is_empty():
                continue
            piece = m.intersect_range(points).apply_range(at[v])
            new = piece if new is None else new.union(piece)
        out.append((name, (m.apply_range(at[default]) if new is None else new).coalesce()))
    return tuple(out)


def time_set(s: Schedule) -> isl.Set:
    """Every time point some statement instance runs at (one set in the shared time space)."""
    out = None
    for name, m in s.maps:
        r = m.intersect_domain(s.model.domains[name]).range()
        out = r if out is None else out.union(r)
    return out


def identity_exprs(n: int) -> List[str]:
    return time_vars(n)


# -- re-proving ------------------------------------------------------------------------------------

def fully_unrolled(d: Dim) -> bool:
    """Whether isl writes out every iteration of loop `d` (`unroll(loop)`, register-blocking lanes)."""
    return d.is_loop and d.unroll.is_full


def is_reduction_dependence(model: PolyModel, dep: Dependence) -> bool:
    """A dependence between two updates `X[..] op= f(..)` of the same element, `op` associative and
    commutative, with `f` not reading X: reordering such updates only reassociates the reduction."""
    return reduction_rule(model.program, dep)   # the one rule: poly.reduction


def reduction_target_problem(s: Schedule, k: int, reducing=None) -> Optional[str]:
    """Why the reductions whose updates loop dimension `k` carries cannot keep their target in one
    accumulator for the whole loop (`vectorize(loop, reduction=True)`), or None when they can: the
    target element of each must be the same for every iteration of `k` and of the loops inside it
    (isl: the map from the schedule dimensions outside `k` to the target elements is single-valued).
    Fully unrolled dimensions inside `k` count as outside: each unrolled copy of the statement is
    its own accumulator (rows of a matrix-vector product jammed into one vector loop).
    `reducing` (statement names) overrides which statements are checked."""
    from .legality import carried_at
    model = s.model
    n = len(s.dims)
    if reducing is None:
        reducing = {d.source for d, _ in carried_at(s, dependences_of(model), k)
                    if is_reduction_dependence(model, d)}
    for name in s.statements:
        if name not in reducing or not statement_varies(s, name, k):
            continue
        st = model.program.statement(name)
        with isl_budget(f"checking the reduction target of {name}"):
            prefix = s.statement_map(name).intersect_domain(model.domains[name])
            for j in reversed(range(k, n)):
                if j == k or not (s.dims[j].is_loop and s.dims[j].unroll.is_full):
                    prefix = prefix.project_out(isl.dim_type.out, j, 1)
            elements = prefix.reverse().apply_range(model.access_map(st, st.target))
            if not elements.intersect_params(model.context).is_single_valued():
                return (f"statement {name} updates different elements of {st.target.tensor} in different "
                        f"iterations of loop {s.dims[k].name!r}")
    return None


def _innermost_problem(s: Schedule, k: int) -> Optional[str]:
    """Why loop dimension `k` is not the innermost loop of every statement it iterates, or None.
    Fully unrolled dimensions inside it (register-blocking lanes) are not loops in the code."""
    # A floor-division quotient's loop takes one value per outer instance: no loop in the code.
    quotients = {q for st in s.model.program.statements for q in st.divisions}
    for name in s.statements:
        for p in pieces(s, name):
            if fixed_value(p, k) is not None:
                continue
            for j in range(k + 1, len(s.dims)):
                if s.dims[j].is_loop and not s.dims[j].unroll.is_full and s.dims[j].name not in quotients \
                        and fixed_value(p, j) is None:
                    return (f"loop {s.dims[k].name!r} is not innermost: statement {name} still iterates "
                            f"loop {s.dims[j].name!r} inside it")
    return None


def _loop_nest_members(s: Schedule, k: int) -> Set[str]:
    """The statements in the generated loops of dimension `k`: those iterating it, and those at the
    same constants on every scalar dimension outside it (statements separated by a scalar
    dimension outside `k` run in other loops).  A peeled statement (no constant) counts as in."""
    fixed = s.fixed_positions
    scalars = [j for j in range(k) if not s.dims[j].is_loop]
    varying = [name for name in s.statements if fixed[name][k] is None]

    def together(a: str, b: str) -> bool:
        return all(fixed[a][j] is None or fixed[b][j] is None or fixed[a][j] == fixed[b][j] for j in scalars)

    return {name for name in s.statements if any(together(name, v) for v in varying)}


def trip_count_bound(s: Schedule, k: int) -> Optional[int]:
    """The largest number of iterations loop dimension `k` makes for fixed outer dimensions, when
    that is a constant for all sizes; None when it grows with the sizes.  Only dimensions 0..k
    matter, so the time points are projected onto them first (a packed or register-blocked
    schedule has dozens of dimensions inside)."""
    nest = _loop_nest_members(s, k)
    if not nest:
        return 0
    key = (k, tuple(s.map_text(name) for name in s.statements if name in nest))
    memo = _trip_memo(s.model)
    if key not in memo:
        memo[key] = _trip_count_bound(s, k, nest)
    return memo[key]


#: Trip-count bounds per model (by id, checked by weak reference), keyed by the dimension and the
#: map texts of the statements in its loops: a primitive that leaves those maps alone (a mark, a
#: pack elsewhere) asks again about the same loops.
_TRIP_MEMOS: Dict[int, Tuple[weakref.ref, Dict[tuple, Optional[int]]]] = {}


def _trip_memo(model: PolyModel) -> Dict[tuple, Optional[int]]:
    entry = _TRIP_MEMOS.get(id(model))
    if entry is None or entry[0]() is not model:
        for stale in [i for i, (ref, _) in _TRIP_MEMOS.items() if ref() is None]:
            del _TRIP_MEMOS[stale]
        entry = _TRIP_MEMOS[id(model)] = (weakref.ref(model), {})
    if len(entry[1]) > 4096:
        entry[1].clear()
    return entry[1]


def _trip_count_bound(s: Schedule, k: int, nest: Set[str]) -> Optional[int]:
    n = len(s.dims)
    m = k + 1
    t, u = time_vars(m), [f"u{j}" for j in range(m)]
    cond = " and ".join([f"{t[j]} = {u[j]}" for j in range(k)] + ["true"])
    with isl_budget(f"bounding the trip count of loop {s.dims[k].name!r}"):
        times = None
        for name, smap in s.maps:
            if name not in nest:
                continue
            r = smap.intersect_domain(s.model.domains[name]).range().project_out(isl.dim_type.set, m, n - m)
            times = r if times is None else times.union(r)
        pairs = isl.Map(f"{s.model.pstr} -> {{ [{', '.join(t)}] -> [{', '.join(u)}] : {cond} }}")
        pairs = pairs.intersect_domain(times).intersect_range(times).intersect_params(s.model.context)
        if pairs.is_empty():
            return 0
        deltas = pairs.deltas()
        deltas = deltas.project_out(isl.dim_type.param, 0, deltas.dim(isl.dim_type.param))
        v = deltas.max_val(isl.Aff(f"{{ [{', '.join(t)}] -> [({t[k]})] }}"))
        if not v.is_int():
            return None
    return int(v.to_python()) + 1


def check_blocks_enclose_threads(s: Schedule, what: str) -> None:
    """No statement runs inside a thread-mapped loop and, deeper, a block-mapped one: a kernel's
    blocks are launched around its threads (code generation could not place such a block loop)."""
    from ..errors import IllegalScheduleError
    marked = [(k, d) for k, d in enumerate(s.dims) if d.is_loop and d.kinds & {LoopKind.GPU_BLOCK, LoopKind.GPU_THREAD}]
    if len(marked) < 2:
        return
    for st in s.statements:
        thread = None
        for k, d in marked:
            if not statement_varies(s, st, k):
                continue
            if LoopKind.GPU_THREAD in d.kinds and thread is None:
                thread = d.name
            elif LoopKind.GPU_BLOCK in d.kinds and thread is not None:
                raise IllegalScheduleError(f"{what} is refused: loop {d.name!r} is mapped to blocks inside loop "
                                           f"{thread!r}, which is mapped to threads (statement {st}); block loops "
                                           f"must enclose thread loops")


def validate(s: Schedule, what: str, marking: Optional[str] = None, maps_changed: bool = True) -> None:
    """Re-prove `s`: dependences kept, marked loops still free of carried dependences.

    `marking` names the loop the primitive itself just marked (its errors need no extra note);
    `maps_changed=False` (only kinds changed) skips re-bounding fully unrolled loops.
    """
    from .legality import check_legal, check_mark
    deps = dependences_of(s.model)
    check_legal(s, deps, what)
    for k, d in enumerate(s.dims):
        if fully_unrolled(d) and marking != d.name and maps_changed:
            bound = trip_count_bound(s, k)
            if bound is None or bound > MAX_FULL_UNROLL:
                count = "grow with the sizes" if bound is None else f"reach {bound}"
                raise PolycError(f"{what} is refused: loop {d.name!r} is to be unrolled fully, but its trip "
                                 f"count would then {count}")
    from ..errors import IllegalScheduleError
    check_blocks_enclose_threads(s, what)
    for d in s.dims:
        if not d.is_loop or not d.kinds:
            continue
        note = "" if d.name == marking else f" (with loop {d.name!r} marked {', '.join(d.labels())})"
        if LoopKind.GPU_BLOCK in d.kinds and (LoopKind.GPU_THREAD in d.kinds or d.reduction):
            why = ("a loop maps to blocks or to threads, not both" if LoopKind.GPU_THREAD in d.kinds else
                   "blocks cannot combine a reduction (only a block's threads tree-reduce one)")
            raise IllegalScheduleError(f"{what} is refused{note}: {why}")
        check_mark(s, deps, d.name, what + note)   # the one proof of marks
        if d.reduction and LoopKind.VECTORIZED in d.kinds:
            problem = reduction_target_problem(s, s.dim_index(d.name))
            if problem:
                raise IllegalScheduleError(f"{what} is refused: {problem}; a reassociated reduction keeps "
                                           f"one element in a vector accumulator for the whole loop")
        if LoopKind.VECTORIZED in d.kinds:
            problem = _innermost_problem(s, s.dim_index(d.name))
            if problem:
                raise IllegalScheduleError(f"{what} is refused: {problem}; only the innermost loop "
                                           f"can run as SIMD lanes")


def finish(old: Schedule, st: Step, *, maps: Optional[StatementMaps] = None,
           dims: Optional[Sequence[Dim]] = None, check: bool = True,
           marking: Optional[str] = None):
    """The new Schedule after primitive `st`: recorded in the history and steps, re-proved.  The
    result has the class of `old` (the user-facing `Schedule` stays one)."""
    new_dims = tuple(dims) if dims is not None else old.dims
    new = replace(old, maps=maps if maps is not None else old.maps, dims=new_dims,
                  history=old.history + (st.call_text(),), steps=old.steps + (st,))
    if maps is not None:
        for name, m in new.maps:
            if not map_coefficients_fit(m):
                raise ScheduleArgumentError(
                    f"{st.call_text()} would give statement {name} schedule coefficients beyond +-2**32 "
                    f"(the arguments of the primitives so far compound); the generated loops could overflow "
                    f"64-bit integers", st.call_text())
    if check:
        with isl_budget(f"checking {st.call_text()}"):
            validate(new, st.call_text(), marking, maps_changed=maps is not None or marking is None)
    if maps is not None and old.packing:
        _warn_dropped_packing(old, new, st)
    return new


def _warn_dropped_packing(old: Schedule, new: Schedule, st: Step) -> None:
    """A `PackingDroppedWarning` when step `st` changed the map of a statement `old` packs (its plan
    no longer applies, so the statement would silently lose its packed code)."""
    lost = sorted(set(old.valid_packing()) - set(new.valid_packing()))
    if lost:
        warnings.warn(PackingDroppedWarning(
            f"{st.call_text()} changed the loops of packed statement{'s' if len(lost) > 1 else ''} "
            f"{', '.join(lost)}: {'they run' if len(lost) > 1 else 'it runs'} as ordinary loops now, not "
            f"packed. Apply pack(...) last, or again after this step."), stacklevel=4)


def mark_loop(s: Schedule, loop: str, st: Step, dim: Dim):
    """`s` with loop `loop`'s dimension replaced by `dim` (a new kind or unrolling), re-proved."""
    k = loop_index(s, loop)
    dims = list(s.dims)
    dims[k] = dim
    return finish(s, st, dims=dims, marking=loop)
