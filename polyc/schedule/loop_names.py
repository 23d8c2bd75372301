"""Which names a loop may take: the one rule for names given to primitives (`tile`'s and `split`'s
new loops) and names read from saved schedules, so that whatever a schedule calls a loop, its
`to_json` output reads back (`schedule_file`).

A loop name is printed into generated C (mangled, but still read by people in the source):
a plain ASCII identifier, at most `MAX_NAME_CHARS` long, no C keyword or type the generated code
declares, no Python keyword, not starting with `_` (polyc's own loops: `_max0`, `_q0`) or
`polyc` (its helpers)."""
from __future__ import annotations

import keyword
import re
from typing import Optional, Sequence

MAX_NAME_CHARS = 64

PLAIN_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
#: C keywords and the type names generated code declares; a loop of that name would not compile
#: or would change what a declaration means.
C_RESERVED = frozenset("""
    auto break case char const continue default do double else enum extern float for goto if inline
    int long register restrict return short signed sizeof static struct switch typedef union unsigned
    void volatile while asm typeof bool true false NULL size_t int8_t int16_t int32_t int64_t uint8_t
    uint16_t uint32_t uint64_t ptrdiff_t intptr_t uintptr_t main
""".split())


def loop_name_problem(value: str) -> Optional[str]:
    """Why `value` cannot name a loop (a phrase after the name), or None when it can."""
    if not PLAIN_IDENTIFIER.match(value) or len(value) > MAX_NAME_CHARS:
        return (f"is not a plain identifier (letters, digits and '_', starting with a letter, at most "
                f"{MAX_NAME_CHARS} characters)")
    if value in C_RESERVED or keyword.iskeyword(value) or value.lower().startswith("polyc"):
        return "is reserved (a C keyword or type, or polyc's own prefix)"
    return None


_NAME_SUFFIX = re.compile(r"[A-Za-z0-9_]{1,32}\Z")


def derived_from(value: str, existing: Sequence[str]) -> bool:
    """`value` is a loop polyc names after one of its own (`_max0_outer` after tiling `_max0`, the
    loop of a clamped subscript): the kernel's names, allowed wherever those are."""
    return any(value.startswith(e + "_") and bool(_NAME_SUFFIX.match(value[len(e) + 1:]))
               for e in existing if e.startswith("_"))
