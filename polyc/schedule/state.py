"""The typed state of a schedule: what every primitive reads and writes, below the `Schedule` class.

A schedule is one parsed isl map per statement into a shared, named time space (`ScheduleState.maps`),
the dimensions of that space (`Dim`), the pack plans of contractions run BLAS-style (`packing`) and
the primitive calls that built it (`steps`).  isl values are immutable, so the parsed maps are the
state itself; their text is derived (`map_texts`) for JSON, hashing and display only.

How a loop runs is typed, in the manner of Halide's `ForType`:

- `LoopKind`: serial, parallel, vectorized, unrolled, GPU block, GPU thread.  A loop's `kinds` hold
  the parallel ones it has (PARALLEL, VECTORIZED, GPU_BLOCK, GPU_THREAD; a loop may be both
  parallel and vectorized: `omp parallel for simd`); `Dim.kind` is its one main kind.
- `Dim.reduction`: the parallel / vectorized kinds reassociate a reduction (each update of an
  element of the reduced tensor may run in another order; per-thread or per-lane accumulators).
- `Unroll`: not unrolled, fully unrolled (isl writes out every iteration: register-blocking lanes,
  `unroll(loop)`), or by a factor (a hint to the C compiler).

This module imports nothing of the primitives, the registry or the `Schedule` class: they are
layered above it (state -> rewrite -> primitives -> registry -> schedule).
"""
from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Callable, Dict, FrozenSet, Iterable, Iterator, Mapping, Optional, Tuple, Union

import islpy as isl

from ..errors import PolycError
from ..poly.islutil import fixed_value, isl_name
from ..poly.model import PolyModel


class LoopKind(str, enum.Enum):
    """How a loop runs (values are the names the outline and saved files use)."""

    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vector"
    UNROLLED = "unroll"
    GPU_BLOCK = "block"
    GPU_THREAD = "thread"

    def __str__(self) -> str:
        return self.value


#: The kinds that promise "no dependence carried by this loop" (except a reduction's, with
#: `Dim.reduction`): they go into `Dim.kinds`.
PARALLEL_KINDS = frozenset({LoopKind.PARALLEL, LoopKind.VECTORIZED, LoopKind.GPU_BLOCK, LoopKind.GPU_THREAD})
#: The kinds that follow the tile loop when a loop is tiled or split (the rest stay on the point loop).
OUTER_KINDS = frozenset({LoopKind.PARALLEL, LoopKind.GPU_BLOCK})


@dataclass(frozen=True)
class Unroll:
    """How far a loop is unrolled: `Unroll.none()`, `Unroll.full()` or `Unroll.by(n)`."""

    mode: str = "none"   # "none" | "full" | "by"
    factor: int = 0      # the factor of "by"

    def __post_init__(self) -> None:
        if self.mode not in ("none", "full", "by") or (self.mode == "by") != (self.factor >= 1) \
                or (self.mode != "by" and self.factor != 0):
            raise ValueError(f"not an unrolling: {self.mode!r} by {self.factor!r}")

    @staticmethod
    def none() -> "Unroll":
        return _NO_UNROLL

    @staticmethod
    def full() -> "Unroll":
        """isl writes out every iteration (the trip count must be a small constant)."""
        return _FULL_UNROLL

    @staticmethod
    def by(factor: int) -> "Unroll":
        """Unroll by `factor`: a `#pragma GCC unroll` hint to the C compiler."""
        return Unroll("by", factor)

    @property
    def is_none(self) -> bool:
        return self.mode == "none"

    @property
    def is_full(self) -> bool:
        return self.mode == "full"

    @property
    def hint(self) -> Optional[int]:
        """The factor a C compiler is told to unroll by (`#pragma GCC unroll n`), or None."""
        return self.factor if self.mode == "by" else None

    def legacy(self) -> int:
        """The integer saved files use: 0 none, -1 full, n by n."""
        return {"none": 0, "full": -1}.get(self.mode, self.factor)

    @staticmethod
    def from_legacy(value: int) -> "Unroll":
        return Unroll.none() if value == 0 else Unroll.full() if value == -1 else Unroll.by(value)

    def label(self) -> str:
        return {"none": "", "full": "unroll (full)"}.get(self.mode, f"unroll {self.factor}")


_NO_UNROLL = Unroll()
_FULL_UNROLL = Unroll("full")

#: The labels a loop may carry in saved files and displays (`Dim.labels`, `Dim.with_label`).
LABELS = ("parallel", "vector", "unroll", "reduction_parallel", "reduction_vector", "block", "thread", "packed")


@dataclass(frozen=True)
class Dim:
    """One schedule dimension: `name` is None for a scalar (ordering) dimension, else a loop."""

    name: Optional[str]
    kinds: FrozenSet[LoopKind] = frozenset()
    reduction: bool = False
    unroll: Unroll = field(default_factory=Unroll.none)
    origin: Optional[str] = None  # the user index this loop iterates (for tile/split results)

    def __post_init__(self) -> None:
        if not isinstance(self.kinds, frozenset) or not all(isinstance(k, LoopKind) and k in PARALLEL_KINDS
                                                             for k in self.kinds):
            raise TypeError(f"Dim.kinds must be a frozenset of parallel LoopKinds, not {self.kinds!r}")
        if not isinstance(self.unroll, Unroll):
            raise TypeError(f"Dim.unroll must be an Unroll, not {self.unroll!r}")
        if self.name is None and (self.kinds or self.reduction or not self.unroll.is_none):
            raise TypeError("a scalar (ordering) dimension is no loop: it has no kind and no unrolling")

    @property
    def is_loop(self) -> bool:
        return self.name is not None

    @property
    def kind(self) -> LoopKind:
        """The one main way the loop runs (GPU mapping, then full unrolling, parallel, vector)."""
        for k in (LoopKind.GPU_BLOCK, LoopKind.GPU_THREAD):
            if k in self.kinds:
                return k
        if self.unroll.is_full:
            return LoopKind.UNROLLED
        for k in (LoopKind.PARALLEL, LoopKind.VECTORIZED):
            if k in self.kinds:
                return k
        return LoopKind.SERIAL

    def runs(self, kind: LoopKind) -> bool:
        """Whether the loop runs as `kind` (one of possibly several)."""
        if kind == LoopKind.SERIAL:
            return not self.kinds
        if kind == LoopKind.UNROLLED:
            return not self.unroll.is_none
        return kind in self.kinds

    def with_kind(self, kind: LoopKind, reduction: bool = False) -> "Dim":
        """This loop also running as `kind` (a parallel kind), reassociating a reduction if asked."""
        return replace(self, kinds=self.kinds | {LoopKind(kind)}, reduction=self.reduction or reduction)

    def with_label(self, label: str) -> "Dim":
        """This loop with a saved-file label added ("parallel", "reduction_vector", ...)."""
        if label in ("reduction_parallel", "reduction_vector"):
            return self.with_kind(LoopKind(label.split("_")[1]), reduction=True)
        if label in ("unroll", "packed"):
            return self  # unrolling is in `unroll`; packing is in the schedule's pack plans
        return self.with_kind(LoopKind(label))

    def labels(self) -> Tuple[str, ...]:
        """The loop's kinds as the labels saved files and displays use, in a fixed order."""
        out = []
        for kind in (LoopKind.PARALLEL, LoopKind.VECTORIZED):
            if kind in self.kinds:
                out.append(f"reduction_{kind.value}" if self.reduction else kind.value)
        if not self.unroll.is_none:
            out.append("unroll")
        out.extend(k.value for k in (LoopKind.GPU_BLOCK, LoopKind.GPU_THREAD) if k in self.kinds)
        return tuple(out)

    @property
    def marks(self) -> FrozenSet[str]:
        """The labels as a set (read-only; for display and code written against the old string
        marks: new code reads `kinds`, `reduction` and `unroll`)."""
        return frozenset(self.labels())


@functools.lru_cache(maxsize=4096)
def parse_map(text: str) -> isl.Map:
    """`text` parsed once (isl maps are immutable, so equal texts share one parse)."""
    return isl.Map(text)


def _fresh(base: str, taken: set) -> str:
    """`base`, or `base_1`, `base_2`, ... : a loop name no tensor, scalar, size or index uses."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


StatementMaps = Tuple[Tuple[str, isl.Map], ...]



class _LazyRows(Mapping):
    """statement -> a value computed from its map, computed on first use (a read-only mapping in
    the order of the schedule's statements)."""

    def __init__(self, maps: Dict[str, isl.Map], compute: Callable[[isl.Map], Tuple[Optional[int], ...]]):
        self._maps, self._compute, self._rows = maps, compute, {}

    def __getitem__(self, name: str) -> Tuple[Optional[int], ...]:
        row = self._rows.get(name)
        if row is None:
            row = self._rows[name] = self._compute(self._maps[name])
        return row

    def __iter__(self) -> Iterator[str]:
        return iter(self._maps)

    def __len__(self) -> int:
        return len(self._maps)

@dataclass(frozen=True)
class ScheduleState:
    """An immutable schedule of a kernel's statements (the data; `Schedule` adds the primitives).

    `maps` accepts isl text too (parsed once, at construction): the stored value is always parsed.
    """

    model: PolyModel
    maps: StatementMaps                    # (statement name, isl map) in statement order
    dims: Tuple[Dim, ...]
    history: Tuple[str, ...] = ()
    #: The pack plans (`packing.PackPlan`) of the contractions run BLAS-style, oldest first.
    packing: Tuple[object, ...] = ()
    #: The primitive calls (`rewrite.Step`) that built this schedule from source order; replayed
    #: by `from_json`.  Shorter than `history` only when something bypassed the primitives.
    steps: Tuple[object, ...] = ()
    #: The tiled CUDA contractions (`auto_gpu.GPUContractionPlan`) the GPU scheduler planned.
    gpu_contractions: Tuple[object, ...] = ()
    #: The machine (`polyc.Target`) an automatic schedule was chosen for; saved by `to_json`.
    target: Optional[object] = None
    #: How an automatic schedule was asked for (`auto.AutoRequest`), so the C runtime can decide it
    #: again for a call's size class; None for any other schedule.
    auto_request: Optional[object] = None

    def __post_init__(self) -> None:
        if any(not isinstance(m, isl.Map) for _, m in self.maps):
            parsed = tuple((name, parse_map(m) if isinstance(m, str) else m) for name, m in self.maps)
            bad = [name for name, m in parsed if not isinstance(m, isl.Map)]
            if bad:
                raise TypeError(f"schedule maps must be isl maps (or their text), not for {bad}")
            object.__setattr__(self, "maps", parsed)
        else:
            object.__setattr__(self, "maps", tuple(self.maps))
        object.__setattr__(self, "dims", tuple(self.dims))

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def source_order(cls, model: PolyModel):
        """The schedule that runs statements as written: the 2d+1 source order."""
        depth = model.depth
        program = model.program
        taken = {t.name for t in program.tensors} | {x.name for x in program.scalars} | set(program.sizes) \
            | {i for st in program.statements for i in st.iterators}
        dims = []
        for k in range(2 * depth + 1):
            if k % 2 == 0:
                dims.append(Dim(None))
            else:
                names = {st.iterators[k // 2] for st in model.program.statements if len(st.iterators) > k // 2}
                name = names.pop() if len(names) == 1 else _fresh(f"c{k // 2}", taken)
                dims.append(Dim(name, origin=name))
        maps = tuple((st.name, model.statement_schedule(st)) for st in model.program.statements)
        return cls(model, maps, tuple(dims))

    # -- isl views -----------------------------------------------------------------------------
    @cached_property
    def _by_name(self) -> Dict[str, isl.Map]:
        return dict(self.maps)

    def statement_map(self, name: str) -> isl.Map:
        return self._by_name[name]

    @cached_property
    def map_texts(self) -> Dict[str, str]:
        """Each statement's map as isl text (for JSON, hashing and display; never re-parsed)."""
        return {name: self.map_text(name) for name, _ in self.maps}

    @cached_property
    def text_cache(self) -> Tuple[Dict[str, str], Dict[str, isl.Map]]:
        """(statement -> isl text printed so far, statement -> map): texts are printed once, when
        first asked.  Legality's memo keys need only the two statements of a dependence, and
        printing every map of a schedule with dozens of statements and ~100 dims costs more than
        the questions asked about it.  Plain dicts, so a cache may hold them without the schedule."""
        return {}, self._by_name

    def map_text(self, name: str) -> str:
        """One statement's map as isl text (printed on first use, see `text_cache`)."""
        texts, maps = self.text_cache
        text = texts.get(name)
        if text is None:
            text = texts[name] = str(maps[name])
        return text

    @property
    def statements(self) -> Tuple[str, ...]:
        return tuple(name for name, _ in self.maps)

    @cached_property
    def fixed_positions(self) -> Mapping[str, Tuple[Optional[int], ...]]:
        """Per statement, the constant value of each dimension (None where it varies): the scalar
        dimensions that order statements, known without asking isl about pairs of instances.
        Read off each statement's map when first asked (legality asks about the two statements of
        a dependence, not about all of them)."""
        n = len(self.dims)
        return _LazyRows(self._by_name, lambda m: tuple(fixed_value(m, k) for k in range(n)))

    @property
    def schedule_map(self) -> isl.UnionMap:
        """The union of statement schedules restricted to their domains."""
        out = isl.UnionMap.empty(isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
        for name, m in self.maps:
            out = out.union(isl.UnionMap.from_map(m.intersect_domain(self.model.domains[name])))
        return out

    # -- names ---------------------------------------------------------------------------------
    @property
    def loop_names(self) -> Tuple[str, ...]:
        return tuple(d.name for d in self.dims if d.name is not None)

    def dim_index(self, loop: str) -> int:
        for k, d in enumerate(self.dims):
            if d.name == loop:
                return k
        known = ", ".join(self.loop_names)
        raise PolycError(f"no loop named {loop!r} in this schedule; its loops are: {known}")

    def iterator_names(self) -> Tuple[str, ...]:
        """C names for every dimension (scalar dimensions get placeholders isl never prints)."""
        return tuple(isl_name(d.name) if d.name else f"_s{k}" for k, d in enumerate(self.dims))

    def packed_loops(self) -> FrozenSet[str]:
        """The loops of the recorded pack plans (still valid or not: see `packing.packing_plans`)."""
        return frozenset(nm for plan in self.packing for nm in plan.loops)  # type: ignore[attr-defined]

    def valid_packing(self) -> Dict[str, object]:
        """The pack plans still valid, by statement (the statement's map is the one the plan was
        made for; `packing.packing_plans`)."""
        out: Dict[str, object] = {}
        if not self.packing:
            return out
        statements = set(self.statements)
        names = set(self.loop_names)
        for plan in self.packing:
            st, loops, text = plan.statement, plan.loops, plan.map_text  # type: ignore[attr-defined]
            if st not in statements or not all(nm in names for nm in loops):
                continue
            if self.has_map(st, text):
                out[st] = plan
        return out

    def has_map(self, statement: str, text: str) -> bool:
        """Whether `statement`'s map is the map printed as `text` (a plan's record of the map it was
        made for).  The same text is the same map, the usual case, with no isl; else isl decides:
        isl may print one map differently once other questions have normalised it (`print(s)`)."""
        if self.map_text(statement) == text:
            return True
        try:          # a record's text is untrusted: one isl cannot read, or in another space, differs
            return self.statement_map(statement).is_equal(isl.Map(text))
        except isl.Error:
            return False

    # -- kinds ---------------------------------------------------------------------------------
    def with_dims(self, dims: Iterable[Dim], note: str):
        return replace(self, dims=tuple(dims), history=self.history + (note,))

    def with_mark(self, loop: str, kind: Union[LoopKind, str], note: str, reduction: bool = False):
        """This schedule with loop `loop` also running as `kind` (a LoopKind, or a saved-file label
        such as "reduction_parallel"), unproven: primitives prove it (`rewrite.finish`)."""
        k = self.dim_index(loop)
        dims = list(self.dims)
        dims[k] = dims[k].with_kind(kind, reduction) if isinstance(kind, LoopKind) else dims[k].with_label(kind)
        if reduction and not dims[k].reduction:
            dims[k] = replace(dims[k], reduction=True)
        return self.with_dims(dims, note)
