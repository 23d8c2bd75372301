"""Printing IR scalar expressions and accesses as C (shared by the C and CUDA emitters)."""
from __future__ import annotations

import math
from typing import Callable, Dict, Optional

from ..errors import PolycError
from ..ir import (Access, Affine, Binary, Call, Cast, Const, DType, Expr, IndexExpr, ScalarRef, Select,
                  Statement, Unary)
from .typing import BOOL, Typing

_FLOAT_FN = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "abs": "fabs", "floor": "floor",
             "ceil": "ceil", "sin": "sin", "cos": "cos", "max": "fmax", "min": "fmin", "pow": "pow"}
_INT_LIMITS = {"i32": ("INT32_MIN", "INT32_MAX"), "i64": ("INT64_MIN", "INT64_MAX")}


def literal(value, dtype: DType) -> str:
    """A C literal of `dtype` (floats keep their type: `0.5f` for float32)."""
    if dtype.is_float:
        v = float(value)
        if math.isinf(v):
            return "INFINITY" if v > 0 else "(-INFINITY)"
        if math.isnan(v):
            return "NAN"
        text = repr(v)
        if "e" not in text and "." not in text:
            text += ".0"
        return text + ("f" if dtype.bits == 32 else "")
    if isinstance(value, float) and math.isinf(value):
        lo, hi = _INT_LIMITS.get(dtype.name, ("INT64_MIN", "INT64_MAX"))
        return hi if value > 0 else lo
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and not value.is_integer():
        raise PolycError(f"literal {value} in an integer expression")
    return str(int(value))


class CExprPrinter:
    """Prints one statement's expressions, with original iterators replaced by loop expressions."""

    def __init__(self, typing: Typing, index_text: Dict[str, str],
                 access_text: Callable[[Access, "CExprPrinter"], str]):
        self.typing = typing
        self.index_text = index_text
        self._access_text = access_text

    def affine(self, a: Affine) -> str:
        parts = []
        for v, c in a.terms:
            term = self.index_text.get(v, v)
            if any(ch in term for ch in " +-*/?") and not (term.startswith("(") and term.endswith(")")):
                term = f"({term})"
            parts.append(term if c == 1 else f"-{term}" if c == -1 else f"{c} * {term}")
        if a.constant or not parts:
            parts.append(str(a.constant))
        text = " + ".join(parts)
        return text.replace("+ -", "- ")

    def access(self, acc: Access) -> str:
        return self._access_text(acc, self)

    def expr(self, e: Expr, want: Optional[DType]) -> str:
        """C text of `e` evaluated in type `want` (literals adopt it)."""
        t = self.typing
        if isinstance(e, Const):
            return literal(e.value, e.dtype or want or t.default_float)
        if isinstance(e, ScalarRef):
            return e.name
        if isinstance(e, IndexExpr):
            return f"({self.affine(e.value)})"
        if isinstance(e, Access):
            return self.access(e)
        if isinstance(e, Cast):
            return f"(({e.dtype.c_name})({self.expr(e.operand, None)}))"
        if isinstance(e, Unary):
            inner = self.expr(e.operand, want)
            if e.op == "not":
                return f"(!{inner})"
            return f"(-({inner}))" if inner.startswith("-") else f"(-{inner})"   # not `--1.0f`
        if isinstance(e, Binary):
            if e.op in ("and", "or"):
                op = "&&" if e.op == "and" else "||"
                return f"({self.expr(e.lhs, None)} {op} {self.expr(e.rhs, None)})"
            a_t, b_t = t.operand_types(e, want)
            if e.op in ("<", "<=", ">", ">=", "==", "!="):
                common = _common(a_t, b_t)
                return f"({self.expr(e.lhs, common)} {e.op} {self.expr(e.rhs, common)})"
            common = _common(a_t, b_t) or want
            lhs, rhs = self.expr(e.lhs, common), self.expr(e.rhs, common)
            if e.op == "/" and common is not None and not common.is_float:
                return f"((double)({lhs}) / (double)({rhs}))"
            if e.op == "%" and common is not None and common.is_float:
                return f"{_fn('fmod', common)}({lhs}, {rhs})"
            return f"({lhs} {e.op} {rhs})"
        if isinstance(e, Select):
            rt = t.type_of(e, want)
            return f"({self.expr(e.cond, None)} ? {self.expr(e.if_true, rt)} : {self.expr(e.if_false, rt)})"
        if isinstance(e, Call):
            rt = t.type_of(e, want) or want
            args = [self.expr(a, rt) for a in e.args]
            if rt is not None and rt.is_float:
                return f"{_fn(_FLOAT_FN[e.fn], rt)}({', '.join(args)})"
            if e.fn == "abs":
                return f"llabs({args[0]})"
            if e.fn in ("max", "min"):
                op = ">" if e.fn == "max" else "<"
                return f"(({args[0]}) {op} ({args[1]}) ? ({args[0]}) : ({args[1]}))"
            return f"{e.fn}({', '.join(args)})"
        raise PolycError(f"cannot print expression {e!r}")

    def statement(self, st: Statement) -> str:
        """The statement as one C assignment."""
        dtype = self.typing.tensors[st.target.tensor]
        target = self.access(st.target)
        value = self.expr(st.value, dtype)
        if st.update is None:
            return f"{target} = {value};"
        if st.update in ("+", "*"):
            return f"{target} {st.update}= {value};"
        if dtype.is_float:
            return f"{target} = {_fn('f' + st.update, dtype)}({target}, {value});"
        op = ">" if st.update == "max" else "<"
        return f"{target} = ({value}) {op} {target} ? ({value}) : {target};"


def _common(a: Optional[DType], b: Optional[DType]) -> Optional[DType]:
    from ..ir import promote
    if a is None or a == BOOL:
        return b if b != BOOL else None
    if b is None or b == BOOL:
        return a
    return promote(a, b)


def _fn(name: str, dtype: DType) -> str:
    return name + "f" if dtype.bits == 32 and dtype.is_float else name
