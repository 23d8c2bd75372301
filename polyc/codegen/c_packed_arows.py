"""Products with few lanes read the m-side factor's rows in place (`pack`'s classic and few-rows
paths).

Packing the m-side factor copies each of its elements once per k block; the micro-kernel then
uses each copy once per lane panel.  With few lanes (attention's `P V`: 1024 x 1024 against 64
columns, four panels of 16) the copy cost a quarter to a third of the product: its reads walk six
rows at once, one element each, in a loop of scalar moves.  Here whole m panels are read by the
micro-kernel straight from the factor, `a[r * lda + k]` (six row streams the hardware prefetches,
overlapped with the multiply-adds); only a partial last panel is packed (its missing rows read as
zero from the buffer).  The products and their order are the packed code's, so the result is the
same bit for bit.

It applies when the contraction has one m loop and one k loop, the m-side factor is an array read
whose elements are consecutive along k and whose rows lie a fixed distance apart along m, and the
product has at most `MAX_LANES` lanes at run time.
"""
from __future__ import annotations

from typing import List

from ..ir import Access
from .c_packed_parts import P, Groups, consecutive_along, decode

#: Most lanes (n-side elements) for which the m-side rows are read in place.  Measured against
#: OpenBLAS on 1024 rows x 1024 k (f32, AVX2, 1 thread; packed -> in place, two runs each): 64 lanes
#: 0.85-0.87 -> 1.13-1.17x, 128 lanes 0.94-0.99 -> 1.04-1.11x, 256 lanes 0.82-0.97 -> 0.93-0.99x,
#: 512 lanes 0.81-0.95 -> 0.77-0.87x (there the packed panel's reuse pays for its copy).
MAX_LANES = 256


def reads_rows_in_place(contraction) -> bool:
    """Whether the m-side factor's whole panels can be read from its own rows (module docstring)."""
    c = contraction
    f = c.m_factor
    return (len(c.m) == 1 and len(c.k) == 1 and isinstance(f, Access) and consecutive_along(f, c.k[0])
            and f.indices[-1].coeff(c.m[0]) == 0)


def rows_setup(g: Groups, ctype: str, m_factor: str) -> List[str]:
    """Helper lines (sizes known): `pc_ain`, whether this call reads rows in place, and `pc_lda`,
    the elements between two of the factor's rows."""
    (m,), (k,) = g.m, g.k
    return [f"  const int {P}ain = {P}N <= {MAX_LANES};",
            f"  int64_t {P}lda;",
            f"  {{ int64_t {m} = {P}lo_{m}; const int64_t {k} = {P}lo_{k};",
            f"    const {ctype} *{P}arow = &{m_factor}; {m}++; {P}lda = (int64_t)(&{m_factor} - {P}arow); }}"]


def row_pointer(g: Groups, ctype: str, m_factor: str, indent: str) -> List[str]:
    """Lines declaring `pc_arow`, the factor's element at row `ic + ir` and the k block's start."""
    return [f"{indent}const {ctype} *{P}arow;",
            f"{indent}{{",
            *decode(g.m, f"{P}ic + {P}ir", indent + "  "),
            *decode(g.k, f"{P}pc", indent + "  "),
            f"{indent}  {P}arow = &{m_factor};",
            f"{indent}}}"]
