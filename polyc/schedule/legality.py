"""Legality of schedules against exact dependences, with concrete counterexamples.

- A schedule is legal iff, for every dependence `x -> y`, `y` is scheduled strictly after `x`
  (lexicographically positive).
- A loop may run in parallel (or as SIMD lanes, or across GPU blocks/threads) iff no dependence is
  *carried* by it: no pair that agrees on all outer dimensions and differs at that loop.
Each refusal raises `IllegalScheduleError` naming the dependence kind, the statements, the array
and one concrete pair of instances with the sizes isl picked.

Every primitive re-proves the whole schedule, and the automatic scheduler applies many primitives
in a row (pack, then parallel, for each contraction), so the same question about one dependence
comes back again and again.  Each question is therefore asked on a canonical form and memoised
(`_PairMemo`): dimensions where the two statements sit at the same constant cannot order a pair
(they are dropped), and for "carried at level L" the dimensions after L do not matter either.  A
primitive that only adds a mark, or inserts scalar dimensions (as `pack` does), then asks questions
whose canonical form was answered already.  The memo holds the answers, never the dependences or
models (keys hold the dependence's id, checked against a weak reference).
"""
from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

import islpy as isl

from ..errors import IllegalScheduleError, IslBudgetError, PolycError
from ..poly.dependences import Dependence, Dependences
from ..poly.islutil import fixed_value, isl_budget, sample_point_values
from ..poly.reduction import is_reduction_dependence
from .state import PARALLEL_KINDS, LoopKind
from .state import ScheduleState as Schedule

_VERB = {"flow": ("writes", "reads"), "anti": ("reads", "overwrites"), "output": ("writes", "overwrites")}


def _instance(statement, coords) -> str:
    if not statement.iterators:
        return f"{statement.name}"
    return f"{statement.name}[{', '.join(f'{i}={v}' for i, v in zip(statement.iterators, coords))}]"


def describe_pair(schedule: Schedule, dep: Dependence, pairs: isl.Map) -> str:
    """One violating pair of `dep` (restricted to `pairs`) in words, with sizes."""
    program = schedule.model.program
    params, coords = sample_point_values(pairs.intersect_params(schedule.model.context).wrap())
    n_in = pairs.dim(isl.dim_type.in_)
    src, snk = program.statement(dep.source), program.statement(dep.sink)
    src_c, snk_c = coords[:n_in], coords[n_in:]
    env = dict(params)
    env.update(zip(src.iterators, src_c))
    acc = next((a for a in ([src.target] + list(src.reads())) if a.tensor == dep.array), None)
    element = f"{dep.array}[{', '.join(str(e.evaluate(env)) for e in acc.indices)}]" if acc and acc.indices \
        else dep.array
    first, second = _VERB[dep.kind]
    sizes = ", ".join(f"{k}={v}" for k, v in params.items()) or "any sizes"
    where = ""
    if src.location is not None:
        where = f" (line {src.location.line}" + (f", line {snk.location.line})" if snk.location and
                                                  snk.location.line != src.location.line else ")")
    return (f"{dep.kind} dependence {dep.source} -> {dep.sink} on {dep.array}{where}: "
            f"{_instance(src, src_c)} {first} {element}, which {_instance(snk, snk_c)} then {second} "
            f"(with {sizes})")


def _n_dims(schedule: Schedule) -> int:
    return len(schedule.dims)


class _PairMemo:
    """Answers of legality questions (pairs of a dependence with related times) in canonical form (see the module docstring), bounded.

    Key: (id of the dependence, canonical source map text, canonical sink map text, question).
    Value: (weak reference to the dependence, the pairs or None when there are none).  A hit whose
    weak reference no longer points at the same dependence (the id was reused) is a miss.
    `hits` counts questions answered from the memo, `misses` those isl had to answer."""

    def __init__(self, capacity: int = 20000):
        self.capacity = capacity
        self.entries: "OrderedDict[tuple, Tuple[weakref.ref, Optional[isl.Map]]]" = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, dep: Dependence, key: tuple):
        entry = self.entries.get(key)
        if entry is None or entry[0]() is not dep:
            return False, None
        self.entries.move_to_end(key)
        return True, entry[1]

    def put(self, dep: Dependence, key: tuple, pairs: Optional[isl.Map]) -> None:
        self.entries[key] = (weakref.ref(dep), pairs)
        if len(self.entries) > self.capacity:
            self.entries.popitem(last=False)

    def clear(self) -> None:
        self.entries.clear()
        self.hits = self.misses = 0


#: The process-wide memo of legality questions (`legality_memo().clear()` empties it).
_MEMO = _PairMemo()


def legality_memo() -> _PairMemo:
    """The memo of legality questions (its `hits` and `misses` count lookups; for tests)."""
    return _MEMO


def _columns(text: str, m: isl.Map, fixed: Tuple[Optional[int], ...]) -> Optional[str]:
    """A statement map's description as one string: its domain and each dimension's expression,
    the constant for dimensions fixed on the whole map (`Schedule.fixed_positions`), printed by
    isl otherwise; the parts joined by NUL (None when the map is not a function).  Cached by the
    map's text: successive schedules of a primitive chain share most of their maps."""
    got = _COLUMNS.get(text)
    if got is not None:
        _COLUMNS.move_to_end(text)
        return got[0]
    try:
        pma = isl.PwMultiAff.from_map(m) if any(v is None for v in fixed) else None
        parts = [str(m.domain())] + [str(v) if v is not None else str(pma.get_pw_aff(k))
                                     for k, v in enumerate(fixed)]
        cols: Optional[Tuple[str, ...]] = tuple(parts)
    except isl.Error:
        cols = None  # not a function: keyed by the whole map and the dimensions dropped
    _COLUMNS[text] = (cols,)
    if len(_COLUMNS) > 4096:
        _COLUMNS.popitem(last=False)
    return cols


_COLUMNS: "OrderedDict[str, Tuple[Optional[Tuple[str, ...]]]]" = OrderedDict()


class _Canonical:
    """Statement maps of one schedule with some output dimensions projected out (cached per
    schedule, see `_canonical`; it holds no reference to the schedule, so no model is kept).

    The canonical *text* of a statement's map without dimensions `drop` is its domain and the
    expressions of its other dimensions (a schedule map is a function, so they describe it
    exactly), see `_columns`.  The projected isl map itself is built only when a question has to
    be answered."""

    def __init__(self, schedule: Schedule):
        # The schedule's own per-statement text cache and maps (plain dicts: no reference back to
        # the schedule), so a text is printed once whoever asks first.
        self.texts, self.maps = schedule.text_cache
        self.keys: Dict[Tuple[str, Tuple[int, ...]], str] = {}
        self.shared: Dict[Tuple[str, str, int], Tuple[int, ...]] = {}
        self.differences: Dict[Tuple[str, str, int], int] = {}
        self.cache: Dict[Tuple[str, Tuple[int, ...]], isl.Map] = {}

    def text_of(self, name: str) -> str:
        """The isl text of statement `name`'s map (printed on first use)."""
        text = self.texts.get(name)
        if text is None:
            text = self.texts[name] = str(self.maps[name])
        return text

    def text(self, schedule: Schedule, name: str, drop: Tuple[int, ...]) -> str:
        key = self.keys.get((name, drop))
        if key is None:
            cols = _columns(self.text_of(name), schedule.statement_map(name), schedule.fixed_positions[name])
            if cols is None:
                key = self.text_of(name) + "\0" + repr(drop)
            else:
                dropped = {k + 1 for k in drop}  # cols[0] is the domain
                key = "\0".join(c for k, c in enumerate(cols) if k not in dropped)
            self.keys[(name, drop)] = key
        return key

    def shared_constants(self, schedule: Schedule, dep: Dependence, upto: int) -> Tuple[int, ...]:
        """Dimensions below `upto` where source and sink of `dep` sit at the same constant: they
        never order a pair of the two, so a question can drop them."""
        key = (dep.source, dep.sink, upto)
        got = self.shared.get(key)
        if got is None:
            fixed = schedule.fixed_positions
            src, snk = fixed[dep.source], fixed[dep.sink]
            got = tuple(k for k in range(upto) if src[k] is not None and src[k] == snk[k])
            self.shared[key] = got
        return got

    def first_difference(self, schedule: Schedule, dep: Dependence, before: int) -> int:
        """`_first_constant_difference`, once per pair of statements and level."""
        key = (dep.source, dep.sink, before)
        got = self.differences.get(key)
        if got is None:
            got = self.differences[key] = _first_constant_difference(schedule, dep, before)
        return got

    def map(self, schedule: Schedule, name: str, drop: Tuple[int, ...]) -> isl.Map:
        key = (name, drop)
        got = self.cache.get(key)
        if got is None:
            got = schedule.statement_map(name)
            runs: List[List[int]] = []  # contiguous runs of dropped dimensions, one projection each
            for k in sorted(drop):
                if runs and runs[-1][0] + runs[-1][1] == k:
                    runs[-1][1] += 1
                else:
                    runs.append([k, 1])
            for start, count in reversed(runs):
                got = got.project_out(isl.dim_type.out, start, count)
            self.cache[key] = got
        return got


#: The canonical views of the last few schedules asked about (by id, checked by weak reference):
#: a primitive's validation asks `check_legal` and then `check_parallel` for each marked loop.
_CANONICAL: "OrderedDict[int, Tuple[weakref.ref, _Canonical]]" = OrderedDict()


def _canonical(schedule: Schedule) -> _Canonical:
    entry = _CANONICAL.get(id(schedule))
    if entry is not None and entry[0]() is schedule:
        _CANONICAL.move_to_end(id(schedule))
        return entry[1]
    canon = _Canonical(schedule)
    _CANONICAL[id(schedule)] = (weakref.ref(schedule), canon)
    if len(_CANONICAL) > 8:
        _CANONICAL.popitem(last=False)
    return canon


def _memo_pairs(schedule: Schedule, canon: _Canonical, dep: Dependence, drop: Tuple[int, ...], question: tuple,
                relation) -> Optional[isl.Map]:
    """The pairs of `dep` (in the context) whose canonical times (dimensions `drop` left out) are
    related by `relation(n)` (n: the canonical dimension count); None when there are none.

    Looked up first by the statements' map texts as they are (free: a primitive that only adds a
    mark asks again about unchanged maps), then by the canonical maps' texts (the expressions of the
    dimensions kept, see `_Canonical`)."""
    plain_key = (id(dep), canon.text_of(dep.source), canon.text_of(dep.sink), drop, question)
    found, pairs = _MEMO.get(dep, plain_key)
    if found:
        _MEMO.hits += 1
        return pairs
    key = (id(dep), canon.text(schedule, dep.source, drop), canon.text(schedule, dep.sink, drop), question)
    found, pairs = _MEMO.get(dep, key)
    if found:
        _MEMO.hits += 1
    else:
        _MEMO.misses += 1
        src, snk = canon.map(schedule, dep.source, drop), canon.map(schedule, dep.sink, drop)
        rel = relation(src.dim(isl.dim_type.out), src.get_space().range())
        through = src.apply_range(rel).apply_range(snk.reverse())
        through = through.align_params(dep.relation.get_space())
        got = dep.relation.intersect(through).intersect_params(schedule.model.context)
        pairs = None if got.is_empty() else got
        _MEMO.put(dep, key, pairs)
    _MEMO.put(dep, plain_key, pairs)
    return pairs


def _first_constant_difference(schedule: Schedule, dep: Dependence, before: int) -> Optional[int]:
    """Sign of the first dimension below `before` where the two statements of `dep` sit at different
    constants, provided every dimension before it is the same constant for both; 0 when there is
    none.  Any instance of one then runs before (sign < 0) or after every instance of the other,
    which decides a pair without asking isl."""
    fixed = schedule.fixed_positions
    src, snk = fixed[dep.source], fixed[dep.sink]
    for k in range(before):
        a, b = src[k], snk[k]
        if a is None or b is None:
            return 0
        if a != b:
            return -1 if a < b else 1
    return 0


def violations(schedule: Schedule, deps: Iterable[Dependence]) -> List[Tuple[Dependence, isl.Map]]:
    """Dependences that `schedule` does not keep strictly positive, with their violating pairs."""
    out = []
    if not schedule.maps:
        return out  # a kernel without statements has nothing to order
    n = _n_dims(schedule)
    canon = _canonical(schedule)
    for dep in deps:
        if dep.reorderable:
            continue  # two commutative updates of one element: either order (parallel marks still see them)
        if canon.first_difference(schedule, dep, n) < 0:
            continue  # every source instance runs before every sink instance
        drop = canon.shared_constants(schedule, dep, n)
        # t >= t': the sink does not run strictly after the source
        bad = _memo_pairs(schedule, canon, dep, drop, ("not after",), lambda m, space: isl.Map.lex_ge(space))
        if bad is not None:
            out.append((dep, bad))
    return out


def check_legal(schedule: Schedule, deps: Dependences, what: str) -> None:
    """Raise IllegalScheduleError if `schedule` reverses (or makes simultaneous) any dependence."""
    with isl_budget(f"checking that {what} is legal"):
        bad = violations(schedule, deps)
    if bad:
        dep, pairs = bad[0]
        more = f" ({len(bad) - 1} more dependence(s) broken too)" if len(bad) > 1 else ""
        raise IllegalScheduleError(
            f"{what} is illegal: it breaks the {describe_pair(schedule, dep, pairs)}; the new schedule "
            f"runs the second instance before (or together with) the first{more}.", dependence=dep)


def _differs_at(m: int, space: isl.Space) -> isl.Map:
    """{ [t] -> [u] : t_k = u_k for k < m - 1 and t_(m-1) != u_(m-1) } on `space` (the same few
    relations are asked for again and again: kept per (m, parameters))."""
    key = (m, str(space))
    found = _DIFFERS_AT.get(key)
    if found is None:
        if len(_DIFFERS_AT) > 4096:
            _DIFFERS_AT.clear()
        found = _DIFFERS_AT[key] = _differs_at_map(m, space)
    return found


_DIFFERS_AT: dict = {}


def _differs_at_map(m: int, space: isl.Space) -> isl.Map:
    ts = [f"t{k}" for k in range(m)]
    us = [f"u{k}" for k in range(m)]
    cond = " and ".join([f"t{k} = u{k}" for k in range(m - 1)] + [f"t{m - 1} != u{m - 1}"])
    return isl.Map(f"{{ [{', '.join(ts)}] -> [{', '.join(us)}] : {cond} }}").align_params(space)


def carried_at(schedule: Schedule, deps: Iterable[Dependence], level: int) -> List[Tuple[Dependence, isl.Map]]:
    """Dependences carried by schedule dimension `level`, with the carrying pairs.

    Only the dimensions up to `level` matter (equal before it, different at it); those after it
    are dropped, as are those before it where both statements sit at the same constant."""
    n = _n_dims(schedule)
    after = tuple(range(level + 1, n))
    canon = _canonical(schedule)
    out = []
    for dep in deps:
        if canon.first_difference(schedule, dep, level) != 0:
            continue  # the two statements differ at a constant outside the loop: never carried
        drop = canon.shared_constants(schedule, dep, level) + after
        pairs = _memo_pairs(schedule, canon, dep, drop, ("carried",), _differs_at)
        if pairs is not None:
            out.append((dep, pairs))
    return out


def differing_pairs(schedule: Schedule, dep: Dependence, levels: Sequence[int]) -> Optional[isl.Map]:
    """The pairs of `dep` whose scheduled times differ at one of the dimensions `levels`,
    whatever the others (two instances run by different CUDA blocks or threads when `levels`
    are the mapped loops); None when there are none."""
    times = dep.relation.apply_domain(schedule.statement_map(dep.source)) \
        .apply_range(schedule.statement_map(dep.sink)).intersect_params(schedule.model.context)
    n = times.dim(isl.dim_type.in_)
    for level in levels:
        differ = isl.Map(f"{{ [{', '.join(f't{k}' for k in range(n))}] -> [{', '.join(f'u{k}' for k in range(n))}] "
                         f": t{level} != u{level} }}").align_params(times.get_space())
        found = times.intersect(differ)       # scheduled times are unnamed tuples
        if not found.is_empty():
            return dep.relation.intersect(found.apply_domain(schedule.statement_map(dep.source).reverse())
                                          .apply_range(schedule.statement_map(dep.sink).reverse()))
    return None


def check_parallel(schedule: Schedule, deps: Dependences, loop: str, what: str,
                   ignore: Optional[callable] = None) -> None:
    """Raise IllegalScheduleError if loop `loop` carries a dependence (optionally ignoring some)."""
    level = schedule.dim_index(loop)
    with isl_budget(f"checking that {what} is legal"):
        carried = [(d, p) for d, p in carried_at(schedule, deps, level) if not (ignore and ignore(d))]
    if carried:
        dep, pairs = carried[0]
        raise IllegalScheduleError(
            f"{what} is illegal: loop {loop!r} carries the {describe_pair(schedule, dep, pairs)}; "
            f"these two instances are in different iterations of {loop!r}, so running its iterations "
            f"at the same time would race.", dependence=dep)


# -- marks ------------------------------------------------------------------------------------------

def check_mark(schedule: Schedule, deps: Dependences, loop: str, what: Optional[str] = None) -> None:
    """The one proof of how a loop runs: raise IllegalScheduleError when loop `loop` of `schedule`
    runs its iterations at the same time (a kind in `PARALLEL_KINDS`: threads, SIMD lanes, CUDA
    blocks or threads) but carries a dependence; with `Dim.reduction` (a reassociated reduction:
    vector accumulators, OpenMP reduction clauses, CUDA tree reductions) only reduction
    dependences (`poly.reduction`) may be carried.  What else a kind needs (one target element per
    loop, innermost position) is the primitive's to check.

    Every mark is proven here, whoever sets it: the primitives (`rewrite.validate`), the CPU
    scheduler (`auto.add_marks`, `auto_reduce`) and the CUDA mapping (`gpu.default_gpu_mapping`)."""
    d = schedule.dims[schedule.dim_index(loop)]
    if not d.kinds & PARALLEL_KINDS:
        return
    what = what or f"running loop {loop!r} as {', '.join(d.labels())}"
    program = schedule.model.program
    reduction = (lambda dep: is_reduction_dependence(program, dep)) if d.reduction else None
    try:
        check_parallel(schedule, deps, loop, what, ignore=reduction)
    except IllegalScheduleError:
        # CPU threads may each keep a private copy of an intermediate the loop merely reuses
        # (`storage.private_temporaries`; the C generator allocates the copies).
        if d.kinds != frozenset({LoopKind.PARALLEL}) or d.reduction:
            raise
        private = private_temporaries(schedule, schedule.dim_index(loop))
        if not private:
            raise
        check_parallel(schedule, deps, loop, what, ignore=lambda dep: dep.array in private and dep.kind != "flow")


def with_proven_mark(schedule: Schedule, loop: str, kind: LoopKind, note: str,
                     deps: Optional[Dependences] = None, reduction: bool = False) -> Schedule:
    """`schedule` with loop `loop` also running as `kind` (reassociating a reduction if `reduction`),
    proven by `check_mark` first (with the kernel's dependences unless `deps` is given)."""
    marked = schedule.with_mark(loop, kind, note, reduction=reduction)
    check_mark(marked, schedule.model.dependences if deps is None else deps, loop, note)
    return marked


def with_proven_dims(schedule: Schedule, dims, note: str, deps: Optional[Dependences] = None) -> Schedule:
    """`schedule` with its dimensions replaced by `dims` (the same dimensions with more kinds), every
    loop whose kinds changed proven by `check_mark`."""
    new = schedule.with_dims(tuple(dims), note)
    deps = schedule.model.dependences if deps is None else deps
    for old, d in zip(schedule.dims, new.dims):
        if d.kinds != old.kinds or d.reduction != old.reduction:
            check_mark(new, deps, d.name, f"{note}: marking loop {d.name!r} {', '.join(d.labels())}")
    return new


# -- temporaries private to the threads of a parallel loop ------------------------------------------

def _within_iteration(schedule: Schedule, dep, level: int) -> bool:
    """Whether every pair of `dep` runs in the same iteration of every loop up to `level` (equal
    schedule coordinates 0..level): the value never crosses from one iteration to another."""
    model = schedule.model
    src = schedule.statement_map(dep.source).intersect_domain(model.domains[dep.source])
    dst = schedule.statement_map(dep.sink).intersect_domain(model.domains[dep.sink])
    times = dep.relation.apply_domain(src).apply_range(dst).intersect_params(model.context)
    n = times.dim(isl.dim_type.in_)
    times = times.project_out(isl.dim_type.in_, level + 1, n - level - 1)
    times = times.project_out(isl.dim_type.out, level + 1, n - level - 1)
    deltas = times.deltas()
    zero = isl.Set.universe(deltas.get_space())
    for k in range(level + 1):
        zero = zero.fix_val(isl.dim_type.set, k, isl.Val.zero(zero.get_ctx()))
    return deltas.is_subset(zero)


def private_temporaries(schedule: Schedule, level: int) -> FrozenSet[str]:
    """Intermediates that loop dimension `level` reuses from one iteration to the next (it carries
    anti and output dependences on them) but whose values never cross iterations: every
    value-based flow dependence on them stays inside one iteration of every loop up to `level`,
    and only statements inside the loop touch them.  Each thread running the loop in parallel can
    then keep a copy of its own (array privatization), so those dependences do not forbid it: an
    operator program's contracted row buffers (`program.contraction`), a per-row scalar.  isl
    decides; a tensor it cannot decide within its budget is left out."""
    model = schedule.model
    program = model.program
    temps = {t.name for t in program.tensors if t.role == "temp"}
    deps = list(model.dependences)
    reuse = [d for d in deps if d.array in temps and d.kind in ("anti", "output")]
    if not reuse:
        return frozenset()
    out = set()
    with isl_budget(f"proving which intermediates loop {schedule.dims[level].name!r} can privatise"):
        candidates = {d.array for d, _ in carried_at(schedule, reuse, level)}
        for t in sorted(candidates):
            touching = [st for st in program.statements
                        if st.target.tensor == t or t in {a.tensor for a in st.value.accesses()}]
            if not all(any(fixed_value(p, level) is None for p in schedule.statement_map(st.name).get_basic_maps())
                       for st in touching):   # every statement touching it loops along `level`
                continue
            try:
                if all(_within_iteration(schedule, d, level) for d in deps if d.array == t and d.kind == "flow"):
                    out.add(t)
            except (IslBudgetError, PolycError, isl.Error):
                continue
    return frozenset(out)
