"""Running row blocks (`blocking`): the units of a program's row loop, block of rows after block.

A block binds the blocked size to its row count, hands the operators rows `r0:r1` of the tensors
computed whole that they read by rows, writes the program's outputs into rows `r0:r1` of whole
arrays, and keeps the intermediates between its operators in one block's buffers.  With several
threads the blocks are dealt out in contiguous runs, one run per thread (the caller's included),
each running single-threaded kernels (`openmp_team(1)`) on buffers of its own: blocks are
independent (`blocking`), and ctypes releases the GIL while a kernel runs.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..runtime.aligned import aligned_bytes
from ..runtime.loader import openmp_team
from .blocking import RowBlocks
from ..runtime.forksafe import ForkSafeLock


@dataclass(frozen=True)
class RowLoop:
    """The units from `first` on run once per block of `rows` rows (`blocks.size` is bound to the
    block's row count), the others once, before; `threads` run blocks side by side."""

    blocks: RowBlocks
    rows: int
    first: int
    threads: int = 1
    itemsize: int = 8
    #: the intermediates the loop's units hand each other (each thread beyond the first has its own)
    buffers: Tuple[str, ...] = ()
    #: every unit of the loop is a compiled C group, so the blocks can run in one C loop (`row_driver`)
    in_c: bool = False
    #: (output, operator) of the sums each thread beyond the first adds its blocks into a copy of,
    #: combined into the output after the loop (`blocking.RowBlocks.combine`; C loop only)
    combine: Tuple[Tuple[str, str], ...] = ()

    def describe(self, blocked: Sequence[str], before: Sequence[str]) -> str:
        """The plan's line for the loop (`explain()`)."""
        b = self.blocks
        sums = ", ".join(b.accumulated)
        return (f"rows {b.extent} in blocks of {self.rows} ({b.size}): {', '.join(blocked)} run per block"
                + (f" on {self.threads} threads, a run of blocks each" if self.threads > 1 else "")
                + (", in one C loop" if self.in_c else ", from Python (a vendor call among them)")
                + (f"; {', '.join(before)} once before" if before else "")
                + (f"; intermediates per block: {', '.join(b.intermediates)}" if b.intermediates else "")
                + (f"; each thread reduces its blocks into a copy of {sums}, combined into it at the end"
                   if self.combine else f"; {sums} reduced over the blocks in order" if sums else ""))


def block_arrays(loop: RowLoop, env: Mapping[str, Any], sizes: Mapping[str, int], r0: int, r1: int, *,
                 outputs: Set[str], buffer: Callable[..., Any],
                 slots: Optional[Mapping[str, np.ndarray]] = None) -> Tuple[Dict[str, Any], Callable[[str], Any]]:
    """The arrays of the block of rows `r0:r1`: `env` (the program's outputs in it whole) with the
    rows of the tensors read by rows, and `out(name)`: rows `r0:r1` of an output, else the block's
    buffer of an intermediate (the planned one, or a worker's own in `slots`)."""
    b = loop.blocks
    at = dict(sizes)
    at[b.size] = r1 - r0
    local = dict(env)
    for alias, whole in b.sliced:
        local[alias] = env[whole][r0:r1]

    def out(t: str) -> Any:
        return env[t][r0:r1] if t in outputs else buffer(t, at, b.handles, slots)
    return local, out


class BlockWorkers:
    """The threads that run row blocks beside the caller's, and each one's buffers, kept between
    calls (made on first use; one buffer set per plan and worker, the latest 16 kept)."""

    def __init__(self, name: str):
        self.name = name
        self._lock = ForkSafeLock()
        self._pool: Optional[ThreadPoolExecutor] = None
        self._size = 0
        self._sets: Dict[Tuple[int, int, int], Tuple[RowLoop, Dict[str, np.ndarray]]] = {}

    def pool(self, n: int) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._size < n:
                self._pool, self._size = ThreadPoolExecutor(max_workers=n, thread_name_prefix=f"polyc-{self.name}"), n
            return self._pool

    def buffers(self, loop: RowLoop, sizes: Mapping[str, int], worker: int,
                nbytes: Callable[[str, Mapping[str, int]], int]) -> Dict[str, np.ndarray]:
        """Worker `worker`'s buffers for one block's intermediates, at full block size (a set per
        calling thread too: two threads calling the program at once must not share them)."""
        key = (id(loop), threading.get_ident(), worker)
        with self._lock:
            found = self._sets.get(key)
            if found is None or found[0] is not loop:
                at = dict(sizes)
                at[loop.blocks.size] = loop.rows
                found = self._sets[key] = (loop, {t: aligned_bytes(nbytes(t, at)) for t in loop.buffers})
                if len(self._sets) > 16:
                    self._sets.pop(next(iter(self._sets)))
            return found[1]


def run_blocks(loop: RowLoop, units: Sequence[Any], env: Dict[str, Any], sizes: Mapping[str, int], *,
               outputs: Set[str], buffer: Callable[..., Any], run_unit: Callable[..., None],
               workers: BlockWorkers, nbytes: Callable[[str, Mapping[str, int]], int]) -> None:
    """Every unit of `units` on rows r0:r1, block after block (see the module docstring); `env`
    holds the program's `outputs` whole.  `buffer(name, sizes, handles, slots)`: a view of an
    intermediate's buffer (the caller's planned one, or the worker's own in `slots`);
    `run_unit(unit, env, out)` runs one unit with its results in `out(name)`."""
    total = loop.blocks.extent.evaluate(sizes)
    starts = list(range(0, total, loop.rows))
    parallel = min(loop.threads, len(starts))
    per = -(-len(starts) // max(1, parallel))
    shares = [starts[k * per:(k + 1) * per] for k in range(max(1, parallel))]

    def in_blocks(share: Sequence[int], slots: Optional[Mapping[str, np.ndarray]]) -> None:
        for r0 in share:
            local, out = block_arrays(loop, env, sizes, r0, min(total, r0 + loop.rows), outputs=outputs,
                                      buffer=buffer, slots=slots)
            for u in units:
                run_unit(u, local, out)

    def serial_team(share: Sequence[int], slots: Optional[Mapping[str, np.ndarray]]) -> None:
        with openmp_team(1):
            in_blocks(share, slots)

    if parallel <= 1:
        in_blocks(starts, None)
    else:
        pool = workers.pool(parallel - 1)
        pending = [pool.submit(serial_team, share, workers.buffers(loop, sizes, k, nbytes))
                   for k, share in enumerate(shares[1:], 1)]
        serial_team(shares[0], None)
        for f in pending:
            f.result()
