"""Lexing shared by Tensor Comprehensions' `def` form (`tc_def`) and Einstein text (`einsum`):
tokens with their offsets, names as Python reads them, and TC's `T.d` extents."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import List, Mapping, Optional, Union

from ..errors import ParseError, SourceLocation
from ..ir import TensorType
from ..ir.types import DType

Declaration = Union[TensorType, DType]

TOKEN_RE = re.compile(r"""
    (?P<space>[ \t\r\f\v]+|\\\r?\n|\ufeff)
  | (?P<newline>\n)
  | (?P<comment>\#[^\n]*)
  | (?P<arrow>->)
  | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<name>[^\W\d]\w*)
  | (?P<other>.)
""", re.VERBOSE)


@dataclass(frozen=True)
class Tok:
    kind: str
    text: str
    start: int
    end: int


def tokens(source: str) -> List[Tok]:
    return [Tok(m.lastgroup or "other", m.group(), m.start(), m.end()) for m in TOKEN_RE.finditer(source)]


def name_of(tok: Tok) -> str:
    """A name as Python and the Einstein tokenizer read it (NFKC: `𝐀` is `A`)."""
    return unicodedata.normalize("NFKC", tok.text)


#: The most digits of a size or extent number (Python's int() refuses past 4300).
MAX_DIGITS = 30


def location(source: str, offset: int, filename: str) -> SourceLocation:
    """The line and column of character `offset` of `source`, with its line's text."""
    line = source.count("\n", 0, offset) + 1
    start = source.rfind("\n", 0, offset) + 1
    end = source.find("\n", offset)
    return SourceLocation(line, offset - start + 1, source[start:] if end < 0 else source[start:end], filename)


def substitute_extents(source: str, declared: Mapping[str, Declaration], filename: str,
                       display: Optional[str] = None) -> str:
    """`source` with TC's `T.d` (the d-th extent of a tensor of declared shape, counted from 0)
    replaced by that extent; `source` itself when it has none.  Later columns of such a line
    move, so messages show the user's text (`display`) at the statement's start."""
    if not _EXTENT_RE.search(source):
        return source
    parts: List[str] = []
    prev: Optional[Tok] = None
    for tok in tokens(source):
        text = tok.text
        if tok.kind == "number" and re.fullmatch(r"\.\d+", tok.text) and prev is not None \
                and prev.kind == "name" and prev.end == tok.start:
            text = _extent_text(prev, tok.text[1:], declared.get(name_of(prev)),
                                lambda: location(source if display is None else display, prev.start, filename))
            parts[-1] = ""             # the extent replaces the tensor's name
        if tok.kind not in ("space", "newline", "comment"):
            prev = tok
        parts.append(text)
    return "".join(parts)


def _extent_text(tensor: Tok, digits: str, decl: Optional[Declaration], where) -> str:
    """The text of extent `digits` of `tensor` (declared `decl`); `where()` locates an error."""
    if not isinstance(decl, TensorType) or not decl.shape:
        raise ParseError(f"{tensor.text}.{digits[:20]} names an extent of {tensor.text!r}, which is no tensor "
                         f"of declared shape", where())
    if len(digits) > MAX_DIGITS or int(digits) >= len(decl.shape):
        raise ParseError(f"{tensor.text} has {len(decl.shape)} dimension(s); {tensor.text}.{digits[:20]} "
                         f"counts from 0", where())
    return f"({decl.shape[int(digits)]})"


_EXTENT_RE = re.compile(r"[^\W\d]\w*\.\d")
