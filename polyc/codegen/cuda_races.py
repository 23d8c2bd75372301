"""Races a CUDA mapping would have where no barrier can order two instances.

`map_to_blocks` and `map_to_threads` prove that the mapped loop itself carries no dependence.
That is not all a kernel needs.  Two instances run by different blocks are never ordered within a
kernel, and two instances run by different threads of a block are ordered only by a barrier,
which the generated code places between the uniform parts of a block (see `cuda_ir`) but cannot
place inside per-thread code (thread loops are stride loops: threads run different numbers of
iterations, and a barrier there would diverge).  So the builder asks, before it prints:

- in a sequence of code under block loops, whether a dependence joins two of its parts at
  different values of a block loop inside them (`B[i]` written by block `j = 0`, read by every
  block `j`; or two sibling block loops reading each other's elements across blocks);
- inside a thread loop, whether a serial loop or a sequence that holds further thread loops has
  a dependence between instances at different values of those thread loops (a time loop between
  two thread loops; a statement of thread `j = 0` read by every thread `j`).

Either is refused with `IllegalScheduleError`, naming one concrete pair of instances.
"""
from __future__ import annotations

from typing import List, Sequence

from ..errors import IllegalScheduleError
from ..poly.islutil import isl_budget
from ..schedule.legality import describe_pair, differing_pairs
from ..schedule.schedule import Schedule
from .loop_ast import Call, Node, walk


class RaceCheck:
    """The dependences of one mapped schedule, asked about the parts of its kernels."""

    def __init__(self, schedule: Schedule):
        self.schedule = schedule
        self.deps = list(schedule.model.dependences)

    def _levels(self, loops: Sequence[str]) -> List[int]:
        names = [d.name for d in self.schedule.dims]
        return list(dict.fromkeys(names.index(v) for v in loops if v in names))

    def between(self, parts: Sequence[Sequence[str]], loops: Sequence[str], kind: str) -> None:
        """Refuse a dependence joining two of `parts` (statement names of consecutive pieces of
        code) at different values of the `kind`-mapped `loops` inside them."""
        levels = self._levels(loops)
        if not levels or len(parts) < 2:
            return
        owner = {st: k for k, part in enumerate(parts) for st in part}
        for dep in self.deps:
            if dep.source not in owner or dep.sink not in owner or owner[dep.source] == owner[dep.sink]:
                continue
            self._refuse_if_differing(dep, levels, kind, "in different parts of the same kernel")

    def within(self, statements: Sequence[str], loops: Sequence[str], serial: str) -> None:
        """Refuse a dependence among `statements` (inside per-thread serial loop `serial`) at
        different values of the thread loops `loops` inside it."""
        levels = self._levels(loops)
        if not levels:
            return
        mine = set(statements)
        for dep in self.deps:
            if dep.source in mine and dep.sink in mine:
                self._refuse_if_differing(dep, levels, "thread", f"inside the serial loop {serial!r}")

    def _refuse_if_differing(self, dep, levels: List[int], kind: str, where: str) -> None:
        with isl_budget("checking the CUDA mapping for races"):
            pairs = differing_pairs(self.schedule, dep, levels)
        if pairs is None:
            return
        loops = ", ".join(dict.fromkeys(repr(self.schedule.dims[k].name) for k in levels))
        cure = ("blocks cannot synchronise: keep both instances in one block (map fewer loops to "
                "blocks) or split the kernel" if kind == "block" else
                "a barrier cannot order threads inside per-thread code: map the thread loops "
                "directly inside one another, with serial loops and statements inside them")
        raise IllegalScheduleError(
            f"the CUDA mapping races: {describe_pair(self.schedule, dep, pairs)}; the two instances run "
            f"on different {kind}s (loop(s) {loops}) {where}, and {cure}", dependence=dep)


def statements_of(parts: Sequence[Node]) -> List[List[str]]:
    """The statements of each part, in order, each once."""
    return [list(dict.fromkeys(x.statement for x in walk(p) if isinstance(x, Call))) for p in parts]
