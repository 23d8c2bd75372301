"""One validator for every integer argument of a schedule primitive.

Why bounds at all: an argument becomes a coefficient or a constant of the quasi-affine schedule
maps (`floor(i / size)`, `i + amount`, `j + factor * i`), and isl turns those into the bounds
and steps of the generated loops, which C evaluates in 64-bit integers.  A value near 2**63 wraps
(`shift(..., 2**63 - 1)` gave wrong code), one past 2**64 reached isl's `int_from_si` as garbage
(`tile(i=2**64)` produced zeros) and one past 2**70 made isl's arithmetic crawl.

The bound: |value| <= MAX_SCHEDULE_INT = 2**31 - 1.  For every size below 2**31 (an array of
more than 2**31 elements along one dimension is out of scope), a product `value * size` stays
below 2**62, so the few such terms of one loop bound cannot overflow int64.  Unroll factors are
bounded far lower (`MAX_UNROLL_FACTOR`): each copy is generated code.
"""
from __future__ import annotations

import re
from typing import Optional

import islpy as isl

from ..errors import ScheduleArgumentError

#: Largest magnitude of an integer schedule argument (see the module docstring).
MAX_SCHEDULE_INT = 2**31 - 1
#: Largest unroll (or unroll-and-jam) factor: the loop body is copied this many times.
MAX_UNROLL_FACTOR = 1024
#: Largest magnitude of a coefficient or constant in a schedule map.  Each argument is bounded by
#: MAX_SCHEDULE_INT, but primitives compose (two skews by 2**31 give a coefficient near 2**62), so
#: the maps themselves are bounded too: with sizes below 2**31 a term stays below 2**63.
MAX_MAP_COEFFICIENT = 2**32


def map_coefficients_fit(m: isl.Map) -> bool:
    """Whether every coefficient, constant and division of `m` is within +-MAX_MAP_COEFFICIENT.

    Read from isl's text of the map, where each of them is a decimal literal (`128i`, `-3 + j`,
    `floor((i)/32)`) and names (`i0`, `e1`) are not: one pass over a string instead of a Python
    call per coefficient (auto's row repairs re-check dozens of maps after each of ~20 steps)."""
    return all(len(x) < 10 or int(x) <= MAX_MAP_COEFFICIENT for x in _LITERAL.findall(m.to_str()))


#: A decimal literal not inside a name (`i0`, `S16`).
_LITERAL = re.compile(r"(?<![\w.])\d+")


def schedule_int(value: object, what: str, *, minimum: int = -MAX_SCHEDULE_INT,
                 maximum: int = MAX_SCHEDULE_INT, nonzero: bool = False) -> int:
    """`value` if it is a real int (not bool, float or str) in [minimum, maximum] (and non-zero
    when asked); else `ScheduleArgumentError` naming the argument `what` and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScheduleArgumentError(f"{what} must be an int, not {value!r} ({type(value).__name__})", what)
    if not minimum <= value <= maximum or (nonzero and value == 0):
        allowed = (f"a positive int no larger than {maximum}" if minimum == 1 else
                   f"a non-negative int no larger than {maximum}" if minimum == 0 else
                   f"an int between {minimum} and {maximum}") + (" other than 0" if nonzero else "")
        shown = value if abs(value) < 10**12 else f"{'-' if value < 0 else ''}~2**{abs(value).bit_length() - 1}"
        why = "" if minimum <= value <= maximum else (" (larger magnitudes could overflow the generated "
                                                      "code's 64-bit loop arithmetic)")
        raise ScheduleArgumentError(f"{what} must be {allowed}{why}, not {shown}", what)
    return value


def require_bool(value: object, what: str) -> bool:
    """`value` if it is True or False; else `ScheduleArgumentError` (`reduction="no"` is truthy,
    and would have asked for a reassociated reduction)."""
    if not isinstance(value, bool):
        raise ScheduleArgumentError(f"{what} must be True or False, not {value!r}", what)
    return value


def positive_int(value: object, what: str, maximum: int = MAX_SCHEDULE_INT) -> int:
    """A real int in [1, maximum]."""
    return schedule_int(value, what, minimum=1, maximum=maximum)


def optional_positive_int(value: object, what: str, maximum: int = MAX_SCHEDULE_INT) -> Optional[int]:
    """None, or a real int in [1, maximum]."""
    return None if value is None else positive_int(value, what, maximum)
