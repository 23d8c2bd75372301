"""Tokenizer for Einstein notation; every token knows its line and column for error carets."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import List, Optional

from ..errors import ParseError, SourceLocation

_TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+|\\\r?\n|\ufeff)
  | (?P<comment>\#[^\n]*)
  | (?P<newline>\n|;)
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<op>\+=!|\*=!|max=!|min=!|max=|min=|\+=|\*=|==|!=|<=|>=|//|\*\*|&&|\|\||[-+*/%<>=()\[\],:!?])
  | (?P<name>[^\W\d]\w*)           # identifiers as in Python, Unicode letters included
""", re.VERBOSE)


@dataclass(frozen=True)
class Token:
    kind: str  # "number", "op", "name", "newline", "eof"
    text: str
    line: int
    column: int


def identifier(text: str) -> str:
    """A name as Python reads identifiers (NFKC: `ﬁ` is `fi`, `𝐀` is `A`, so keywords match): the
    one rule for names in kernel text, declarations and Tensor Comprehensions signatures."""
    return unicodedata.normalize("NFKC", text)


def tokenize(source: str, filename: str = "<kernel>", display: Optional[str] = None) -> List[Token]:
    """Split `source` into tokens.  Newlines inside brackets or parentheses are ignored.  Errors
    show the lines of `display` (the user's text, where `source` was derived from it)."""
    lines = (source if display is None else display).split("\n")
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
            if kind == "name" and not text.isidentifier():    # `²` is a word character, no name
                raise ParseError(f"unexpected character {text[0]!r}" if not text[0].isidentifier()
                                 else f"{text!r} is not an identifier", SourceLocation(line, col, lines[line - 1],
                                                                                     filename))
            if kind == "name":
                text = identifier(text)
            if text in "([":
                depth += 1
            elif text in ")]":
                depth = max(0, depth - 1)
            tokens.append(Token(kind, text, line, col))
        pos = m.end()
    tokens.append(Token("eof", "", line, pos - line_start + 1))
    return _join_continuations(tokens)


#: A line starting with one of these continues the statement above (a statement starts with a name).
_CONTINUES_NEXT = {"+", "-", "*", "**", "/", "//", "%", "<", "<=", ">", ">=", "==", "!=", ",", ":", "&&", "||", "?"}
_CONTINUING_WORDS = {"where", "and", "or"}
#: A line ending with one of these continues on the next line.
_OPEN_AT_END = _CONTINUES_NEXT | _CONTINUING_WORDS | {"=", "+=", "*=", "max=", "min=", "+=!", "*=!", "max=!", "min=!",
                                                      "in"}
_OPEN_WORDS = _CONTINUING_WORDS | {"in"}


def _join_continuations(tokens: List[Token]) -> List[Token]:
    """Drop line breaks inside a statement: before a line starting with an operator or `where`
    (`and`, `or`), or after a line ending with one.  `;` always separates statements."""
    following_of: List[Token] = [tokens[-1]] * len(tokens)  # the next token that is no line break
    nxt = tokens[-1]
    for k in range(len(tokens) - 1, -1, -1):
        following_of[k] = nxt
        if tokens[k].kind != "newline":
            nxt = tokens[k]
    out: List[Token] = []
    prev: Optional[Token] = None  # the last token that is no line break
    for k, tok in enumerate(tokens):
        if tok.kind != "newline":
            prev = tok
        if tok.kind == "newline" and tok.text == "\n":
            following = following_of[k]
            ends_open = prev is not None and prev.kind in ("op", "name") and prev.text in _OPEN_AT_END \
                and (prev.kind == "op" or prev.text in _OPEN_WORDS) and (not out or out[-1].kind != "newline")
            starts_cont = following is not None and (
                following.kind == "op" and following.text in _CONTINUES_NEXT
                or following.kind == "name" and following.text in _CONTINUING_WORDS)
            if prev is not None and (ends_open or starts_cont):
                continue
        out.append(tok)
    return out
