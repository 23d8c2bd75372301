"""Whether a literal fits the type it takes, and the typed error when it does not.

One rule for both oracles: the C/CUDA printer (`polyc.codegen.cexpr`) and the numpy interpreter
(`polyc.runtime.interpreter`) refuse the same literals with the same `LiteralRangeError`, naming the
literal and its position.  An integer literal must lie in its integer type's range, or in the
finite range of its float type (a float literal such as `1e400` is already inf in Python).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

import numpy as np

from ..errors import LiteralRangeError, SourceLocation
from .program import Statement
from .types import DType

#: Value ranges of the integer types, by polyc type name.
INT_RANGE = {"i32": (-2 ** 31, 2 ** 31 - 1), "i64": (-2 ** 63, 2 ** 63 - 1), "u8": (0, 2 ** 8 - 1),
             "u16": (0, 2 ** 16 - 1)}


def integer_literal_fits(value, dtype: DType) -> bool:
    """Whether `value` (any literal) is representable in `dtype`: integer literals must be in the
    integer type's range, or within the float type's finite range (not rounded to inf)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return True
    if dtype.is_float:
        return abs(value) <= float(np.finfo(dtype.numpy).max)     # exact int/float comparison
    lo, hi = INT_RANGE.get(dtype.name, INT_RANGE["i64"])
    return lo <= value <= hi


def literal_location(st: Statement, value) -> Optional[SourceLocation]:
    """Where literal `value` of statement `st` is written: its column on the statement's first line
    when the digits appear there, else the statement's own position."""
    loc = st.location
    if loc is None or not loc.text:
        return loc
    v = int(value)
    digits = str(abs(v)) if v.bit_length() < 10000 else ""
    col = loc.text.find(digits) if digits else -1
    return replace(loc, column=col + 1) if col >= 0 else loc


def literal_range_error(value, dtype: DType, location=None) -> LiteralRangeError:
    """The error for an integer literal that does not fit the type it takes in its expression."""
    v = int(value)
    if v.bit_length() > 128:
        shown = f"of {v.bit_length()} bits ({'-' if v < 0 else ''}about 10**{int(v.bit_length() * 0.30103)})"
    else:
        shown = str(v)
    if dtype.is_float:
        rule = f"{dtype.numpy_name} (largest finite value {np.finfo(dtype.numpy).max:.3g})"
        advice = "write a smaller value"
    else:
        lo, hi = INT_RANGE.get(dtype.name, INT_RANGE["i64"])
        rule = f"{dtype.numpy_name} (range {lo} to {hi})"
        advice = "write a smaller value, or a float literal (e.g. 1e30) in a float expression"
    return LiteralRangeError(f"the integer literal {shown} does not fit in {rule}, the type it takes in "
                             f"this expression; {advice}", location, literal=v, dtype=dtype)
