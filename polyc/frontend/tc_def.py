"""Tensor Comprehensions' own definitions, read as their authors write them.

    def matmul(float(M, K) A, float(K, N) B) -> (C) {
        C(m, n) +=! A(m, r_k) * B(r_k, n)
    }

A `def` gives what `pc.kernel`'s keywords otherwise give: the parameters' types (`float(M, K) A`
is `A=pc.f32["M", "K"]`, a rank-0 `float alpha` a scalar), the returned tensors (`-> (C)` is
`outputs=["C"]`; every other tensor the body defines is an intermediate) and the kernel's name.
The body is Einstein notation with TC's round-bracket subscripts, `T.d` (the d-th extent of a
parameter) and `where exists T(e)` (a read that bounds the statement's indices without being
computed).  One text may hold several definitions; `name` picks one, as TC's `tc.define` does.

The body handed to the Einstein parser keeps every character's line and column: the header and
the braces become spaces, a tensor's `(...)` becomes `[...]`.  So errors point at the user's text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import ParseError, SourceLocation
from ..ir import MATH_FUNCTIONS, TensorType
from ..ir.types import DType, f32, f64, i32, i64, u8, u16

Declaration = Union[TensorType, DType]

#: TC's scalar types that polyc has.  TC's `float` and `int` are 32-bit, as in C.
TC_TYPES: Dict[str, DType] = {"float": f32, "float32": f32, "double": f64, "float64": f64, "int": i32,
                              "int32": i32, "long": i64, "int64": i64, "uint8": u8, "byte": u8, "uint16": u16}
#: TC's other scalar types: named in the error, so the user knows it is the type and not a typo.
_MISSING_TYPES = ("half", "float16", "bool", "char", "int8", "int16", "short", "uint32", "uint64")
#: Names that call a function rather than read a tensor when followed by `(` (see einsum.py).
_FUNCTIONS = set(MATH_FUNCTIONS) | set(TC_TYPES) | {"select", "rsqrt", "fabs", "fmaxf", "fminf"}

_TOKEN_RE = re.compile(r"""
    (?P<space>[ \t\r\f\v]+|\\\n)
  | (?P<newline>\n)
  | (?P<comment>\#[^\n]*)
  | (?P<arrow>->)
  | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<name>[^\W\d]\w*)
  | (?P<other>.)
""", re.VERBOSE)


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class TcDefinition:
    """One `def`: its name, its body as Einstein text (positions kept), declarations and returns."""

    name: str
    body: str
    declared: Dict[str, Declaration]
    outputs: Tuple[str, ...]
    location: SourceLocation


def is_tc_definition(source: str) -> bool:
    """Whether `source` is TC's `def name(...)` form (its first word, comments aside, is `def`)."""
    for tok in _tokens(source):
        if tok.kind in ("space", "newline", "comment"):
            continue
        return tok.kind == "name" and tok.text == "def"
    return False


def tc_definitions(source: str, filename: str = "<kernel>") -> List[TcDefinition]:
    """Every `def` of `source`, in order; `ParseError` (with line and column) where one is malformed."""
    return _Reader(source, filename).definitions()


def tc_definition(source: str, filename: str, name: Optional[str], declared: Mapping[str, Declaration],
                  outputs: Optional[Sequence[str]]) -> TcDefinition:
    """The definition `name` (the only one when `name` is None) with the caller's keywords merged
    in: a keyword may declare a tensor the signature leaves open (an intermediate's type), never
    contradict it, and `outputs`, if given, must name the returned tensors."""
    defs = tc_definitions(source, filename)
    names = [d.name for d in defs]
    if name is None and len(defs) > 1:
        raise ParseError(f"the text defines {len(defs)} kernels ({', '.join(names)}); pick one with name=...",
                         defs[1].location)
    chosen = defs[0] if name is None else next((d for d in defs if d.name == name), None)
    if chosen is None:
        raise ParseError(f"no definition is named {name!r}; the text defines {', '.join(names)}", defs[0].location)
    merged = dict(chosen.declared)
    for k, v in declared.items():
        if k in merged and merged[k] != v:
            raise ParseError(f"{k!r} is declared by the signature of {chosen.name} as {merged[k]!r}; "
                             f"the keyword {k}={v!r} contradicts it (leave it out)", chosen.location)
        merged[k] = v
    if outputs is not None and tuple(outputs) != chosen.outputs:
        raise ParseError(f"{chosen.name} returns ({', '.join(chosen.outputs)}); outputs={list(outputs)!r} "
                         f"contradicts its signature (leave it out)", chosen.location)
    return TcDefinition(chosen.name, chosen.body, merged, chosen.outputs, chosen.location)


def _tokens(source: str) -> List[_Tok]:
    return [_Tok(m.lastgroup or "other", m.group(), m.start(), m.end()) for m in _TOKEN_RE.finditer(source)]


def _blank(text: str) -> str:
    """`text` with every character but line breaks turned into a space (positions kept)."""
    return re.sub(r"[^\n]", " ", text)


class _Reader:
    """A recursive-descent reader of TC's definitions over significant tokens."""

    def __init__(self, source: str, filename: str):
        self.source = source
        self.filename = filename
        self.lines = source.split("\n")
        self.toks = [t for t in _tokens(source) if t.kind not in ("space", "newline", "comment")]
        self.pos = 0

    # -- positions and errors ----------------------------------------------------------------------
    def loc(self, offset: int) -> SourceLocation:
        line = self.source.count("\n", 0, offset) + 1
        column = offset - (self.source.rfind("\n", 0, offset) + 1) + 1
        return SourceLocation(line, column, self.lines[line - 1], self.filename)

    def error(self, tok: Optional[_Tok], message: str) -> ParseError:
        return ParseError(message, self.loc(tok.start if tok is not None else len(self.source)))

    def peek(self) -> Optional[_Tok]:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self, text: Optional[str] = None, kind: Optional[str] = None, what: str = "") -> _Tok:
        tok = self.peek()
        if tok is None or (text is not None and tok.text != text) or (kind is not None and tok.kind != kind):
            found = "the end of the text" if tok is None else repr(tok.text)
            raise self.error(tok, f"expected {what or repr(text)}, found {found}")
        self.pos += 1
        return tok

    def at(self, text: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.text == text

    # -- definitions -------------------------------------------------------------------------------
    def definitions(self) -> List[TcDefinition]:
        defs: List[TcDefinition] = []
        while self.peek() is not None:
            defs.append(self.definition(defs))
        if not defs:
            raise ParseError("the text holds no definition (def name(...) -> (...) { ... })", self.loc(0))
        return defs

    def definition(self, earlier: List[TcDefinition]) -> TcDefinition:
        start = self.take("def", what="'def' (a Tensor Comprehensions definition)")
        name_tok = self.take(kind="name", what="the kernel's name after 'def'")
        if any(d.name == name_tok.text for d in earlier):
            raise self.error(name_tok, f"a second definition named {name_tok.text!r}")
        self.take("(", what="'(' and the parameters")
        declared: Dict[str, Declaration] = {}
        while not self.at(")"):
            self.parameter(declared)
            if not self.at(")"):
                self.take(",", what="',' or ')' after a parameter")
        self.take(")")
        self.take("->", what="'->' and the returned tensors")
        outputs = self.returns(declared)
        open_tok = self.take("{", what="'{' and the statements")
        close_tok = self._body_end(open_tok)
        body = self.body(open_tok, close_tok, declared)
        self.pos = self.toks.index(close_tok) + 1
        return TcDefinition(name_tok.text, body, declared, tuple(outputs), self.loc(start.start))

    def scalar_type(self) -> Tuple[_Tok, DType]:
        tok = self.take(kind="name", what="a type (float, double, int32, ...)")
        if tok.text in TC_TYPES:
            return tok, TC_TYPES[tok.text]
        known = ", ".join(TC_TYPES)
        if tok.text in _MISSING_TYPES:
            raise self.error(tok, f"polyc has no {tok.text} type; its types: {known}")
        raise self.error(tok, f"expected a type ({known}), found {tok.text!r}")

    def parameter(self, declared: Dict[str, Declaration]) -> None:
        _, dtype = self.scalar_type()
        shape: List[Union[str, int]] = []
        if self.at("("):
            self.take("(")
            while True:
                tok = self.take(what="a size name or a number")
                if tok.kind == "number" and tok.text.isdigit() and int(tok.text) > 0:
                    shape.append(int(tok.text))
                elif tok.kind == "name" and tok.text not in TC_TYPES:
                    shape.append(tok.text)
                else:
                    raise self.error(tok, f"a size is a name or a positive integer, not {tok.text!r}")
                if self.at(")"):
                    break
                self.take(",", what="',' or ')' in the sizes")
            self.take(")")
        name_tok = self.take(kind="name", what="the parameter's name after its type")
        if name_tok.text in declared:
            raise self.error(name_tok, f"a second parameter named {name_tok.text!r}")
        declared[name_tok.text] = dtype[tuple(shape)] if shape else dtype

    def returns(self, declared: Dict[str, Declaration]) -> List[str]:
        """`-> (A, B)` or `-> A`; a returned name may carry a type, as a parameter does."""
        if not self.at("("):
            return [self.returned(declared)]
        self.take("(")
        names = [self.returned(declared)]
        while self.at(","):
            self.take(",")
            names.append(self.returned(declared))
        self.take(")", what="',' or ')' after a returned tensor")
        return names

    def returned(self, declared: Dict[str, Declaration]) -> str:
        tok = self.peek()
        if tok is not None and tok.text in TC_TYPES:
            before = dict(declared)
            self.parameter(declared)
            (name,) = [k for k in declared if k not in before]
            return name
        name_tok = self.take(kind="name", what="the name of a returned tensor")
        if name_tok.text in declared:
            raise self.error(name_tok, f"{name_tok.text!r} is a parameter; TC returns new tensors only")
        return name_tok.text

    def _body_end(self, open_tok: _Tok) -> _Tok:
        for tok in self.toks[self.pos:]:
            if tok.text == "{":
                raise self.error(tok, "a '{' inside a definition's body (is a '}' missing above?)")
            if tok.text == "}":
                return tok
        raise self.error(open_tok, "this '{' is never closed by '}'")

    def body(self, open_tok: _Tok, close_tok: _Tok, declared: Mapping[str, Declaration]) -> str:
        """The statements as Einstein text: everything outside the braces blanked, a tensor's
        round brackets made square (`T.d` extents are replaced later, by `substitute_extents`)."""
        parts: List[str] = [_blank(self.source[:open_tok.end])]
        stack: List[bool] = []         # per open '(': whether it opened a tensor's subscripts
        prev: Optional[_Tok] = None    # the last token that is no space or comment
        for tok in _tokens(self.source[open_tok.end:close_tok.start]):
            text = tok.text
            if tok.text == "(":
                is_access = prev is not None and prev.kind == "name" and \
                    (prev.text in declared or prev.text not in _FUNCTIONS)
                stack.append(is_access)
                text = "[" if is_access else "("
            elif tok.text == ")" and stack:
                text = "]" if stack.pop() else ")"
            if tok.kind not in ("space", "newline", "comment"):
                prev = tok
            parts.append(text)
        parts.append(" " + _blank(self.source[close_tok.end:]))
        return "".join(parts)


def substitute_extents(source: str, declared: Mapping[str, Declaration], filename: str,
                       display: Optional[str] = None) -> str:
    """`source` with TC's `T.d` (the d-th extent of a tensor of declared shape, counted from 0)
    replaced by that extent; `source` itself when it has none.  Later columns of such a line
    move, so messages show the user's text (`display`) at the statement's start."""
    if not _EXTENT_RE.search(source):
        return source
    parts: List[str] = []
    prev: Optional[_Tok] = None
    for tok in _tokens(source):
        text = tok.text
        if tok.kind == "number" and re.fullmatch(r"\.\d+", tok.text) and prev is not None \
                and prev.kind == "name" and prev.end == tok.start:
            decl = declared.get(prev.text)
            d = int(tok.text[1:])
            where = _Reader(source if display is None else display, filename).loc(prev.start)
            if not isinstance(decl, TensorType) or not decl.shape:
                raise ParseError(f"{prev.text}.{d} names an extent of {prev.text!r}, which is no tensor "
                                 f"of declared shape", where)
            if d >= len(decl.shape):
                raise ParseError(f"{prev.text} has {len(decl.shape)} dimension(s); {prev.text}.{d} counts "
                                 f"from 0", where)
            parts[-1] = ""             # the extent replaces the tensor's name
            text = f"({decl.shape[d]})"
        if tok.kind not in ("space", "newline", "comment"):
            prev = tok
        parts.append(text)
    return "".join(parts)


_EXTENT_RE = re.compile(r"[^\W\d]\w*\.\d")
