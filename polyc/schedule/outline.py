"""A schedule as a nested outline of loops: `Schedule.tree`, `str(schedule)` and the HTML view.

A `Schedule` keeps one isl map per statement into a shared time space whose dimensions are loops
(named) or scalar ordering dimensions.  The outline reads it back as a tree: at each dimension,
statements whose value there is a constant form ordered groups (textual order, fusion,
distribution); the others share the loop.  A loop dimension on which a statement is constant
(padding of a shallower statement) is not a loop of that statement.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import islpy as isl

from .state import Unroll

#: Labels in the order they are shown.
MARK_ORDER = ("parallel", "reduction_parallel", "vector", "reduction_vector", "unroll", "block", "thread", "packed")


@dataclass
class OutlineNode:
    """One node of the outline: a loop (with marks), or a statement leaf.

    `exprs` gives, for a loop, each statement's time expression at this dimension (e.g.
    `floor(i/32)`), so tiled and skewed loops say what they iterate.
    """

    kind: str                     # "loop" | "statement" | "sequence"
    name: str = ""
    marks: Tuple[str, ...] = ()
    unroll: Unroll = field(default_factory=Unroll.none)
    exprs: Dict[str, str] = field(default_factory=dict)
    children: List["OutlineNode"] = field(default_factory=list)
    text: str = ""                # statement text for leaves


_AFF_BODY = re.compile(r"->\s*\[\((.*)\)\]\s*\}\s*$", re.S)


def _expr_text(pa: isl.PwAff) -> str:
    """The affine expression of a single-piece PwAff (`floor((i)/32)`), else isl's full text."""
    pieces = pa.get_pieces()
    if len(pieces) == 1:
        m = _AFF_BODY.search(str(pieces[0][1]))
        if m:
            return m.group(1)
    return str(pa)


def _piece_dims(piece: isl.Map) -> List[Tuple[Optional[int], str]]:
    """Per time dimension of one piece of a statement's map: (constant value or None, expression)."""
    n = piece.dim(isl.dim_type.out)
    try:
        pma = isl.PwMultiAff.from_map(piece)
    except isl.Error:
        return [(None, "?")] * n
    out: List[Tuple[Optional[int], str]] = []
    for k in range(n):
        pa = pma.get_pw_aff(k)
        parts = pa.get_pieces()
        const: Optional[int] = None
        if len(parts) == 1 and parts[0][1].is_cst():
            val = parts[0][1].get_constant_val()
            if val.is_int():
                const = int(val.to_python())
        out.append((const, _expr_text(pa)))
    return out


def statement_pieces(schedule, name: str) -> List[List[Tuple[Optional[int], str]]]:
    """Per piece of statement `name`'s schedule map (several after `peel`): `_piece_dims`."""
    smap = schedule.statement_map(name)
    return [_piece_dims(isl.Map.from_basic_map(bm)) for bm in smap.get_basic_maps()] or [_piece_dims(smap)]


def _statement_text(st) -> str:
    from ..ir.text import statement_text
    return statement_text(st)


def schedule_outline(schedule) -> OutlineNode:
    """The outline tree of `schedule` (root is a "sequence" node).

    A statement whose map has several pieces (after `peel`) appears once per piece, as
    `S0 (piece 1/2)`.
    """
    program = schedule.model.program
    items: List[Tuple[str, int, int, List[Tuple[Optional[int], str]]]] = []
    for name in schedule.statements:
        ps = statement_pieces(schedule, name)
        for k, dims_of_piece in enumerate(ps):
            items.append((name, k, len(ps), dims_of_piece))
    order = {id(it): n for n, it in enumerate(items)}
    dims = schedule.dims
    packed = schedule.packed_loops()

    def leaf(it) -> OutlineNode:
        name, k, n, _ = it
        label = name if n == 1 else f"{name} (piece {k + 1}/{n})"
        return OutlineNode("statement", name=label, text=_statement_text(program.statement(name)))

    def build(group: Sequence, level: int) -> List[OutlineNode]:
        if level >= len(dims):
            return [leaf(it) for it in group]
        dim = dims[level]
        groups: List[Tuple[Tuple, List]] = []
        for it in group:
            const, _ = it[3][level]
            key = ("loop",) if (dim.name is not None and const is None) else ("const", const if const is not None else 0)
            for k, members in groups:
                if k == key:
                    members.append(it)
                    break
            else:
                groups.append((key, [it]))
        # Constant groups run in the order of their constants; a loop group stays where its first
        # statement is in program order (a dimension mixing both is rare: shifted or peeled code).
        groups.sort(key=lambda g: (g[0][1] if g[0][0] == "const" else 0, order[id(g[1][0])]))
        out: List[OutlineNode] = []
        for key, members in groups:
            if key[0] == "loop":
                labels = set(dim.labels()) | ({"packed"} if dim.name in packed else set())
                marks = tuple(m for m in MARK_ORDER if m in labels)
                exprs: Dict[str, str] = {}
                for it in members:
                    exprs.setdefault(it[0], it[3][level][1])
                node = OutlineNode("loop", name=dim.name or f"c{level}", marks=marks,
                                   unroll=dim.unroll, exprs=exprs)
                node.children = build(members, level + 1)
                out.append(node)
            else:
                out.extend(build(members, level + 1))
        return out

    return OutlineNode("sequence", children=build(items, 0))


def mark_label(mark: str, unroll: Unroll = Unroll.none()) -> str:
    """How a label reads in the outline (`unroll 4`, `unroll (full)`, `vector`...)."""
    if mark == "unroll":
        return unroll.label() or "unroll"
    return mark.replace("_", " ")


def outline_text(schedule) -> str:
    """The outline as indented plain text (what `schedule_html` draws)."""
    lines: List[str] = []

    def walk(node: OutlineNode, depth: int) -> None:
        pad = "  " * depth
        if node.kind == "loop":
            marks = "".join(f" [{mark_label(m, node.unroll)}]" for m in node.marks)
            extra = sorted({e for e in node.exprs.values() if e != node.name})
            lines.append(f"{pad}for {node.name}{marks}" + (f"  ({'; '.join(extra)})" if extra else ""))
            for c in node.children:
                walk(c, depth + 1)
        elif node.kind == "statement":
            lines.append(f"{pad}{node.name}: {node.text}")
        else:
            for c in node.children:
                walk(c, depth)

    walk(schedule_outline(schedule), 0)
    return "\n".join(lines)


def tree_text(s) -> str:
    """`Schedule.tree`: the outline as indented text."""
    return outline_text(s)


def chain_text(s) -> str:
    """`kernel.schedule().tile(i=32).parallel('i_outer')` for the recorded history."""
    return ".".join([f"{s.model.program.name}.schedule()"] + list(s.history))


def describe(s) -> str:
    """`str(schedule)`: what was applied, then the loop outline."""
    head = f"Schedule of {s.model.program.name}: " + (" . ".join(s.history) if s.history else "source order")
    return head + "\n" + "\n".join("  " + line for line in outline_text(s).splitlines())
