"""A loop kernel's source text: positions in the user's file for error carets, and the literals
and snippets its messages quote."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import List, Optional

from ..errors import ParseError, SourceLocation


@dataclass
class Source:
    """The kernel's source: maps nodes of the dedented parse back to real file positions."""

    lines: List[str]          # original lines (with their indentation)
    first_line: int           # file line number of lines[0]
    indent: int               # columns removed by dedenting
    filename: str

    def location(self, node: ast.AST) -> SourceLocation:
        lineno = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0) + self.indent
        text = self.lines[lineno - 1].rstrip("\n") if 0 < lineno <= len(self.lines) else ""
        return SourceLocation(self.first_line + lineno - 1, col + 1, text, self.filename)

    def error(self, node: ast.AST, message: str) -> ParseError:
        return ParseError(message, self.location(node))


def short_text(node: ast.AST) -> str:
    """Source text of `node` for a message, shortened when long (a huge literal, a long sum)."""
    try:
        text = ast.unparse(node)
    except ValueError:      # an integer past Python's int-to-str digit limit
        return f"<integer of {node.value.bit_length()} bits>" if isinstance(node, ast.Constant) else "<expression>"
    return text if len(text) <= 60 else text[:28] + " ... " + text[-27:]


def int_literal(node: ast.AST) -> Optional[int]:
    """The value of an integer literal, negated or not (`3`, `-1`: a `range` step, a shape
    axis), or None for anything else (a bool is no integer here)."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = -1, node.operand
    return sign * node.value if isinstance(node, ast.Constant) and type(node.value) is int else None
