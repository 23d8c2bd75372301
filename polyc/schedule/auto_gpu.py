"""The automatic CUDA schedule: every decision of a GPU mapping, made here and recorded in the
`Schedule` that code generation then prints as it is.

`auto_gpu_schedule(schedule)` returns an explicitly mapped schedule:

- the loops run on blocks and threads as `gpu.default_gpu_mapping` plans them (marks "block",
  "thread", and "reduction_parallel" for tree reductions), every mark proven through
  `legality.check_parallel` (see `gpu.py`);
- on a source-order schedule, each contraction that is its own top-level nest
  (`poly.contraction.tiled_contraction`) is planned as a shared-memory, register-tiled kernel: a
  `GPUContractionPlan` in the schedule (`Schedule.gpu_contractions`), with the `= const`
  statement right before it (what `+=!` produces) fused as its start value.  The CUDA generator
  prints the plan's kernel in place of the loops of that statement (`codegen.cuda_contraction`).

A schedule that already maps some loop is the user's mapping and is returned unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, Optional, Tuple

from ..ir import Const
from ..poly.contraction import TiledContraction, box_extents, tiled_contraction
from ..target import Target
from .auto import reassociate_default
from .gpu import default_gpu_mapping, is_mapped
from . import saved_auto, serialize
from .schedule import Schedule


#: Tile of C per block (BM x BN), K step (BK) and register tile per thread (TM x TN): 256 threads,
#: each an 8 x 8 tile; the A and B tiles are double-buffered in shared memory.  Eight-byte elements
#: take half the K step, so both buffers stay within the 48 KB of static shared memory.
TILE = (128, 128, 16, 8, 8)
TILE_WIDE = (128, 128, 8, 8, 8)


#: Static shared memory a kernel may declare (CUDA's limit without the dynamic opt-in).
STATIC_SHARED_BYTES = 48 * 1024


def tile_for(elem_bytes: int) -> Tuple[int, int, int, int, int]:
    """The contraction tile for elements of `elem_bytes` bytes."""
    return TILE_WIDE if elem_bytes > 4 else TILE


def staged_shared_bytes(tile: Tuple[int, int, int, int, int], elem_bytes: int) -> int:
    """Shared memory of the kernel's two buffers of the A (padded by 4 columns) and B tiles."""
    bm, bn, bk, _, _ = tile
    return 2 * (bk * (bm + 4) + bk * bn) * elem_bytes


def k_step(tile: Tuple[int, int, int, int, int], elem_bytes: int) -> int:
    """The K step the kernel uses for `elem_bytes`-byte elements: the tile's, halved while the
    buffers would exceed static shared memory (a plan made before the element type was known)."""
    bk = tile[2]
    while bk > 1 and staged_shared_bytes(tile[:2] + (bk,) + tile[3:], elem_bytes) > STATIC_SHARED_BYTES:
        bk //= 2
    return bk


@dataclass(frozen=True)
class GPUContractionPlan:
    """A contraction statement run as one tiled kernel (see the module docstring).

    `init`: the `C = const` statement fused as the accumulators' start value (None: start from C's
    old values); `maps`: the schedule map texts of the statements when planned (a later primitive
    that changes them disables the plan, as for `PackPlan`); `tile`: (BM, BN, BK, TM, TN);
    `narrow`: tiles for products with few rows or columns, chosen at launch time from the sizes:
    ("rows", tile) runs when the row extent is at most the tile's BM, ("cols", tile) likewise for
    the columns (a convolution's 64 output channels would leave half of a 128-row tile idle)."""

    contraction: TiledContraction
    init: Optional[str]
    init_value: Optional[Const]
    maps: Tuple[Tuple[str, str], ...]
    tile: Tuple[int, int, int, int, int] = TILE
    narrow: Tuple[Tuple[str, Tuple[int, int, int, int, int]], ...] = ()

    @property
    def statement(self) -> str:
        return self.contraction.statement

    @property
    def threads(self) -> int:
        return threads_of(self.tile)


def threads_of(tile: Tuple[int, int, int, int, int]) -> int:
    """Threads per block of the tiled kernel of `tile`: one per TM x TN register tile."""
    bm, bn, _, tm, tn = tile
    return (bm // tm) * (bn // tn)


def narrow_tiles(tile: Tuple[int, int, int, int, int]) -> Tuple[Tuple[str, Tuple[int, int, int, int, int]], ...]:
    """Half-height and half-width versions of `tile` (half the threads, same K step and register tile)."""
    bm, bn, bk, tm, tn = tile
    return (("rows", (bm // 2, bn, bk, tm, tn)), ("cols", (bm, bn // 2, bk, tm, tn)))


def _fusable_init(schedule: Schedule, c: TiledContraction) -> Optional[str]:
    """`C[b?, i, j] = const` right before the contraction, over the same (b, i, j) box."""
    program = schedule.model.program
    names = [s.name for s in program.statements]
    idx = names.index(c.statement)
    if idx == 0:
        return None
    st, init = program.statement(c.statement), program.statements[idx - 1]
    if init.update is not None or not isinstance(init.value, Const) or init.target != st.target:
        return None
    if set(init.iterators) != set(st.iterators) - set(c.k):
        return None
    own = dict(c.extents)
    return init.name if box_extents(schedule.model, init) == {v: e for v, e in own.items() if v not in c.k} else None


def _alone_at_top(schedule: Schedule, name: str) -> bool:
    """Whether statement `name` is the only one at its outermost schedule position: its own nest."""
    fixed = schedule.fixed_positions
    first = fixed[name][0] if fixed[name] else None
    return first is not None and sum(1 for v in fixed.values() if v and v[0] == first) == 1


def fits_device(tile: Tuple[int, int, int, int, int], elem_bytes: int, target: Optional[Target]) -> bool:
    """Whether the tiled contraction kernel of `tile` for `elem_bytes`-byte elements fits within
    `target`'s per-block limits (None: current GPUs): shared memory for two buffers of the A and B
    tiles (A padded by 4 columns against bank conflicts), threads per block, and registers (a
    TM x TN accumulator tile, TM + TN operands, the next K tile's share per thread and some
    addressing; doubles take two 32-bit registers)."""
    if target is None:
        return True
    tile = tile[:2] + (k_step(tile, elem_bytes),) + tile[3:]
    bm, bn, bk, tm, tn = tile
    threads = threads_of(tile)
    shared = staged_shared_bytes(tile, elem_bytes)
    words = max(1, elem_bytes // 4)
    staged = (bm * bk + bk * bn) // threads
    registers = threads * ((tm * tn + tm + tn + staged) * words + 48)
    return (shared <= target.shared_memory_bytes and threads <= target.max_threads_per_block
            and registers <= target.registers_per_block)


def _element_bytes(schedule: Schedule, statement: str) -> Optional[int]:
    """The widest declared element size among the tensors of `statement` (an undeclared output takes
    its operands' type), or None when none is declared (a call may pass up to 8-byte elements)."""
    program = schedule.model.program
    st = program.statement(statement)
    dtypes = [program.tensor(a.tensor).dtype for a in (st.target,) + tuple(st.value.accesses())]
    known = [d.bits // 8 for d in dtypes if d is not None]
    return max(known) if known else None


def contraction_plans(schedule: Schedule, target: Optional[Target] = None) -> Tuple[GPUContractionPlan, ...]:
    """Tiled-kernel plans for the contractions of a source-order schedule that are their own nests
    and whose kernel fits `target`'s per-block limits (`fits_device`)."""
    if schedule.history or not schedule.dims or schedule.dims[0].is_loop:
        return ()
    program = schedule.model.program
    plans = []
    maps = schedule.map_texts
    for st in program.statements:
        c = tiled_contraction(schedule.model, st.name)
        if c is None or not _alone_at_top(schedule, st.name):
            continue
        declared = _element_bytes(schedule, st.name)
        tile = tile_for(declared or 4)
        if not fits_device(tile, declared or 8, target):
            continue
        init = _fusable_init(schedule, c)
        if init is not None and not _alone_at_top(schedule, init):
            init = None
        value = program.statement(init).value if init is not None else None
        names = (st.name,) + ((init,) if init else ())
        narrow = tuple(v for v in narrow_tiles(tile) if fits_device(v[1], declared or 8, target))
        plans.append(GPUContractionPlan(c, init, value, tuple((n, maps[n]) for n in names), tile, narrow))
    return tuple(plans)


def gpu_contraction_plans(schedule: Schedule) -> Dict[str, GPUContractionPlan]:
    """The plans recorded in `schedule` that still hold (their statements' maps are unchanged)."""
    statements = set(schedule.statements)
    return {p.statement: p for p in schedule.gpu_contractions
            if all(n in statements and schedule.has_map(n, text) for n, text in p.maps)}


def auto_gpu_schedule(schedule: Schedule, target: Optional[Target] = None,
                      reassociate: Optional[bool] = None) -> Schedule:
    """The automatic CUDA schedule of `schedule` (usually `kernel.schedule()`), explicitly mapped.

    Contractions get tiled-kernel plans; the other loops `default_gpu_mapping` (whose row fusion
    is skipped when there are plans: a contraction's nest stays its own).  A schedule that already
    maps some loop is returned unchanged.  `target` (a CUDA `polyc.Target`; None: current GPUs)
    bounds the tiled kernels by its shared memory, registers and threads per block.
    `reassociate` is `schedule="auto"`'s on the CPU (`auto.reassociate_default`): by default loop
    kernels keep every reduction in their written order (no tree reductions; a tiled product adds
    its terms in order, one thread per result) and Einstein kernels' reductions may be
    reassociated."""
    if is_mapped(schedule):
        return schedule
    free = reassociate_default(schedule.model.program, reassociate) != "none"
    plans = contraction_plans(schedule, target)
    planned = {n for p in plans for n, _ in p.maps}
    mapped = default_gpu_mapping(schedule, row_fusion=not plans, keep=planned, reassociate=free)
    if not plans:
        return mapped
    maps = mapped.map_texts   # the plans hold for the mapped statements' maps
    plans = tuple(replace(p, maps=tuple((n, maps[n]) for n, _ in p.maps)) for p in plans)
    note = f"tiled_contraction({', '.join(p.statement for p in plans)})"
    return replace(mapped, gpu_contractions=plans, history=mapped.history + (note,))


def _rederive_saved(start: Schedule, restored: Schedule, summaries: list, saved_dims) -> Optional[Schedule]:
    """A saved CUDA schedule's contraction plans made again (see `saved_auto.rederive_gpu`)."""
    return saved_auto.rederive_gpu(start, restored, summaries, saved_dims, auto_gpu_schedule, serialize._dim_dict)


serialize.REDERIVERS["gpu_contractions"] = _rederive_saved
