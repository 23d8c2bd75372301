"""Parser for Einstein notation (Tensor Comprehensions' meaning) into a small syntax tree.

Grammar (one statement per line, or separated by `;`; `#` starts a comment)::

    statement := target OP expr [where NAME in affine:affine {, NAME in affine:affine}]
    target    := NAME [ '[' affine {, affine} ']' ]
    OP        := = | += | *= | max= | min= | +=! | *=! | max=! | min=!
    expr      := usual precedence: or < and < not < comparisons < + - < * / % < unary - < atoms
    atom      := number | NAME | NAME[affine, ...] | NAME(expr, ...) | ( expr )

The syntax tree keeps every node's source location; `einsum.py` resolves names and lowers it to IR.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Tuple

from ..errors import ParseError, SourceLocation
from .tokens import Token, tokenize

ASSIGN_OPS = ("=", "+=", "*=", "max=", "min=", "+=!", "*=!", "max=!", "min=!")


@dataclass(frozen=True)
class Node:
    """A syntax-tree node: `kind` is num/name/access/call/bin/un; `loc` its source position."""

    kind: str
    loc: SourceLocation
    value: object = None              # number value, name, operator or function name
    args: Tuple["Node", ...] = ()
    is_float: bool = False


@dataclass(frozen=True)
class WhereRange:
    index: str
    lower: Node
    upper: Node
    loc: SourceLocation


@dataclass(frozen=True)
class SourceStatement:
    target: str
    target_indices: Tuple[Node, ...]
    op: str
    rhs: Node
    wheres: Tuple[WhereRange, ...]
    loc: SourceLocation
    text: str
    target_loc: SourceLocation = field(default=None)  # type: ignore[assignment]


class _Parser:
    def __init__(self, source: str, filename: str):
        self.lines = source.split("\n")
        self.filename = filename
        self.toks = tokenize(source, filename)
        self.pos = 0

    # -- token helpers -------------------------------------------------------------------------
    def peek(self) -> Token:
        return self.toks[self.pos]

    def next(self) -> Token:
        tok = self.toks[self.pos]
        self.pos += 1
        return tok

    def loc(self, tok: Token) -> SourceLocation:
        text = self.lines[tok.line - 1] if 0 < tok.line <= len(self.lines) else ""
        return SourceLocation(tok.line, tok.column, text, self.filename)

    def error(self, tok: Token, message: str) -> ParseError:
        return ParseError(message, self.loc(tok))

    def expect(self, text: str, what: str = "") -> Token:
        tok = self.peek()
        if tok.text != text or tok.kind not in ("op", "name"):
            found = "end of line" if tok.kind in ("newline", "eof") else repr(tok.text)
            raise self.error(tok, f"expected {text!r}{' ' + what if what else ''}, found {found}")
        return self.next()

    def at(self, text: str) -> bool:
        tok = self.peek()
        return tok.kind in ("op", "name") and tok.text == text

    # -- statements ----------------------------------------------------------------------------
    def program(self) -> List[SourceStatement]:
        out = []
        while True:
            while self.peek().kind == "newline":
                self.next()
            if self.peek().kind == "eof":
                return out
            out.append(self.statement())
            tok = self.peek()
            if tok.kind not in ("newline", "eof"):
                raise self.error(tok, f"unexpected {tok.text!r} after the end of the statement")

    def statement(self) -> SourceStatement:
        first = self.peek()
        if first.kind != "name":
            raise self.error(first, "a statement starts with the name of the tensor it defines")
        self.next()
        indices: Tuple[Node, ...] = ()
        if self.at("["):
            self.next()
            indices = tuple(self.comma_list("]"))
        op_tok = self.peek()
        if op_tok.kind != "op" or op_tok.text not in ASSIGN_OPS:
            found = "end of line" if op_tok.kind in ("newline", "eof") else repr(op_tok.text)
            raise self.error(op_tok, f"expected an assignment (=, +=, +=!, *=!, max=!, min=!), found {found}")
        self.next()
        rhs = self.expr()
        wheres = []
        if self.at("where"):
            self.next()
            wheres.append(self.where_range())
            while self.at(","):
                self.next()
                wheres.append(self.where_range())
        loc = self.loc(first)
        return SourceStatement(first.text, indices, op_tok.text, rhs, tuple(wheres), loc,
                               loc.text.strip(), target_loc=loc)

    def where_range(self) -> WhereRange:
        tok = self.peek()
        if tok.kind != "name":
            raise self.error(tok, "expected an index name after 'where' (e.g. 'where k in 0:N')")
        self.next()
        self.expect("in", "(write 'where i in lo:hi')")
        lower = self.arith()
        self.expect(":", "between the lower and upper bound (write 'where i in lo:hi')")
        upper = self.arith()
        return WhereRange(tok.text, lower, upper, self.loc(tok))

    def comma_list(self, close: str) -> List[Node]:
        items: List[Node] = []
        if self.at(close):
            self.next()
            return items
        while True:
            items.append(self.expr())
            if self.at(","):
                self.next()
                continue
            self.expect(close)
            return items

    # -- expressions (precedence climbing) -----------------------------------------------------
    def expr(self) -> Node:
        return self.logical_or()

    def logical_or(self) -> Node:
        node = self.logical_and()
        while self.at("or"):
            tok = self.next()
            node = Node("bin", self.loc(tok), "or", (node, self.logical_and()))
        return node

    def logical_and(self) -> Node:
        node = self.logical_not()
        while self.at("and"):
            tok = self.next()
            node = Node("bin", self.loc(tok), "and", (node, self.logical_not()))
        return node

    def logical_not(self) -> Node:
        if self.at("not"):
            tok = self.next()
            return Node("un", self.loc(tok), "not", (self.logical_not(),))
        return self.comparison()

    def comparison(self) -> Node:
        node = self.arith()
        while self.peek().kind == "op" and self.peek().text in ("<", "<=", ">", ">=", "==", "!="):
            tok = self.next()
            node = Node("bin", self.loc(tok), tok.text, (node, self.arith()))
        return node

    def arith(self) -> Node:
        node = self.term()
        while self.peek().kind == "op" and self.peek().text in ("+", "-"):
            tok = self.next()
            node = Node("bin", self.loc(tok), tok.text, (node, self.term()))
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.peek().kind == "op" and self.peek().text in ("*", "/", "//", "%"):
            tok = self.next()
            node = Node("bin", self.loc(tok), tok.text, (node, self.unary()))
        return node

    def unary(self) -> Node:
        if self.peek().kind == "op" and self.peek().text in ("-", "+"):
            tok = self.next()
            operand = self.unary()
            return operand if tok.text == "+" else Node("un", self.loc(tok), "-", (operand,))
        return self.atom()

    def atom(self) -> Node:
        tok = self.peek()
        if tok.kind == "number":
            self.next()
            is_float = any(c in tok.text for c in ".eE")
            try:
                value = float(tok.text) if is_float else int(tok.text)
            except ValueError:   # past Python's int-to-str digit limit (4300 digits)
                raise ParseError(f"the integer literal of {len(tok.text)} digits is too large for any "
                                 f"type a kernel computes in", self.loc(tok)) from None
            return Node("num", self.loc(tok), value, is_float=is_float)
        if tok.kind == "name" and tok.text not in ("where", "in", "and", "or", "not"):
            self.next()
            if self.at("["):
                self.next()
                return Node("access", self.loc(tok), tok.text, tuple(self.comma_list("]")))
            if self.at("("):
                self.next()
                return Node("call", self.loc(tok), tok.text, tuple(self.comma_list(")")))
            return Node("name", self.loc(tok), tok.text)
        if tok.kind == "op" and tok.text == "(":
            self.next()
            node = self.expr()
            self.expect(")")
            return node
        found = "end of line" if tok.kind in ("newline", "eof") else repr(tok.text)
        raise self.error(tok, f"expected a value (number, name, tensor access or call), found {found}")


def parse_einsum(source: str, filename: str = "<kernel>") -> List[SourceStatement]:
    """Parse Einstein-notation text into source statements (raises ParseError with a caret)."""
    statements = _Parser(source, filename).program()
    if not statements:
        raise ParseError("the kernel has no statements", SourceLocation(1, 1, source.split("\n")[0], filename))
    return statements
