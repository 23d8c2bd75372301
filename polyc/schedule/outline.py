"""Readable views of a Schedule: the nested loop outline (`Schedule.tree`) and `str(schedule)`.

The outline is derived from the dimensions, like an isl schedule tree: a scalar dimension on
which statements differ is a *sequence* (children in order), a loop dimension that some
statement iterates is a *loop* (with its marks: parallel, vector, unroll, GPU), and the leaves are
statements.  A statement split into pieces by `peel` appears once per piece.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

from ..ir.text import statement_text as ir_statement_text
from ..ir.program import Statement
from .rewrite import fixed_value, pieces
from .schedule import Dim, Schedule

def statement_text(st: Statement) -> str:
    return f"{st.name}: {ir_statement_text(st)}"


def _loop_label(d: Dim) -> str:
    notes = sorted(m for m in d.marks if m != "unroll")
    if d.unroll == -1:
        notes.append("unrolled")
    elif d.unroll > 1:
        notes.append(f"unroll by {d.unroll}")
    if d.origin and d.origin != d.name:
        notes.append(f"of {d.origin}")
    return f"for {d.name}" + (f"  [{', '.join(notes)}]" if notes else "")


def tree_lines(s: Schedule) -> List[str]:
    """The outline as indented lines (two spaces per level)."""
    program = s.model.program
    items: List[Tuple[str, object]] = [(name, p) for name, _ in s.maps for p in pieces(s, name)]
    multi = {name for name, _ in s.maps if len(pieces(s, name)) > 1}
    lines: List[str] = []

    def walk(group: Sequence[Tuple[str, object]], k: int, depth: int) -> None:
        pad = "  " * depth
        if k == len(s.dims):
            for name, piece in group:
                suffix = "   (one part of a peeled loop)" if name in multi else ""
                lines.append(pad + statement_text(program.statement(name)) + suffix)
            return
        d = s.dims[k]
        if not d.is_loop:
            values = sorted({fixed_value(p, k) or 0 for _, p in group})
            if len(values) > 1:
                lines.append(pad + "sequence")
                for v in values:
                    walk([(n, p) for n, p in group if (fixed_value(p, k) or 0) == v], k + 1, depth + 1)
                return
            walk(group, k + 1, depth)
            return
        if any(fixed_value(p, k) is None for _, p in group):
            lines.append(pad + _loop_label(d))
            walk(group, k + 1, depth + 1)
        else:
            walk(group, k + 1, depth)

    walk(items, 0, 0)
    return lines


def tree_text(s: Schedule) -> str:
    return "\n".join(tree_lines(s))


def chain_text(s: Schedule) -> str:
    """`kernel.schedule().tile(i=32).parallel('i_outer')` for the recorded history."""
    return ".".join([f"{s.model.program.name}.schedule()"] + list(s.history))


def describe(s: Schedule) -> str:
    """`str(schedule)`: what was applied, then the loop outline."""
    head = f"Schedule of {s.model.program.name}: " + (" . ".join(s.history) if s.history else "source order")
    return head + "\n" + "\n".join("  " + line for line in tree_lines(s))
