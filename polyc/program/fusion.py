"""Fusion of operators into groups, each compiled as one kernel whose intermediates are contracted.

The rule (greedy, in call order): a node joins the group before it when

1. it reads a tensor the group produces (producer-consumer; unrelated operators are not fused),
2. fusing every statement of the group and the node at the outermost loop is legal: proven by
   `Schedule.fuse` on the unfused kernel (`IllegalScheduleError` otherwise), and
3. it pays: every tensor it reads from the group is then *contractible* (each element lives inside
   one iteration of the fused loop, proven with isl in `contraction`), so the intermediate never
   makes a round trip through memory.  Fusion never recomputes anything (the polyhedral fuse
   interleaves instances; it does not duplicate them).
4. neither it nor the group is a matrix product the program keeps apart: fused row by row, a
   product loses its packed (C) or tiled (CUDA) kernel; attention's QK^T and PV ran 2x slower
   fused with a contracted softmax than packed around it.  `@pc.program(contract=True)` asks for
   the memory-lean row-by-row fusion anyway.

A group's kernel is built with the fused order as its source order and its contractible
intermediates shrunk; isl checks that this order is exactly the proven `fuse` schedule's.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import AbstractSet, Dict, List, Mapping, Optional, Sequence, Tuple

import islpy as isl

from ..api import Kernel
from ..errors import IllegalScheduleError, PolycError
from ..ir import Statement
from ..schedule.schedule import Schedule
from .combine import combined_program
from .contraction import contract, contractible_dim
from .trace import Node, TensorHandle


@dataclass(frozen=True)
class Group:
    """Operators compiled as one kernel.

    - `kernel`: the kernel that runs (fused order, contracted storage).
    - `unfused`: the same statements in call order with full storage (what `fuse` was proven on).
    - `fused_schedule`: the proven `fuse` of `unfused` (None when nothing was fused).
    - `contracted`: (tensor, dropped dimension, full shape) for every contracted intermediate.
    - `inputs`/`outputs`: program tensors the group reads from / hands to the rest of the program
      (a tensor it updates in place, an accumulation across row blocks, is among the inputs).
    """

    name: str
    nodes: Tuple[Node, ...]
    kernel: Kernel
    unfused: Kernel
    fused_schedule: Optional[Schedule]
    contracted: Tuple[Tuple[str, int, tuple], ...]
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    note: str = ""

    @property
    def temps(self) -> Tuple[str, ...]:
        return tuple(t.name for t in self.kernel.program.tensors if t.role == "temp")


def _roles(nodes: Sequence[Node], needed_after: Sequence[str]) -> Dict[str, str]:
    produced = {p for n in nodes for p in n.outputs}
    roles: Dict[str, str] = {}
    for n in nodes:
        for p in n.inputs:
            roles.setdefault(p, "input" if p not in produced else "temp")
        for p in n.outputs:
            roles[p] = "output" if p in needed_after else "temp"
        for p in n.updates:
            roles[p] = "inout"
    return roles


_NEST_STRIDE = 1 << 16


def _fused_statements(statements: Sequence[Statement]) -> Tuple[Statement, ...]:
    """The statements with one outer loop: each nest (a distinct first order entry) becomes a body
    part of the shared outermost loop, in call order."""
    nests = sorted({st.order[0] for st in statements})
    rank = {c: k for k, c in enumerate(nests)}
    # (nest, position inside the loop) folded into one scalar: the order has one entry per loop + 1
    return tuple(replace(st, order=(0, rank[st.order[0]] * _NEST_STRIDE + st.order[1]) + tuple(st.order[2:]))
                 for st in statements)


def _same_order(a: isl.UnionMap, b: isl.UnionMap) -> bool:
    """Both schedules order every pair of instances the same way (equal happens-before)."""
    return a.lex_lt_union_map(a).is_equal(b.lex_lt_union_map(b))


def build_group(name: str, nodes: Sequence[Node], handles: Mapping[str, TensorHandle], sizes: Sequence[str],
                needed_after: Sequence[str], fuse: bool = True, contract_storage: bool = True) -> Group:
    """Compile-ready group of `nodes`: fused at the outermost loop when `fuse` and legal, with every
    contractible intermediate shrunk when `contract_storage`."""
    roles = _roles(nodes, needed_after)
    program = combined_program(name, nodes, handles, roles, sizes)
    unfused = Kernel(program)
    statements = program.statements
    fused_schedule: Optional[Schedule] = None
    note = ("one nest" if len({st.order[0] for st in statements}) == 1 else
            "one operator" if len(nodes) == 1 else "not fused")
    # A group of one operator keeps its own nests (its `= 0` start apart from its accumulation, as
    # the CUDA tiled contraction and the CPU packing expect); fusion is between operators.
    if fuse and len(nodes) > 1 and len({st.order[0] for st in statements}) > 1 and all(st.iterators for st in statements):
        s = unfused.schedule()
        try:
            fused_schedule = s.fuse(*(st.name for st in statements), loop=s.dims[1].name)
            note = f"fused at the outer loop ({len(statements)} statements)"
        except IllegalScheduleError as e:
            note = f"not fused: {str(e).splitlines()[0]}"
    contracted: List[Tuple[str, int, tuple]] = []
    if fused_schedule is not None:
        program = program.with_(statements=_fused_statements(statements))
        if contract_storage:
            for t in program.tensors:
                if t.role != "temp" or not t.shape:
                    continue
                d = contractible_dim(unfused.model, fused_schedule, t.name, len(t.shape), 1)
                if d is not None:
                    contracted.append((t.name, d, t.shape))
                    program = contract(program, t.name, d)
    kernel = Kernel(program) if program is not unfused.program else unfused
    if fused_schedule is not None and not _same_order(kernel.model.schedule_map, fused_schedule.schedule_map):
        raise PolycError(f"internal: the fused order of group {name} differs from the proven fuse schedule")
    inputs = tuple(t.name for t in program.tensors if t.role in ("input", "inout"))
    outputs = tuple(t.name for t in program.tensors if t.role == "output")
    return Group(name, tuple(nodes), kernel, unfused, fused_schedule, tuple(contracted), inputs, outputs, note)


def edge_contractible(group: Group, consumer: Node) -> bool:
    """Every tensor `consumer` reads from the group's nodes is contractible in the fused group."""
    if group.fused_schedule is None:
        return False
    produced = {p for n in group.nodes[:-1] for p in n.outputs}
    edges = [p for p in consumer.inputs if p in produced]
    if not edges:
        return False
    model = group.unfused.model
    for p in edges:
        rank = len(model.program.tensor(p).shape or ())
        if rank == 0 or contractible_dim(model, group.fused_schedule, p, rank, 1) is None:
            return False
    return True


def group_nodes(name: str, nodes: Sequence[Node], handles: Mapping[str, TensorHandle], sizes: Sequence[str],
                needed_after_all: Mapping[int, Sequence[str]], fuse: bool = True,
                apart: AbstractSet[int] = frozenset()) -> List[List[Node]]:
    """Partition a run of compiled nodes into fusion groups by the rule of this module.
    `needed_after_all[i]`: tensors still needed after node i (by later units or as outputs);
    `apart`: indices of nodes that form groups of their own (matrix products, whose packed or
    tiled kernels a row-by-row fused loop would lose)."""
    groups: List[List[Node]] = []
    for n in nodes:
        alone = n.index in apart or (groups and any(m.index in apart for m in groups[-1]))
        if fuse and groups and not alone and any(p in {q for m in groups[-1] for q in m.outputs} for p in n.inputs):
            candidate = groups[-1] + [n]
            trial = build_group(f"{name}_trial", candidate, handles, sizes,
                                needed_after_all[n.index], fuse=True, contract_storage=False)
            if edge_contractible(trial, n):
                groups[-1] = candidate
                continue
        groups.append([n])
    return groups
