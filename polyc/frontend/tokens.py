"""Tokenizer for Einstein notation; every token knows its line and column for error carets."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List

from ..errors import ParseError, SourceLocation

_TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\r]+|\\\n)
  | (?P<comment>\#[^\n]*)
  | (?P<newline>\n|;)
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<op>\+=!|\*=!|max=!|min=!|max=|min=|\+=|\*=|==|!=|<=|>=|//|[-+*/%<>=()\[\],:!])
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
""", re.VERBOSE)


@dataclass(frozen=True)
class Token:
    kind: str  # "number", "op", "name", "newline", "eof"
    text: str
    line: int
    column: int


def tokenize(source: str, filename: str = "<kernel>") -> List[Token]:
    """Split `source` into tokens.  Newlines inside brackets or parentheses are ignored."""
    lines = source.split("\n")
    tokens: List[Token] = []
    pos, line, line_start, depth = 0, 1, 0, 0
    while pos < len(source):
        m = _TOKEN_RE.match(source, pos)
        col = pos - line_start + 1
        if m is None:
            raise ParseError(f"unexpected character {source[pos]!r}",
                             SourceLocation(line, col, lines[line - 1], filename))
        kind, text = m.lastgroup, m.group()
        if kind == "newline" and text == "\n" or kind == "ws" and text.endswith("\n"):
            if kind == "newline" and depth == 0:
                tokens.append(Token("newline", text, line, col))
            line += 1
            line_start = m.end()
        elif kind == "newline":
            if depth == 0:
                tokens.append(Token("newline", text, line, col))
        elif kind in ("number", "op", "name"):
            if text in "([":
                depth += 1
            elif text in ")]":
                depth = max(0, depth - 1)
            tokens.append(Token(kind, text, line, col))
        pos = m.end()
    tokens.append(Token("eof", "", line, pos - line_start + 1))
    return tokens
