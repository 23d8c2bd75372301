"""Memory planning: the intermediates between execution steps get buffers by liveness, reused once
their tensor is dead; a step's own (contracted) scratch lives only while it runs.

Peaks are in bytes at the call's concrete sizes.  The *unfused* peak is what running every
operator on its own would hold (each operator's internal intermediates at full size while it runs,
every intermediate tensor from its producer to its last consumer, freed right after: an eager
runtime with a perfect allocator); the *planned* peak is this plan's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple


@dataclass(frozen=True)
class Step:
    """One execution step: the intermediate tensors it produces and reads, and its own scratch bytes."""

    name: str
    produces: Tuple[str, ...]
    reads: Tuple[str, ...]
    scratch: int


@dataclass(frozen=True)
class MemoryPlan:
    """Buffers for intermediates: `slot_of[tensor]` indexes `slot_bytes`; peaks in bytes."""

    slot_of: Mapping[str, int]
    slot_bytes: Tuple[int, ...]
    planned_peak: int
    unfused_peak: int
    no_reuse_bytes: int

    @property
    def ratio(self) -> float:
        return self.unfused_peak / self.planned_peak if self.planned_peak else float("inf")

    def summary(self) -> str:
        if not self.planned_peak and not self.unfused_peak:
            return "intermediates: none"
        ratio = self.ratio
        compared = (f"{ratio:.1f}x smaller" if ratio >= 1 else
                    "larger: re-laid-out operands or buffers fusion adds" if ratio == 0 else
                    f"{1 / ratio:.1f}x larger: re-laid-out operands or buffers fusion adds")
        return (f"intermediates: planned peak {_mib(self.planned_peak)} in {len(self.slot_bytes)} buffer(s) "
                f"vs unfused {_mib(self.unfused_peak)} ({compared}; {_mib(self.no_reuse_bytes)} with no reuse)")


def _mib(n: int) -> str:
    return f"{n / 2**20:.3f} MiB" if n >= 2**14 else f"{n} B"


def _last_use(steps: Sequence[Step], keep: Sequence[str]) -> Dict[str, int]:
    last: Dict[str, int] = {}
    for k, st in enumerate(steps):
        for t in st.produces + st.reads:
            last[t] = k
    for t in keep:
        last[t] = len(steps)
    return last


def peak(steps: Sequence[Step], sizes: Mapping[str, int], outputs: Sequence[str], keep: Sequence[str] = ()) -> int:
    """The most bytes of intermediates (not program inputs or outputs) live during any step
    (`keep`: live from their production to the end)."""
    last = _last_use(steps, keep)
    born = {t: k for k, st in enumerate(steps) for t in st.produces}
    best = 0
    for k, st in enumerate(steps):
        live = sum(sizes[t] for t, b in born.items() if t not in outputs and b <= k <= last[t])
        best = max(best, live + st.scratch)
    return best


def plan_buffers(steps: Sequence[Step], sizes: Mapping[str, int], outputs: Sequence[str],
                 unfused_steps: Sequence[Step], unfused_sizes: Optional[Mapping[str, int]] = None,
                 keep: Sequence[str] = ()) -> MemoryPlan:
    """Greedy best-fit assignment of intermediates to reusable buffers, in step order.  `sizes`:
    bytes per tensor as the steps hold them (one block's rows where they run in row blocks);
    `unfused_sizes` (default `sizes`): as whole tensors, for the unfused peak.  `keep`: tensors
    live until the last step (those the steps of a row-block loop read again in every block)."""
    whole = sizes if unfused_sizes is None else unfused_sizes
    last = _last_use(steps, keep)
    slots: List[int] = []
    free: List[int] = []
    slot_of: Dict[str, int] = {}
    for k, st in enumerate(steps):
        for t in st.produces:
            if t in outputs:
                continue
            fitting = [s for s in free if slots[s] >= sizes[t]]
            if fitting:
                s = min(fitting, key=lambda x: slots[x])
            elif free:  # grow the largest free buffer rather than add one
                s = max(free, key=lambda x: slots[x])
                slots[s] = sizes[t]
            else:
                s = len(slots)
                slots.append(sizes[t])
            if s in free:
                free.remove(s)
            slot_of[t] = s
        for t in set(st.produces + st.reads):
            if t in slot_of and last[t] == k:
                free.append(slot_of[t])
    scratch = max((st.scratch for st in steps), default=0)
    top = peak(steps, sizes, outputs, keep)
    planned = max(sum(slots) + scratch, top) if slots else top
    total = sum(whole[t] for st in unfused_steps for t in st.produces if t not in outputs) + \
        sum(st.scratch for st in unfused_steps)
    return MemoryPlan(slot_of, tuple(slots), planned, peak(unfused_steps, whole, outputs), total)
