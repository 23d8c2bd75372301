"""`Schedule`: when each statement instance runs, as one isl map per statement into a shared,
named schedule space, plus marks (parallel, vector, unroll) on named loop dimensions.

Design choice: the schedule is kept as per-statement affine maps into an n-dimensional time
space whose dimensions have names (`i`, `i_outer`, ...), rather than as an isl schedule tree.
Every primitive (tile, interchange, skew, fuse, ...) is then one quasi-affine map applied to
that space or to some statements, legality is one isl question over all dependences, and code
generation is `AstBuild.node_from_schedule_map` with the dimension names as loop iterators, so
a mark on a name lands on exactly the loop the user named.  `tree` gives the nested-outline view.

Dimensions are either *loops* (named, they become `for` loops) or *scalar* dimensions
(name `None`, constant per statement: they encode textual order, fusion and distribution).

Primitives (methods below; implemented in `primitives.py` and `nesting.py`, sharing `rewrite.py`)
return new Schedules and are proven before they return: every dependence must stay
lexicographically positive, and every loop marked parallel/vector/GPU must carry none (marks are
re-proved after each later primitive too).  Refusals raise `IllegalScheduleError` naming the
dependence and one concrete violating pair.  Loop naming: `tile(i=32)`/`split("i", 32)` turn `i`
into `i_outer` (tile loop) and `i_inner` (point loop); every other primitive keeps names.
`steps` records the calls, so `to_json`/`from_json` replay (and re-prove) them.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Dict, FrozenSet, Mapping, Optional, Tuple

import islpy as isl

from ..poly.islutil import fixed_value, isl_name
from ..poly.model import PolyModel

#: Marks a loop dimension may carry.
MARKS = ("parallel", "vector", "unroll", "reduction_parallel", "reduction_vector", "block", "thread", "packed")


@dataclass(frozen=True)
class Dim:
    """One schedule dimension: `name` is None for a scalar (ordering) dimension."""

    name: Optional[str]
    marks: FrozenSet[str] = frozenset()
    unroll: int = 0             # 0: none; -1: full; n>1: by factor n
    origin: Optional[str] = None  # the user index this loop iterates (for tile/split results)

    @property
    def is_loop(self) -> bool:
        return self.name is not None


def _fresh(base: str, taken: set) -> str:
    """`base`, or `base_1`, `base_2`, ... : a loop name no tensor, scalar, size or index uses."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


@functools.lru_cache(maxsize=4096)
def _parse_map(text: str) -> isl.Map:
    return isl.Map(text)


@dataclass(frozen=True)
class Schedule:
    """An immutable schedule of a kernel's statements.  Every primitive returns a new Schedule."""

    model: PolyModel
    maps: Tuple[Tuple[str, str], ...]     # (statement name, isl map text) in statement order
    dims: Tuple[Dim, ...]
    history: Tuple[str, ...] = ()
    options: Tuple[Tuple[str, object], ...] = ()
    #: The primitive calls (`rewrite.Step`) that built this schedule from source order; replayed
    #: by `from_json`.  Shorter than `history` only when something bypassed the primitives.
    steps: Tuple[object, ...] = ()

    # -- construction --------------------------------------------------------------------------
    @staticmethod
    def source_order(model: PolyModel) -> "Schedule":
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
        maps = tuple((st.name, str(model.statement_schedule(st))) for st in model.program.statements)
        return Schedule(model, maps, tuple(dims))

    # -- isl views -----------------------------------------------------------------------------
    @cached_property
    def _parsed_maps(self) -> Dict[str, isl.Map]:
        """Each statement's map parsed once (a Schedule never changes; isl values are immutable,
        so schedules that share a map text, as a primitive's input and output, share the parse)."""
        return {name: _parse_map(text) for name, text in self.maps}

    def statement_map(self, name: str) -> isl.Map:
        return self._parsed_maps[name]

    @cached_property
    def fixed_positions(self) -> Dict[str, Tuple[Optional[int], ...]]:
        """Per statement, the constant value of each dimension (None where it varies): the scalar
        dimensions that order statements, known without asking isl about pairs of instances."""
        return {name: tuple(fixed_value(m, k) for k in range(len(self.dims)))
                for name, m in self._parsed_maps.items()}

    @property
    def schedule_map(self) -> isl.UnionMap:
        """The union of statement schedules restricted to their domains."""
        out = isl.UnionMap.empty(isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
        for name, text in self.maps:
            out = out.union(isl.UnionMap.from_map(isl.Map(text).intersect_domain(self.model.domains[name])))
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
        from ..errors import PolycError
        raise PolycError(f"no loop named {loop!r} in this schedule; its loops are: {known}")

    def iterator_names(self) -> Tuple[str, ...]:
        """C names for every dimension (scalar dimensions get placeholders isl never prints)."""
        return tuple(isl_name(d.name) if d.name else f"_s{k}" for k, d in enumerate(self.dims))

    # -- marks ---------------------------------------------------------------------------------
    def with_dims(self, dims: Tuple[Dim, ...], note: str) -> "Schedule":
        return replace(self, dims=dims, history=self.history + (note,))

    def with_mark(self, loop: str, mark: str, note: str, **dim_changes) -> "Schedule":
        k = self.dim_index(loop)
        dims = list(self.dims)
        dims[k] = replace(dims[k], marks=dims[k].marks | {mark}, **dim_changes)
        return self.with_dims(tuple(dims), note)

    def option(self, key: str, default=None):
        return dict(self.options).get(key, default)

    # -- primitives (each returns a new Schedule, proven legal; see primitives.py) ---------------
    def tile(self, sizes: Optional[Mapping[str, int]] = None, /, **kw_sizes: int) -> "Schedule":
        """Rectangular tiling, `tile(i=32, j=32)`: loop `i` becomes `i_outer` (tiles) and
        `i_inner` (points); tile loops go just outside the outermost named loop."""
        from . import primitives
        return primitives.tile(self, sizes, **kw_sizes)

    def split(self, loop: str, factor: int, outer: Optional[str] = None,
              inner: Optional[str] = None) -> "Schedule":
        """Strip-mine `loop` by `factor` into `{loop}_outer` and `{loop}_inner` (or the names given)."""
        from . import primitives
        return primitives.split(self, loop, factor, outer, inner)

    def interchange(self, a: str, b: str) -> "Schedule":
        """Swap loops `a` and `b`."""
        from . import primitives
        return primitives.interchange(self, a, b)

    def reorder(self, *loops: str) -> "Schedule":
        """Put the named loops, in this order, into the positions they occupy together."""
        from . import primitives
        return primitives.reorder(self, *loops)

    def skew(self, loop: str, by_loop: str, factor: int = 1) -> "Schedule":
        """`loop += factor * by_loop`."""
        from . import primitives
        return primitives.skew(self, loop, by_loop, factor)

    def reverse(self, loop: str) -> "Schedule":
        """Run `loop` backwards."""
        from . import primitives
        return primitives.reverse(self, loop)

    def shift(self, statement, loop: str, amount: int) -> "Schedule":
        """Shift statement (name or position) by `amount` iterations of `loop`."""
        from . import primitives
        return primitives.shift(self, statement, loop, amount)

    def fuse(self, *statements, loop: Optional[str] = None) -> "Schedule":
        """Put the loop nests of the statements into the same loops (the deepest legal level, or
        up to `loop`)."""
        from . import nesting
        return nesting.fuse(self, *statements, loop=loop)

    def distribute(self, target, loop: Optional[str] = None) -> "Schedule":
        """Loop distribution: `distribute("i")` gives every statement under `i` its own `i` loop;
        `distribute("S1")` takes S1 out of the loops it shares (from the outermost, or `loop`)."""
        from . import nesting
        return nesting.distribute(self, target, loop=loop)

    def peel(self, loop: str, front: int = 1, back: int = 0) -> "Schedule":
        """Run the first `front` and last `back` iterations of `loop` as separate copies."""
        from . import nesting
        return nesting.peel(self, loop, front, back)

    def unroll(self, loop: str, factor: Optional[int] = None) -> "Schedule":
        """Unroll `loop` fully (constant trip count) or by `factor` (compiler hint)."""
        from . import primitives
        return primitives.unroll(self, loop, factor)

    def unroll_and_jam(self, loop: str, factor: int, separate: bool = False) -> "Schedule":
        """Unroll `loop` by `factor` and jam the copies into the innermost loop; `separate=True` runs a
        last, partial group of iterations on its own so full groups need no guards."""
        from . import primitives
        return primitives.unroll_and_jam(self, loop, factor, separate)

    def parallel(self, loop: str, reduction: bool = False) -> "Schedule":
        """Run `loop`'s iterations in parallel; `reduction=True` allows reduction-only dependences."""
        from . import primitives
        return primitives.parallel(self, loop, reduction)

    def parallel_reduction(self, loop: str) -> "Schedule":
        """`parallel(loop, reduction=True)`."""
        from . import primitives
        return primitives.parallel(self, loop, True)

    def vectorize(self, loop: str, reduction: bool = False) -> "Schedule":
        """Run the innermost loop `loop` as SIMD lanes; `reduction=True` allows a loop that carries
        only a reduction's updates of one element (reassociated in a vector accumulator)."""
        from . import primitives
        return primitives.vectorize(self, loop, reduction)

    def pack(self, statement, *, mr: Optional[int] = None, nv: Optional[int] = None, kc: Optional[int] = None,
             mc: Optional[int] = None, nc: Optional[int] = None, vector_bytes: Optional[int] = None,
             target=None) -> "Schedule":
        """Run contraction `statement` (`T[m, n] += X[m, k] * Y[k, n]`, recognised from its accesses)
        as BLAS does: operand panels packed into contiguous buffers, an `mr` x `nv`-vector register
        tile of `vector_bytes`-wide vectors, blocks of `kc`, `mc` and `nc` (defaults from `target`'s
        caches and SIMD width, a `pc.Target`; default `Target.host()`).  Proven legal;
        see polyc.schedule.packing."""
        from .packing import pack
        return pack(self, statement, mr=mr, nv=nv, kc=kc, mc=mc, nc=nc, vector_bytes=vector_bytes, target=target)

    def map_to_blocks(self, *loops: str) -> "Schedule":
        """Map loops to CUDA blocks (see polyc.schedule.gpu)."""
        from . import primitives
        return primitives.map_to_blocks(self, *loops)

    def map_to_threads(self, *loops: str) -> "Schedule":
        """Map loops to CUDA threads (see polyc.schedule.gpu)."""
        from . import primitives
        return primitives.map_to_threads(self, *loops)

    # -- views ---------------------------------------------------------------------------------
    @property
    def tree(self) -> str:
        """The schedule-tree view as nested outline text (sequence / loop / mark / statement)."""
        from .outline import tree_text
        return tree_text(self)

    def to_json(self) -> str:
        """JSON holding the primitive calls (replayed, and re-proved, by `Schedule.from_json`)."""
        from .serialize import to_json
        return to_json(self)

    @staticmethod
    def from_json(kernel_or_model, text: str) -> "Schedule":
        """Rebuild a schedule of this kernel from `to_json` text by replaying its primitives (or, for
        a schedule saved as maps, proving them); a malformed or tampered file is a ScheduleFileError."""
        from .serialize import from_json
        return from_json(kernel_or_model, text)

    def to_text(self) -> str:
        """Human-readable: the primitive chain as Python, then the loop outline."""
        from .serialize import to_text
        return to_text(self)

    def __str__(self) -> str:
        from .outline import describe
        return describe(self)

    def _repr_html_(self) -> str:
        from ..display import html_of
        return html_of("schedule", self)

    def __repr__(self) -> str:
        steps = ".".join(self.history) if self.history else "source order"
        return f"<Schedule of {self.model.program.name}: {steps}; loops {', '.join(self.loop_names)}>"
