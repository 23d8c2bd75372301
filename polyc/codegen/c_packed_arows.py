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
product has at most `MAX_LANES` lanes at run time (`polyc.schedule.packing_paths`).

Any other m-side array read is read in place through offsets (`reads_at_offsets`): an affine
subscript's address is a sum of a part that moves with the m loops and one that moves with the k
loops, so the micro-kernel reads `arows[r][akoff[k]]`, a pointer per tile row (`row_pointers`) and
an offset per k position of the block (`k_offsets`, computed once per block).  A convolution's
weight gradient, `K_grad[f, c, kh, kw] += Y_grad[n, f, h, w] * X[n, c, h + kh, w + kw]`, turned
round (`pack(..., lanes="Y_grad")`, as `"auto"` does: `auto_size.pack_lanes`), has m loops
(c, kh, kw), k loops (n, h, w) and 32 lanes (f): X's windows are read where they lie, where the
default orientation copied every element of them into lane panels, in decoded scalar moves, for
two vector multiply-adds each (32x32x3x3 over 56x56: 0.69 -> 0.29 ms on one thread).
"""
from __future__ import annotations

from typing import List

from ..schedule.packing_paths import MAX_LANES
from .c_packed_parts import P, Groups, decode, k_positions

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


def offsets_setup() -> List[str]:
    """Helper line (sizes known): `pc_ain`, whether this call reads the factor in place."""
    return [f"  const int {P}ain = {P}N <= {MAX_LANES};"]


def k_offsets(g: Groups, ctype: str, m_factor: str, kc: int, indent: str) -> List[str]:
    """Lines declaring `pc_akoff[kc]` and, when `pc_ain`, filling it for the k block (`pc`, `kb`):
    the distance of each k position's element from the block's first, along the first row."""
    inner = indent + "  "
    return [f"{indent}int64_t {P}akoff[{kc}];",
            f"{indent}if ({P}ain) {{",
            *decode(g.m, "0", inner),
            f"{inner}const {ctype} *{P}abase;",
            f"{inner}{{", *decode(g.k, f"{P}pc", inner + "  "), f"{inner}  {P}abase = &{m_factor};", f"{inner}}}",
            *k_positions(g.k, f"{P}pc", f"{P}kb", f"{P}kk",
                         [f"{inner}    {P}akoff[{P}kk] = (int64_t)(&{m_factor} - {P}abase);"], inner),
            f"{indent}}}"]


def row_pointers(g: Groups, ctype: str, m_factor: str, mr: int, indent: str) -> List[str]:
    """Lines declaring `pc_arows[mr]`: the factor's element at row `ic + ir + r` and the k block's
    first position (decoded once), for each row r of the tile."""
    out = [f"{indent}const {ctype} *{P}arows[{mr}];", f"{indent}{{", *decode(g.k, f"{P}pc", indent + "  ")]
    for r in range(mr):
        out += [f"{indent}  {{", *decode(g.m, f"{P}ic + {P}ir + {r}", indent + "    "),
                f"{indent}    {P}arows[{r}] = &{m_factor};", f"{indent}  }}"]
    return out + [f"{indent}}}"]
