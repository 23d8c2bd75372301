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

The body handed to the Einstein parser keeps every character's line and column: what comes
before it becomes blank (empty lines, then spaces), a tensor's `(...)` becomes `[...]`, a `;`
separates statements TC writes on one line, and the parser shows the user's own text in its
messages.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from ..errors import ParseError, SourceLocation
from ..ir import Access, Binary, Cast, Const, Expr, IndexExpr, Program, ScalarRef, TensorType, Unary
from ..ir.types import DType, f32, f64, i32, i64, u8, u16
from .einsum import program_from_einsum
from .tokens import identifier, tokenize

Declaration = Union[TensorType, DType]

_TOKEN_RE = re.compile(r"""
    (?P<space>[ \t\r\f\v]+|\\\r?\n|\ufeff)
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


def _tokens(source: str) -> List[_Tok]:
    return [_Tok(m.lastgroup or "other", m.group(), m.start(), m.end()) for m in _TOKEN_RE.finditer(source)]


def _name_of(tok: _Tok) -> str:
    """A name as Python and the Einstein tokenizer read it (`tokens.identifier`)."""
    return identifier(tok.text)


#: The most digits of a size or extent number (Python's int() refuses past 4300).
_MAX_DIGITS = 30


def _location(source: str, offset: int, filename: str) -> SourceLocation:
    """The line and column of character `offset` of `source`, with its line's text."""
    line = source.count("\n", 0, offset) + 1
    start = source.rfind("\n", 0, offset) + 1
    end = source.find("\n", offset)
    return SourceLocation(line, offset - start + 1, source[start:] if end < 0 else source[start:end], filename)


#: TC's scalar types that polyc has.  TC's `float` and `int` are 32-bit, as in C.
TC_TYPES: Dict[str, DType] = {"float": f32, "float32": f32, "double": f64, "float64": f64, "int": i32,
                              "int32": i32, "long": i64, "int64": i64, "uint8": u8, "byte": u8, "uint16": u16}
#: TC's other scalar types: named in the error, so the user knows it is the type and not a typo.
_MISSING_TYPES = ("half", "float16", "bool", "char", "int8", "int16", "short", "uint32", "uint64")


@dataclass(frozen=True)
class TcDefinition:
    """One `def`: its name, its body as Einstein text (positions kept), declarations and returns."""

    name: str
    body: str
    declared: Dict[str, Declaration]
    outputs: Tuple[str, ...]
    location: SourceLocation
    inputs: Tuple[str, ...] = ()       # the signature's parameters


def program_from_tc(tc: "TcDefinition", filename: str, display: str) -> Program:
    """The Program of definition `tc` (of the text `display`), checked for what TC means and
    Einstein notation would read otherwise: a signature's inputs are read-only, and an integer
    divided by an integer is C's truncating division in TC (polyc's `/` is Python's)."""
    try:
        program = program_from_einsum(tc.body, tc.name, tc.declared, filename=filename, outputs=tc.outputs,
                                      display=display, parameters=tc.inputs)
    except ParseError as e:
        if e.location is not None or type(e) is not ParseError:
            raise
        raise ParseError(e.reason, tc.location) from None     # about the signature: point at the def
    for st in program.statements:
        if st.target.tensor in tc.inputs:
            raise ParseError(f"{st.target.tensor} is an input of {tc.name} (its signature); TC's inputs are "
                             f"read-only: define a new tensor", st.location)
    for st in program.statements:
        for node in st.value.walk():
            if isinstance(node, Binary) and node.op == "/" and \
                    all(_integer_valued(x, tc.declared) for x in (node.lhs, node.rhs)):
                raise ParseError(f"`{st.text}` divides integers: TC divides them as C does (truncating, an "
                                 f"integer result) and polyc's `/` as Python does (a float); write `//` for "
                                 f"a floor division (the same on values >= 0) or convert one side "
                                 f"(float32(x) / 2)", st.location)
    return program


def _integer_valued(e: Expr, declared: Mapping[str, Declaration]) -> bool:
    """Whether `e` is surely an integer: an index, an integer literal, a declared integer tensor
    or scalar, a conversion to an integer type, or arithmetic (not `/`) of those."""
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, Binary) and n.op in ("+", "-", "*", "//", "%"):
            stack += [n.lhs, n.rhs]
        elif isinstance(n, Unary) and n.op == "-":
            stack.append(n.operand)
        elif isinstance(n, (Access, ScalarRef)):
            d = declared.get(n.tensor if isinstance(n, Access) else n.name)
            d = d.dtype if isinstance(d, TensorType) else d
            if d is None or d.is_float:
                return False
        elif not (isinstance(n, IndexExpr) or isinstance(n, Cast) and not n.dtype.is_float
                  or isinstance(n, Const) and isinstance(n.value, int) and not isinstance(n.value, bool)):
            return False
    return True


def is_tc_definition(source: str) -> bool:
    """Whether `source` is TC's `def name(...)` form (its first word, comments aside, is `def`)."""
    for m in _TOKEN_RE.finditer(source):       # lazily: the first word decides
        if m.lastgroup in ("space", "newline", "comment"):
            continue
        return m.lastgroup == "name" and m.group() == "def"
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
    return TcDefinition(chosen.name, chosen.body, merged, chosen.outputs, chosen.location, chosen.inputs)


#: Words of the language that may precede `(` without reading a tensor (`not (a < b)`).
_KEYWORDS = {"not", "and", "or", "in", "where", "exists"}
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
        return _location(self.source, offset, self.filename)

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
        if any(d.name == _name_of(name_tok) for d in earlier):
            raise self.error(name_tok, f"a second definition named {_name_of(name_tok)!r}")
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
        close = self._body_end(open_tok)
        body = self.body(open_tok, self.toks[close], set(declared) | set(outputs))
        self.pos = close + 1
        return TcDefinition(_name_of(name_tok), body, declared, tuple(outputs), self.loc(start.start),
                            tuple(k for k in declared if k not in outputs))

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
        shape: list = []      # size names and integers
        if self.at("("):
            self.take("(")
            while True:
                tok = self.take(what="a size name or a number")
                if tok.kind == "number" and tok.text.isdigit() and len(tok.text.lstrip("0")) <= _MAX_DIGITS \
                        and int(tok.text.lstrip("0") or "0") > 0:
                    shape.append(int(tok.text.lstrip("0")))
                elif tok.kind == "name" and tok.text not in TC_TYPES and _name_of(tok) not in _KEYWORDS:
                    shape.append(_name_of(tok))
                else:
                    raise self.error(tok, f"a size is a name or a positive integer, not {tok.text!r}")
                if self.at(")"):
                    break
                self.take(",", what="',' or ')' in the sizes")
            self.take(")")
        name_tok = self.take(kind="name", what="the parameter's name after its type")
        if _name_of(name_tok) in declared:
            raise self.error(name_tok, f"a second parameter named {_name_of(name_tok)!r}")
        declared[_name_of(name_tok)] = dtype[tuple(shape)] if shape else dtype

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
        if _name_of(name_tok) in declared:
            raise self.error(name_tok, f"{_name_of(name_tok)!r} is a parameter; TC returns new tensors only")
        return _name_of(name_tok)

    def _body_end(self, open_tok: _Tok) -> int:
        """The index (in `toks`) of the `}` closing the body that `open_tok` opens."""
        for k in range(self.pos, len(self.toks)):
            tok = self.toks[k]
            if tok.text == "{":
                raise self.error(tok, "a '{' inside a definition's body (is a '}' missing above?)")
            if tok.text == "}":
                return k
        raise self.error(open_tok, "this '{' is never closed by '}'")

    def body(self, open_tok: _Tok, close_tok: _Tok, tensors: Set[str]) -> str:
        """The statements as Einstein text at their own lines and columns (earlier lines empty,
        the text before them on their first line blanked), a tensor's round brackets made square.
        A tensor is a parameter, a returned name, or a name a statement starts with (an
        intermediate); any other name before `(` calls a function.  Statements TC separates by
        whitespace alone on one line (`B(i) = A(i) C(i) = A(i)`) get a `;` in that whitespace.
        (The Einstein parser reads `T.d` extents.)"""
        line_start = self.source.rfind("\n", 0, open_tok.end) + 1
        parts: List[str] = ["\n" * self.source.count("\n", 0, line_start), " " * (open_tok.end - line_start)]
        inner = _separated(_tokens(self.source[open_tok.end:close_tok.start]))
        tensors = tensors | _statement_targets("".join(t.text for t in inner))
        stack: List[bool] = []         # per open '(': whether it opened a tensor's subscripts
        prev: Optional[_Tok] = None    # the last token that is no space or comment
        for tok in inner:
            text = tok.text
            if tok.text == "(":
                is_access = prev is not None and prev.kind == "name" and _name_of(prev) in tensors
                stack.append(is_access)
                text = "[" if is_access else "("
            elif tok.text == ")" and stack:
                text = "]" if stack.pop() else ")"
            if tok.kind not in ("space", "newline", "comment"):
                prev = tok
            parts.append(text)
        return "".join(parts)


def _separated(toks: List[_Tok]) -> List[_Tok]:
    """`toks` with a `;` in the whitespace before each statement that starts within a line: a
    tensor access at bracket depth 0 right after a complete value, followed by an assignment
    (`=`, `+=`, `*=`, `max=`, `min=`, with or without `!`)."""
    sig = [k for k, t in enumerate(toks) if t.kind not in ("space", "comment")]
    out = list(toks)
    depth = 0
    for n, k in enumerate(sig):
        tok = toks[k]
        if tok.text in ("(", ")"):
            depth += 1 if tok.text == "(" else -1
            continue
        if depth or tok.kind != "name" or n == 0 or n + 1 >= len(sig) or toks[sig[n + 1]].text != "(":
            continue
        before = toks[sig[n - 1]]
        if not (before.kind in ("name", "number") or before.text == ")") or _name_of(before) in _KEYWORDS:
            continue
        m, level = n + 1, 0
        while m < len(sig):
            level += {"(": 1, ")": -1}.get(toks[sig[m]].text, 0)
            if level == 0:
                break
            m += 1
        after = [toks[j].text for j in sig[m + 1:m + 3]] + ["", ""]
        assigns = (after[0] == "=" and after[1] != "=") or (after[0] in ("+", "*", "max", "min") and after[1] == "=")
        if assigns and k > 0 and toks[k - 1].kind == "space":
            space = toks[k - 1]
            out[k - 1] = _Tok(space.kind, ";" + space.text[1:], space.start, space.end)
    return out


def _statement_targets(text: str) -> Set[str]:
    """Names that start a statement of `text` (the tensors the statements define) and are followed
    by `(`, found by the Einstein tokenizer: its line breaks are statement boundaries (a
    continuation line, `+ B(i)` or one after `C(i) +=!`, is none)."""
    try:
        toks = tokenize(text)
    except ParseError:
        return set()        # the parser reports it, at its place
    out: Set[str] = set()
    start = True
    for k, tok in enumerate(toks):
        if tok.kind == "newline":
            start = True
            continue
        if start and tok.kind == "name" and tok.text not in _KEYWORDS and toks[k + 1].text == "(":
            out.add(tok.text)
        start = False
    return out


