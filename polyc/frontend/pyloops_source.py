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


class _ChainSplitter(ast.NodeTransformer):
    """Rewrites Python's chained assignment `a = B[i] = v` as `t = v; a = t; B[i] = t`, with `t`
    a fresh local: `v` is evaluated once and the targets are assigned left to right from that one
    value, as Python does (each target then converts it to its own type, as numpy stores do).
    Every new statement keeps the chain's position, so messages point at the user's line."""

    def __init__(self, taken: set):
        self.taken = taken

    def visit_Assign(self, node: ast.Assign):
        if len(node.targets) < 2:
            return node
        name = f"chained_{node.lineno}_{node.col_offset}"
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        out = [ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=node.value)]
        out += [ast.Assign(targets=[t], value=ast.Name(id=name, ctx=ast.Load())) for t in node.targets]
        for st in out:
            ast.copy_location(st, node)
            for sub in ast.walk(st):
                if not hasattr(sub, "lineno"):
                    ast.copy_location(sub, node)
        return out


def split_chained_assignments(fn: ast.FunctionDef) -> ast.FunctionDef:
    """`fn` with every chained assignment `a = b = v` split as `_ChainSplitter` says."""
    taken = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(fn)
                                                                       if isinstance(a, ast.arg)}
    return ast.fix_missing_locations(_ChainSplitter(taken).visit(fn))
