"""Pieces of C shared by the packed-contraction generators (`c_packed`, `c_packed_inplace`): the
micro-kernel, loops of a group of source loops run as one linear index, and copies between the
target and a micro-tile buffer."""
from __future__ import annotations

from typing import List, NamedTuple, Tuple

from .names import INTERNAL

#: polyc's local names; user names (iterators `i_k`, sizes `n_K`, ...) never carry this prefix.
P = INTERNAL


def packed_slot(kk: str, t: int, terms: int) -> str:
    """The packed position of product `t` at k position `kk`: a sum of `terms` products packs its
    products' factors side by side, `terms` values per k position (`Contraction.terms`)."""
    return kk if terms == 1 else f"(({kk}) * {terms} + {t})"


def micro_kernel(name: str, ctype: str, lanes: int, mr: int, nv: int, vbytes: int, in_place: bool = False,
                 zero_start: bool = False, a_rows: bool = False, a_offsets: bool = False, terms: int = 1) -> str:
    """An mr x (nv * lanes) register tile: `c[r][:] += a[k][r] * b[k][:]` for k < kb (GCC vectors),
    row r of the tile at `c + r * ldc` (the target itself, or a buffer of rows of nv * lanes).
    The lane vectors come from a packed panel (`b + k * nv * lanes`), or, `in_place`, from the
    factor itself at `b + koff[k]` (unaligned; `c_packed_inplace`).  `zero_start`: a first
    argument `first` makes the tile start from zero instead of `c` (`c_packed_init`).  `a_rows`:
    the m-side values come from the factor's own rows, `a[r * lda + k]` (`c_packed_arows`), not
    from a packed panel `a[k * mr + r]`.  `a_offsets`: they come from the factor itself at
    `arows[r][akoff[k]]`, a pointer per row and an offset per k position (`c_packed_arows`: rows
    and k positions that are not one linear run, such as a convolution's).  `terms`: a sum of that
    many products (`Contraction.terms`), packed side by side at each k position (`a[(k * terms + t)
    * mr + r]`, `b + (k * terms + t) * nv * lanes`): each accumulator adds the sum of the products,
    summed left to right as written, so the rounding is the source's."""
    if terms > 1 and (in_place or a_rows or a_offsets):
        raise ValueError("a sum of products is packed on both sides")
    vt = f"{name}_v"
    nr = nv * lanes
    acc = [[f"{P}c{r}_{v}" for v in range(nv)] for r in range(mr)]
    koff = f"const int64_t *restrict {P}koff, " if in_place else ""
    first = f"int {P}first, " if zero_start else ""
    lda = f"int64_t {P}lda, " if a_rows else ""
    a_param = (f"const {ctype} *const *restrict {P}arows, const int64_t *restrict {P}akoff, " if a_offsets
               else f"const {ctype} *restrict {P}a, ")
    lines = [f"typedef {ctype} {vt} __attribute__((vector_size({vbytes})));",
             f"static inline void {name}({first}int64_t {P}kb, {a_param}{lda}"
             f"const {ctype} *restrict {P}b, "
             f"{koff}{ctype} *restrict {P}c, int64_t {P}ldc) {{"]
    loads = [f"memcpy(&{acc[r][v]}, {P}c + {r} * {P}ldc + {v * lanes}, sizeof({vt}));"
             for r in range(mr) for v in range(nv)]
    lines.append(f"  {vt} {', '.join(a for row in acc for a in row)};")
    if zero_start:
        lines.append(f"  if ({P}first) {{ {' '.join(f'{a} = ({vt}){{0}};' for row in acc for a in row)} }}")
        lines.append(f"  else {{ {' '.join(loads)} }}")
    else:
        lines += [f"  {load}" for load in loads]
    if a_offsets:
        lines += [f"  const {ctype} *restrict {P}ar{r} = {P}arows[{r}];" for r in range(mr)]
    lines += ["  #pragma GCC unroll 4", f"  for (int64_t {P}k = 0; {P}k < {P}kb; {P}k++) {{",
              f"    const {ctype} *{P}bk = {P}b + " + (f"{P}koff[{P}k];" if in_place else f"{P}k * {nr * terms};")]
    if a_offsets:
        lines.append(f"    const int64_t {P}ko = {P}akoff[{P}k];")
    # Per product t of the sum: its lane vectors b(t, v) and broadcast values a(t, r).
    def b(t: int, v: int) -> str:
        return f"{P}b{v}" if terms == 1 else f"{P}b{t}_{v}"

    def a(t: int, r: int) -> str:
        return f"{P}a{r}" if terms == 1 else f"{P}a{t}_{r}"

    def a_read(t: int, r: int) -> str:
        if a_offsets:
            return f"{P}ar{r}[{P}ko]"
        if a_rows:
            return f"{P}a[{r} * {P}lda + {P}k]"
        return f"{P}a[{packed_slot(f'{P}k', t, terms)} * {mr} + {r}]"

    for t in range(terms):
        for v in range(nv):
            lines.append(f"    {vt} {b(t, v)}; memcpy(&{b(t, v)}, {P}bk + {(t * nv + v) * lanes}, sizeof({vt}));")
    for r in range(mr):
        lines.append("    { " + " ".join(f"const {ctype} {a(t, r)} = {a_read(t, r)};" for t in range(terms)))
        for v in range(nv):
            lines.append(f"      {acc[r][v]} += {' + '.join(f'{a(t, r)} * {b(t, v)}' for t in range(terms))};")
        lines.append("    }")
    lines.append("  }")
    for r in range(mr):
        for v in range(nv):
            lines.append(f"  memcpy({P}c + {r} * {P}ldc + {v * lanes}, &{acc[r][v]}, sizeof({vt}));")
    lines.append("}")
    return "\n".join(lines)


class Groups(NamedTuple):
    """The C names of the contraction's m, n and k loops (the statement's iterators)."""

    m: Tuple[str, ...]
    n: Tuple[str, ...]
    k: Tuple[str, ...]


def decode(group: Tuple[str, ...], lin: str, indent: str) -> List[str]:
    """Declare the loops of `group` at linear position `lin` (last loop fastest, as in the source)."""
    if len(group) == 1:
        x = group[0]
        return [f"{indent}int64_t {x} = {P}lo_{x} + ({lin});"]
    out = [f"{indent}int64_t {', '.join(group)};", f"{indent}{{ int64_t {P}t = {lin};"]
    for x in reversed(group[1:]):
        out.append(f"{indent}  {x} = {P}lo_{x} + {P}t % {P}e_{x}; {P}t /= {P}e_{x};")
    out.append(f"{indent}  {group[0]} = {P}lo_{group[0]} + {P}t; }}")
    return out


def step(group: Tuple[str, ...]) -> str:
    """Advance the loops of `group` by one linear position (an odometer: no division)."""
    if len(group) == 1:
        return f"{group[0]}++;"
    text = f"{group[0]}++;"
    for x in group[1:]:
        text = f"if (++{x} == {P}lo_{x} + {P}e_{x}) {{ {x} = {P}lo_{x}; {text} }}"
    return text


def k_positions(group: Tuple[str, ...], start: str, count: str, pos: str, body: List[str], indent: str) -> List[str]:
    """Lines running `body` (lines indented by `indent` + 4) for `count` consecutive linear
    positions of `group` from `start` (`pos` counts them from 0): the group's loops are decoded once
    and then advanced by `step`, not divided out at every position (a convolution's k group
    (n, h, w) costs two integer divisions per position otherwise).  `body` must not `continue`."""
    return [f"{indent}{{", *decode(group, start, indent + "  "),
            f"{indent}  for (int64_t {pos} = 0; {pos} < {count}; {pos}++) {{",
            *body,
            f"{indent}    {step(group)}",
            f"{indent}  }}",
            f"{indent}}}"]


def run_loop(group: Tuple[str, ...], lin: str, count: str, pos: str, body, indent: str) -> List[str]:
    """Lines running `body(position)` for `count` consecutive linear positions of `group` from `lin`
    (`pos` counts them from 0), with the group's loops declared under their own names.  A group of
    several loops runs in stretches along its last loop, each a plain affine loop the compiler can
    vectorise."""
    if len(group) == 1:
        x = group[0]
        return [f"{indent}for (int64_t {pos} = 0; {pos} < {count}; {pos}++) {{ "
                f"const int64_t {x} = {P}lo_{x} + ({lin}) + {pos}; {body(pos)} }}"]
    last = group[-1]
    return [*decode(group, lin, indent),
            f"{indent}for (int64_t {pos} = 0; {pos} < {count}; ) {{",
            f"{indent}  int64_t {P}run = {P}lo_{last} + {P}e_{last} - {last};",
            f"{indent}  if ({P}run > {count} - {pos}) {P}run = {count} - {pos};",
            f"{indent}  const int64_t {P}first = {last};",
            f"{indent}  for (int64_t {P}t = 0; {P}t < {P}run; {P}t++) {{ "
            f"const int64_t {last} = {P}first + {P}t; {body(f'{pos} + {P}t')} }}",
            f"{indent}  {pos} += {P}run; {last} += {P}run - 1; {step(group)}",
            f"{indent}}}"]


def tile_copy(c, rows: str, cols: str, body) -> List[str]:
    """Loops copying between the target and the tile buffer over `rows` x `cols` elements:
    `body(column position)` is one element's statement."""
    return [*decode(c.m, f"{P}ic + {P}ir", "            "),
            f"            for (int64_t {P}r = 0; {P}r < {rows}; {P}r++) {{",
            *run_loop(c.n, f"{P}jc + {P}jr", cols, f"{P}q", body, "              "),
            f"              {step(c.m)}",
            "            }"]


def tile_loops(mr: int, nr: int, tile: List[str], indent: str) -> List[str]:
    """The lane panels `jr` of a block of `nb` lanes, and the m panels `ir` of `mb` rows against
    each, running `tile` with the panel's width `w` and height `h` (both packed paths)."""
    return [f"{indent}for (int64_t {P}jr = 0; {P}jr < {P}nb; {P}jr += {nr}) {{",
            f"{indent}  const int64_t {P}w = {P}nb - {P}jr < {nr} ? {P}nb - {P}jr : {nr};",
            f"{indent}  for (int64_t {P}ir = 0; {P}ir < {P}mb; {P}ir += {mr}) {{",
            f"{indent}    const int64_t {P}h = {P}mb - {P}ir < {mr} ? {P}mb - {P}ir : {mr};",
            *tile,
            f"{indent}  }}",
            f"{indent}}}"]
