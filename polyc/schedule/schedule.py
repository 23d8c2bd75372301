"""`Schedule`: when each statement instance runs, as one isl map per statement into a shared,
named schedule space, plus how each named loop runs (parallel, vectorized, unrolled, GPU).

Design choice: the schedule is kept as per-statement affine maps into an n-dimensional time
space whose dimensions have names (`i`, `i_outer`, ...), rather than as an isl schedule tree.
Every primitive (tile, interchange, skew, fuse, ...) is then one quasi-affine map applied to
that space or to some statements, legality is one isl question over all dependences, and code
generation is `AstBuild.node_from_schedule_map` with the dimension names as loop iterators, so
a kind on a name lands on exactly the loop the user named.  `tree` gives the nested-outline view.

Layers: the typed state (`state.ScheduleState`, `Dim`, `LoopKind`, `Unroll`) is below the
primitives (`polyc.schedule.primitives`, one module each, sharing `rewrite.py`), which the
registry (`registry.PRIMITIVES`) collects; this class adds one method per primitive, each
dispatching through the registry, and the views.  Nothing below imports this module.

Primitives return new Schedules and are proven before they return: every dependence must stay
lexicographically positive, and every loop running parallel / vectorized / on the GPU must carry
none (re-proved after each later primitive too).  Refusals raise `IllegalScheduleError` naming
the dependence and one concrete violating pair.  Loop naming: `tile(i=32)`/`split("i", 32)` turn
`i` into `i_outer` (tile loop) and `i_inner` (point loop); every other primitive keeps names.
`steps` records the calls, so `to_json`/`from_json` replay (and re-prove) them.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from . import serialize
from .outline import describe, tree_text
from .registry import ALIASES, PRIMITIVES
from .state import LABELS, Dim, LoopKind, ScheduleState, Unroll

__all__ = ["Schedule", "Dim", "LoopKind", "Unroll", "MARKS"]

#: The labels a loop may carry in saved files (see `state.Dim.labels`).
MARKS = LABELS


class Schedule(ScheduleState):
    """An immutable schedule of a kernel's statements.  Every primitive returns a new Schedule."""

    # -- primitives (each returns a new Schedule, proven legal; see polyc.schedule.primitives) --
    def __reduce__(self):
        from ..errors import not_picklable
        raise not_picklable("a schedule", "schedule.to_json() (Schedule.from_json(kernel, text) reads it back)")

    def __copy__(self) -> "Schedule":
        return self       # immutable: a copy is itself

    def __deepcopy__(self, memo: dict) -> "Schedule":
        return self

    def tile(self, sizes: Optional[Mapping[str, int]] = None, /, **kw_sizes: int) -> "Schedule":
        """Rectangular tiling, `tile(i=32, j=32)`: loop `i` becomes `i_outer` (tiles) and
        `i_inner` (points); tile loops go just outside the outermost named loop."""
        return PRIMITIVES["tile"].apply(self, sizes, **kw_sizes)

    def split(self, loop: str, factor: int, outer: Optional[str] = None,
              inner: Optional[str] = None) -> "Schedule":
        """Strip-mine `loop` by `factor` into `{loop}_outer` and `{loop}_inner` (or the names given)."""
        return PRIMITIVES["split"].apply(self, loop, factor, outer, inner)

    def interchange(self, a: str, b: str, statements=None) -> "Schedule":
        """Swap loops `a` and `b`; with `statements` (names or positions) for those statements only,
        the others staying on `a` (see polyc.schedule.primitives.interchange)."""
        return PRIMITIVES["interchange"].apply(self, a, b, statements=statements)

    def reorder(self, *loops: str) -> "Schedule":
        """Put the named loops, in this order, into the positions they occupy together."""
        return PRIMITIVES["reorder"].apply(self, *loops)

    def skew(self, loop: str, by_loop: str, factor: int = 1) -> "Schedule":
        """`loop += factor * by_loop`."""
        return PRIMITIVES["skew"].apply(self, loop, by_loop, factor)

    def reverse(self, loop: str) -> "Schedule":
        """Run `loop` backwards."""
        return PRIMITIVES["reverse"].apply(self, loop)

    def shift(self, statement, loop: str, amount: int) -> "Schedule":
        """Shift statement (name or position) by `amount` iterations of `loop`."""
        return PRIMITIVES["shift"].apply(self, statement, loop, amount)

    def fuse(self, *statements, loop: Optional[str] = None) -> "Schedule":
        """Put the loop nests of the statements into the same loops (the deepest legal level, or
        up to `loop`)."""
        return PRIMITIVES["fuse"].apply(self, *statements, loop=loop)

    def distribute(self, target, loop: Optional[str] = None) -> "Schedule":
        """Loop distribution: `distribute("i")` gives every statement under `i` its own `i` loop;
        `distribute("S1")` takes S1 out of the loops it shares (from the outermost, or `loop`)."""
        return PRIMITIVES["distribute"].apply(self, target, loop=loop)

    def peel(self, loop: str, front: int = 1, back: int = 0) -> "Schedule":
        """Run the first `front` and last `back` iterations of `loop` as separate copies."""
        return PRIMITIVES["peel"].apply(self, loop, front, back)

    def index_split(self, loop: str, at: str, offset: int = 0) -> "Schedule":
        """Run `loop` in three parts: below, equal to and above the enclosing loop `at` (+ `offset`)."""
        return PRIMITIVES["index_split"].apply(self, loop, at, offset)

    def unroll(self, loop: str, factor: Optional[int] = None) -> "Schedule":
        """Unroll `loop` fully (constant trip count) or by `factor` (compiler hint)."""
        return PRIMITIVES["unroll"].apply(self, loop, factor)

    def unroll_and_jam(self, loop: str, factor: int, separate: bool = False) -> "Schedule":
        """Unroll `loop` by `factor` and jam the copies into the innermost loop; `separate=True` runs a
        last, partial group of iterations on its own so full groups need no guards."""
        return PRIMITIVES["unroll_and_jam"].apply(self, loop, factor, separate)

    def parallel(self, loop: str, reduction: bool = False) -> "Schedule":
        """Run `loop`'s iterations in parallel; `reduction=True` allows reduction-only dependences."""
        return PRIMITIVES["parallel"].apply(self, loop, reduction)

    def parallel_reduction(self, loop: str) -> "Schedule":
        """`parallel(loop, reduction=True)`."""
        return ALIASES["parallel_reduction"].apply(self, loop)

    def vectorize(self, loop: str, reduction: bool = False) -> "Schedule":
        """Run the innermost loop `loop` as SIMD lanes; `reduction=True` allows a loop that carries
        only a reduction's updates of one element (reassociated in a vector accumulator)."""
        return PRIMITIVES["vectorize"].apply(self, loop, reduction)

    def pack(self, statement, *, mr: Optional[int] = None, nv: Optional[int] = None, kc: Optional[int] = None,
             mc: Optional[int] = None, nc: Optional[int] = None, vector_bytes: Optional[int] = None,
             lanes: Optional[str] = None, target=None) -> "Schedule":
        """Run contraction `statement` (`T[m, n] += X[m, k] * Y[k, n]`, recognised from its accesses)
        as BLAS does: operand panels packed into contiguous buffers, an `mr` x `nv`-vector register
        tile of `vector_bytes`-wide vectors, blocks of `kc`, `mc` and `nc` (defaults from `target`'s
        caches and SIMD width, a `pc.Target`; default `Target.host()`).  The SIMD lanes run along
        the loops the target is laid out along, or along those of the factor that reads tensor
        `lanes` (the other factor's loops are then the rows).  Proven legal; see
        polyc.schedule.packing."""
        return PRIMITIVES["pack"].apply(self, statement, mr=mr, nv=nv, kc=kc, mc=mc, nc=nc,
                                        vector_bytes=vector_bytes, lanes=lanes, target=target)

    def map_to_blocks(self, *loops: str) -> "Schedule":
        """Map loops to CUDA blocks (see polyc.schedule.gpu)."""
        return PRIMITIVES["map_to_blocks"].apply(self, *loops)

    def map_to_threads(self, *loops: str) -> "Schedule":
        """Map loops to CUDA threads (see polyc.schedule.gpu)."""
        return PRIMITIVES["map_to_threads"].apply(self, *loops)

    # -- views ---------------------------------------------------------------------------------
    @property
    def storage(self):
        """The storage this schedule implies on the C target (`storage.StoragePlan`: row buffers,
        per-thread copies of reused intermediates and of reduced arrays), each proven by isl."""
        from .storage import storage_plan
        return storage_plan(self)

    @property
    def tree(self) -> str:
        """The schedule-tree view as nested outline text (sequence / loop / mark / statement)."""
        return tree_text(self)

    def to_json(self) -> str:
        """JSON holding the primitive calls (replayed, and re-proved, by `Schedule.from_json`)."""
        return serialize.to_json(self)

    @staticmethod
    def from_json(kernel_or_model: Any, text: Union[str, bytes]) -> "Schedule":
        """Rebuild a schedule of this kernel from `to_json` text by replaying its primitives (or, for
        a schedule saved as maps, proving them); a malformed or tampered file is a ScheduleFileError."""
        return serialize.from_json(Schedule.source_order(serialize.model_of(kernel_or_model)), text)

    def to_text(self) -> str:
        """Human-readable: the primitive chain as Python, then the loop outline."""
        return serialize.to_text(self)

    def __str__(self) -> str:
        return describe(self)

    def _repr_html_(self) -> str:
        from ..display import html_of
        return html_of("schedule", self)

    def __repr__(self) -> str:
        steps = ".".join(self.history) if self.history else "source order"
        return f"<Schedule of {self.model.program.name}: {steps}; loops {', '.join(self.loop_names)}>"
