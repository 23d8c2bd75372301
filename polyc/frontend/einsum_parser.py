"""Parser for Einstein notation (Tensor Comprehensions' meaning) into a small syntax tree.

Grammar (one statement per line, or separated by `;`; `#` starts a comment)::

    statement := target OP expr [where item {, item}]
    item      := NAME in affine:affine | exists NAME[affine, ...]
    target    := NAME [ '[' affine {, affine} ']' ]
    OP        := = | += | *= | max= | min= | +=! | *=! | max=! | min=!
    expr      := usual precedence: or < and < not < comparisons < + - < * / // % < unary - < ** < atoms
    atom      := number | NAME | NAME[affine, ...] | NAME(expr, ...) | ( expr )

The syntax tree keeps every node's source location; `einsum.py` resolves names and lowers it to IR.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple

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
    exists: Tuple[Node, ...] = ()     # `where exists T[...]`: accesses that only bound ranges


class _Parser:
    def __init__(self, source: str, filename: str, display: Optional[str] = None,
                 extents: Optional[Mapping[str, Tuple[str, ...]]] = None):
        self.lines = (source if display is None else display).split("\n")
        self.filename = filename
        self.toks = self._with_extents(tokenize(source, filename, display), extents or {})
        self.pos = 0

    def _with_extents(self, toks: List[Token], extents: Mapping[str, Tuple[str, ...]]) -> List[Token]:
        """Tensor Comprehensions' `T.d` (the d-th extent of a tensor of declared shape, from 0)
        replaced by the tokens of that extent, in brackets, all at `T`'s position: what follows
        keeps its own line and column."""
        out: List[Token] = []
        for tok in toks:
            prev = out[-1] if out else None
            if tok.kind == "number" and tok.text.startswith(".") and tok.text[1:].isdigit() and prev is not None \
                    and prev.kind == "name" and prev.line == tok.line and prev.column + len(prev.text) == tok.column:
                shape = extents.get(prev.text)
                d = tok.text[1:]
                if not shape:
                    raise self.error(prev, f"{prev.text}.{d[:20]} names an extent of {prev.text!r}, which is no "
                                           f"tensor of declared shape")
                if len(d) > 6 or int(d) >= len(shape):
                    raise self.error(prev, f"{prev.text} has {len(shape)} dimension(s); {prev.text}.{d[:20]} counts "
                                           f"from 0")
                out.pop()
                out += [Token(t.kind, t.text, prev.line, prev.column)
                        for t in tokenize(f"({shape[int(d)]})", self.filename) if t.kind != "eof"]
                continue
            out.append(tok)
        return out

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
        if op_tok.text == "(" and not indices:
            raise self.error(op_tok, f"polyc writes subscripts in square brackets: {first.text}[...], where "
                                     f"Tensor Comprehensions writes {first.text}(...)")
        if op_tok.kind != "op" or op_tok.text not in ASSIGN_OPS:
            found = "end of line" if op_tok.kind in ("newline", "eof") else repr(op_tok.text)
            raise self.error(op_tok, f"expected an assignment (=, +=, +=!, *=!, max=!, min=!), found {found}")
        self.next()
        rhs = self.expr()
        wheres: List[WhereRange] = []
        exists: List[Node] = []
        if self.at("where"):
            self.next()
            self.where_item(wheres, exists)
            while self.at(","):
                self.next()
                self.where_item(wheres, exists)
        loc = self.loc(first)
        end = self.toks[self.pos - 1]  # a statement may span lines (continuations)
        spanned = self.lines[first.line - 1:end.line]
        if spanned:   # from its first token to the end of its last (a TC `def` may hold it on one line)
            spanned[-1] = spanned[-1][:end.column - 1 + len(end.text)]
            spanned[0] = spanned[0][first.column - 1:]
        text = " ".join(line.strip() for line in spanned)
        return SourceStatement(first.text, indices, op_tok.text, rhs, tuple(wheres), loc,
                               text, target_loc=loc, exists=tuple(exists))

    def where_item(self, wheres: List[WhereRange], exists: List[Node]) -> None:
        """`i in lo:hi`, or TC's `exists T[e, ...]`: a read that bounds the indices' inferred
        ranges as if the statement made it, without being computed."""
        if self.at("exists") and self.toks[self.pos + 1].kind == "name" and self.toks[self.pos + 1].text != "in":
            tok = self.next()
            access = self.expr()
            if access.kind != "access":
                raise self.error(tok, "'exists' takes a tensor access (where exists A[i, j])")
            exists.append(access)
            return
        wheres.append(self.where_range())

    def where_range(self) -> WhereRange:
        tok = self.peek()
        if tok.kind != "name":
            raise self.error(tok, "expected an index name after 'where' (e.g. 'where k in 0:N')")
        self.next()
        if self.at("="):
            raise self.error(self.peek(), f"'where {tok.text} = ...' binds a name, which polyc does not "
                                          f"support; write the value in place of {tok.text}, or compute it "
                                          f"in a statement of its own")
        self.expect("in", "(write 'where i in lo:hi')")
        lower = self.arith()
        self.expect(":", "between the lower and upper bound (write 'where i in lo:hi')")
        upper = self.arith()
        stack = [lower, upper]
        while stack:
            n = stack.pop()
            if n.kind == "name" and n.value == tok.text:
                hint = f" (did you mean {tok.text.upper()}?)" if tok.text.upper() != tok.text else ""
                raise ParseError(f"the range of {tok.text} is bounded by {tok.text} itself; a range is "
                                 f"written in sizes and other indices{hint}", n.loc)
            stack.extend(n.args)
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

    # -- expressions (operator precedence, iterative) ---------------------------------------------
    def expr(self) -> Node:
        """One expression, parsed without recursion: an explicit stack of open brackets (each with
        its operand and operator stacks), so long sums and deep nesting cannot exhaust Python's
        stack.  Nesting deeper than MAX_NESTING is a ParseError at the offending bracket."""
        frames: List[_Frame] = [_Frame("top", self.peek(), None)]
        expecting_operand = True
        while True:
            f = frames[-1]
            tok = self.peek()
            if expecting_operand:
                if tok.kind == "op" and tok.text in ("-", "+", "!") or tok.kind == "name" and tok.text == "not":
                    if tok.text == "not" and f.ops and f.ops[-1][0] > _UNARY_PREC["not"]:
                        raise self.error(tok, "'not' applies to a whole condition: put it in parentheses, "
                                              "e.g. a == (not b)")
                    self.next()
                    # C's `!x` binds as tightly as unary minus (`!a > 0` is `(!a) > 0`); Python's `not` loosely
                    f.ops.append((_UNARY_PREC[tok.text], _C_SPELLING.get(tok.text, tok.text), True, self.loc(tok)))
                    continue
                if tok.kind == "number":
                    self.next()
                    f.operands.append(self.number(tok))
                    expecting_operand = False
                    continue
                if tok.kind == "name" and tok.text not in _KEYWORDS:
                    self.next()
                    if self.at("[") or self.at("("):
                        opener = self.next()
                        kind = "access" if opener.text == "[" else "call"
                        frames.append(self.open_frame(frames, _Frame(kind, tok, "]" if kind == "access" else ")"), opener))
                        if self.at(frames[-1].close):  # A[] or f()
                            self.next()
                            node = frames.pop().build(self.loc(tok))
                            frames[-1].operands.append(node)
                            expecting_operand = False
                        continue
                    if tok.text in ("True", "False"):   # Python's literals, not scalar parameters
                        frames[-1].operands.append(Node("bool", self.loc(tok), tok.text == "True"))
                    else:
                        frames[-1].operands.append(Node("name", self.loc(tok), tok.text))
                    expecting_operand = False
                    continue
                if tok.kind == "op" and tok.text == "(":
                    self.next()
                    frames.append(self.open_frame(frames, _Frame("paren", tok, ")"), tok))
                    continue
                found = "end of line" if tok.kind in ("newline", "eof") else repr(tok.text)
                raise self.error(tok, f"expected a value (number, name, tensor access or call), found {found}")
            if tok.kind == "op" and (tok.text == "?" or tok.text == ":" and f.open_conditionals()):
                # TC's and C's `c ? a : b` (select): the loosest operator, grouping from the right
                self.next()
                f.reduce_while(1)
                if tok.text == "?":
                    f.ops.append((0, "?", False, self.loc(tok)))
                else:
                    while f.ops[-1][1] == "?:":     # conditionals complete inside this one's middle
                        f.reduce()
                    _, _, _, at = f.ops.pop()
                    f.ops.append((0, "?:", False, at))
                expecting_operand = True
                continue
            op = _C_SPELLING.get(tok.text, tok.text) if tok.kind == "op" else tok.text
            prec = _BINARY_PREC.get(op) if tok.kind in ("op", "name") else None
            if prec is not None and not (tok.kind == "name" and tok.text not in ("and", "or")):
                self.next()
                f.reduce_while(prec + (op == "**"))     # `**` groups from the right, as in Python
                f.ops.append((prec, op, False, self.loc(tok)))
                expecting_operand = True
                continue
            if tok.kind == "op" and tok.text == "?" or f.open_conditionals():
                raise self.error(tok, "a conditional `c ? a : b` needs both `?` and `:`")
            node = f.finish()
            if f.kind == "top":
                return node
            if f.kind == "paren":
                self.expect(")")
                frames.pop()
                frames[-1].operands.append(node)
                continue
            f.items.append(node)
            if self.at(","):
                self.next()
                f.operands, f.ops = [], []
                expecting_operand = True
                continue
            self.expect(f.close)  # type: ignore[arg-type]
            frames.pop()
            frames[-1].operands.append(f.build(self.loc(f.head)))

    def open_frame(self, frames: List["_Frame"], frame: "_Frame", opener: Token) -> "_Frame":
        if len(frames) > MAX_NESTING:
            raise self.error(opener, f"expression nested more than {MAX_NESTING} levels deep (brackets, "
                                     f"parentheses and calls); split it into several statements")
        return frame

    def number(self, tok: Token) -> Node:
        is_float = any(c in tok.text for c in ".eE")
        if not is_float and len(tok.text.lstrip("0")) > MAX_INT_DIGITS:
            raise self.error(tok, f"integer literal with {len(tok.text)} digits is far outside any integer "
                                  f"type polyc supports (64-bit at most)")
        value = float(tok.text) if is_float else int(tok.text.lstrip("0") or "0")   # `000...01`: past int()'s digit limit
        return Node("num", self.loc(tok), value, is_float=is_float)

    def arith(self) -> Node:
        return self.expr()


#: Deepest bracket nesting accepted (the parser itself has no limit; later stages walk the tree).
MAX_NESTING = 200
#: Longest integer literal accepted (a 64-bit integer has at most 20 digits).
MAX_INT_DIGITS = 40
_KEYWORDS = ("where", "in", "and", "or", "not")
_BINARY_PREC = {"or": 1, "and": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4,
                "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6, "**": 8}
_UNARY_PREC = {"not": 3, "-": 7, "+": 7, "!": 7}
#: Tensor Comprehensions' (C's) spellings of the logical operators.
_C_SPELLING = {"&&": "and", "||": "or", "!": "not"}
_COMPARISONS = frozenset(("<", "<=", ">", ">=", "==", "!="))


class _Frame:
    """One open bracket of the expression parser: its operands, pending operators and, for an
    access or call, the arguments finished so far."""

    def __init__(self, kind: str, head: Token, close: object):
        self.kind, self.head, self.close = kind, head, close
        self.operands: List[Node] = []
        self.ops: List[Tuple[int, str, bool, SourceLocation]] = []
        self.items: List[Node] = []
        # Comparisons reduced in this frame, by id, with their right operand: a comparison that
        # follows one of them continues its chain from that operand.
        self.chains: Dict[int, Node] = {}

    def reduce_while(self, prec: int) -> None:
        """Apply pending operators binding at least as tightly as `prec` (left associativity)."""
        while self.ops and self.ops[-1][0] >= prec:
            self.reduce()

    def open_conditionals(self) -> bool:
        """Whether a `?` waits for its `:` in this frame."""
        return any(op == "?" for _, op, _, _ in self.ops)

    def reduce(self) -> None:
        _, op, unary, loc = self.ops.pop()
        if op == "?:":
            if_false, if_true, cond = self.operands.pop(), self.operands.pop(), self.operands.pop()
            self.operands.append(Node("call", loc, "select", (cond, if_true, if_false)))
            return
        if unary:
            operand = self.operands.pop()
            self.operands.append(operand if op == "+" else Node("un", loc, op, (operand,)))
            return
        rhs, lhs = self.operands.pop(), self.operands.pop()
        middle = self.chains.get(id(lhs)) if op in _COMPARISONS else None
        if middle is not None:
            # `a < b < c` is Python's chain `a < b and b < c` (as in loop kernels), not C's
            # `(a < b) < c`; a parenthesised comparison comes from another frame and stays whole.
            node = Node("bin", loc, "and", (lhs, Node("bin", loc, op, (middle, rhs))))
        else:
            node = Node("bin", loc, op, (lhs, rhs))
        if op in _COMPARISONS:
            self.chains[id(node)] = rhs
        self.operands.append(node)

    def finish(self) -> Node:
        while self.ops:
            self.reduce()
        return self.operands[-1]

    def build(self, loc: SourceLocation) -> Node:
        return Node(self.kind, loc, self.head.text, tuple(self.items))


def parse_einsum(source: str, filename: str = "<kernel>", display: Optional[str] = None,
                 extents: Optional[Mapping[str, Tuple[str, ...]]] = None) -> List[SourceStatement]:
    """Parse Einstein-notation text into source statements (raises ParseError with a caret);
    `extents` are the declared tensors' extents, which TC's `T.d` reads."""
    statements = _Parser(source, filename, display, extents).program()
    if not statements:
        raise ParseError("the kernel has no statements", SourceLocation(1, 1, source.split("\n")[0], filename))
    return statements
