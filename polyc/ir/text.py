"""Statements and expressions as short readable infix text (for outlines and views, not for codegen)."""
from __future__ import annotations

import re
from typing import Sequence, Tuple

from .affine import Affine
from .expr import Access, Binary, Call, Cast, Const, Expr, IndexExpr, ScalarRef, Select, Unary

_PREC = {"or": 1, "and": 2, "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3,
         "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}


def expr_text(e: Expr, parent_prec: int = 0) -> str:
    """`e` in infix notation, with parentheses only where precedence needs them."""
    if isinstance(e, Access):
        return str(e)
    if isinstance(e, Const):
        return repr(e.value) if isinstance(e.value, float) else str(e.value)
    if isinstance(e, ScalarRef):
        return e.name
    if isinstance(e, IndexExpr):
        return f"({e.value})"
    if isinstance(e, Unary):
        inner = expr_text(e.operand, 6)
        return f"not {inner}" if e.op == "not" else f"-{inner}"
    if isinstance(e, Binary):
        p = _PREC.get(e.op, 4)
        text = f"{expr_text(e.lhs, p)} {e.op} {expr_text(e.rhs, p + 1)}"
        return f"({text})" if p < parent_prec else text
    if isinstance(e, Call):
        fn = e.fn[2:] if e.fn in ("pymax", "pymin") else e.fn   # Python's builtins, as written
        return f"{fn}({', '.join(expr_text(a) for a in e.args)})"
    if isinstance(e, Select):
        return f"select({expr_text(e.cond)}, {expr_text(e.if_true)}, {expr_text(e.if_false)})"
    if isinstance(e, Cast):
        return f"{e.dtype.name}({expr_text(e.operand)})"
    return str(e)


def statement_text(st) -> str:
    """`C[i, j] += A[i, k] * B[k, j]`, `C[i, j] = max(C[i, j], ...)` style text of one statement."""
    target = str(st.target)
    value = expr_text(st.value)
    if st.update is None:
        return f"{target} = {value}"
    if st.update in ("+", "*"):
        return f"{target} {st.update}= {value}"
    return f"{target} = {st.update}({target}, {value})"


def with_floors(text: str, derived: Sequence[Tuple[str, Affine, int]]) -> str:
    """`text` with each internal derived size (`_size0`, `_floor0`: a floor polyc introduced for
    `(N + 1) // 2`) spelled as the floor it stands for, `floor((N + 1) / 2)`; sizes the user named
    stay."""
    for name, num, d in reversed(derived):
        if name.startswith("_"):
            text = re.sub(rf"(-?\d*\*?){re.escape(name)}\b", lambda m: f"{m.group(1)}floor(({num}) / {d})", text)
    return text
