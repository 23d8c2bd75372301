"""C for a packed contraction (`Schedule.pack`): BLIS-style blocking, packing and a micro-kernel.

The generated helper runs the statement `T += P1 * P2` over its box (bounds from the plan) in the
order the schedule proved legal:

    n_block (nc) -> k_block (kc) -> pack the n-side factor of the block into `Bp`
      -> m_block (mc) -> pack the m-side factor into `Ap`
        -> n_panel (nr) -> m_panel (mr) -> micro-kernel: load the mr x nr target tile,
           for each k: tile[r][:] += Ap[k][r] * Bp[k][:]   (nv vectors per row, in registers)
           store the tile

Factors are packed through their own expressions (any affine layout, scalars folded as written);
panels are padded with zeros to whole micro-tiles.  Whole tiles of a row-major target are updated
in place (`target_rows_direct`); other tiles go through a buffer, edge tiles loading and storing
only their valid part.  With OpenMP and a `parallel` mark on the m_block loop, the threads share the packed `Bp`
(packed cooperatively) and each packs its own `Ap`.  The helper returns 0 when it cannot allocate
its buffers; the caller then runs the plain loops of the same schedule.

Factors read where they lie instead of packed (`polyc.schedule.packing_paths` says when): a
sliding-window n-side factor (`c_packed_inplace`, the direct convolution), and, with few lanes,
the m-side factor's rows or any affine m-side access through row pointers and k offsets
(`c_packed_arows`).
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import islpy as isl

from ..ir import Access, Binary, Program
from ..poly.islutil import isl_name
from ..schedule.packing import PackPlan
from ..schedule.packing_paths import reads_at_offsets, reads_in_place, reads_rows_in_place, target_rows
from .cexpr import CExprPrinter
from .loop_ast import c_text, lexpr, strip_parens
from .c_packed_init import zero_box
from .c_packed_inplace import inplace_path
from .c_packed_arows import k_offsets, offsets_setup, row_pointer, row_pointers, rows_setup
from .c_packed_rows import few_rows_path
from .c_packed_parts import (P, Groups, decode, k_positions, micro_kernel, packed_slot, run_loop, step, tile_copy,
                             tile_loops)
from .names import CNames
from .typing import Typing

#: Flops of a packed product below which it runs on one thread: its parallel region has a barrier
#: per k block, so a second thread that is asleep, or descheduled by another process's spinning
#: pool, stalls the whole product.  Measured on 2 cores (AVX-512 EPYC, benchmark harness with
#: pauses between calls): 128^3 (4.2 Mflop) took 535 us on 2 threads against 33 us on one.
PACKED_MIN_FLOPS = 1 << 23

#: Panels of the n-side factor packed together, k by k (see `packed_helper`).
PACK_GROUP_PANELS = 16


def packable_types(plan: PackPlan, program: Program, typing: Typing) -> bool:
    """The packed code multiplies and accumulates in the target's float type: only when both factors
    evaluate in that type (no mixed precision, no integers)."""
    st = program.statement(plan.statement)
    t = typing.tensors[st.target.tensor]
    if not t.is_float:
        return False
    return all(typing.operand_types(Binary("*", m, n), t) == (t, t) for m, n in plan.contraction.terms)


def _store_products(kk: str, width: int, at: str, values: Sequence[str]) -> str:
    """One C statement storing each product's value (`values`, one per product of the sum) for k
    position `kk` at element `at` of a packed panel `width` wide (`packed_slot`); a block for
    several, so it can be a loop's body."""
    stores = " ".join(f"{P}dst[{packed_slot(kk, t, len(values))} * {width} + {at}] = {v};" for t, v in enumerate(values))
    return stores if len(values) == 1 else f"{{ {stores} }}"


def _panel_stride(terms: int) -> str:
    """Values per row or lane of a packed panel per k position of the block: `kb` times `terms`."""
    return f"{P}kb" if terms == 1 else f"{P}kb * {terms}"


def _condition_c(params_set: str, name: Callable[[str], str]) -> str:
    """An isl set of parameters (sizes, batch iterators, ...) as a C condition on those names
    (`name` spells an isl id in C)."""
    where = isl.Set(params_set)
    build = isl.AstBuild.from_context(isl.Set.universe(where.get_space()))
    return strip_parens(c_text(lexpr(build.expr_from_set(where)), name))


def target_rows_direct(st, c) -> bool:
    """Whether whole micro-tiles can be updated in the target itself: one m and one n loop and
    `target_rows`, so a tile row is `nr` consecutive elements and rows lie `ldc` apart."""
    return len(c.n) == 1 and target_rows(st, c)


def _masked_tile(c, nr: int, target, ukr: str, inside: str, terms: int = 1) -> List[str]:
    """Micro-tile of a region (not the whole box): only elements inside it are loaded and stored;
    a tile with none is skipped.  The other lanes compute on in-bounds reads and are dropped.
    `target` is the target element's C text."""

    def load(q):
        return f"if ({inside}) {{ {P}tile[{P}r * {nr} + {q}] = {target}; {P}any = 1; }}"

    def store(q):
        return f"if ({inside}) {target} = {P}tile[{P}r * {nr} + {q}];"

    return [
        f"          memset({P}tile, 0, sizeof({P}tile));",
        f"          int {P}any = 0;",
        "          {",
        *tile_copy(c, f"{P}h", f"{P}w", load),
        "          }",
        f"          if ({P}any) {{",
        f"          {ukr}({P}kb, {P}Ap + {P}ir * {_panel_stride(terms)}, {P}Bp + {P}jr * {_panel_stride(terms)}, "
        f"{P}tile, {nr});",
        *tile_copy(c, f"{P}h", f"{P}w", store),
        "          }",
    ]


def _whole_or_edge_tile(c, mr: int, nr: int, target, ukr: str, direct: bool, first: str = "",
                        a_rows: Optional[Tuple[str, str, str]] = None, terms: int = 1) -> List[str]:
    """Micro-tile of the whole box.  Whole tiles: with `direct` (`target_rows_direct`) the
    micro-kernel updates the target in place, rows `ldc` apart; else they go through the tile
    buffer with constant trip counts.  Edge tiles copy only their valid part (the rest of the
    buffer is zero).  `a_rows` (how, "rows" or "offsets", the C type and the m-side factor's text):
    whole m panels are read from the factor itself when `pc_ain` says so (`c_packed_arows`)."""

    def call(c_arg: str, ld: str, indent: str) -> List[str]:
        stride = _panel_stride(terms)
        packed = f"{ukr}({first}{P}kb, {P}Ap + {P}ir * {stride}, {P}Bp + {P}jr * {stride}, {c_arg}, {ld});"
        if a_rows is None:
            return [indent + packed]
        how, ctype, m_factor = a_rows
        if how == "offsets":
            read = [*row_pointers(c, ctype, m_factor, mr, indent + "  "),
                    f"{indent}  {ukr}_aoff({first}{P}kb, {P}arows, {P}akoff, {P}Bp + {P}jr * {P}kb, {c_arg}, {ld});"]
        else:
            read = [*row_pointer(c, ctype, m_factor, indent + "  "),
                    f"{indent}  {ukr}_ain({first}{P}kb, {P}arow, {P}lda, {P}Bp + {P}jr * {P}kb, {c_arg}, {ld});"]
        return [f"{indent}if ({P}ain && {P}h == {mr}) {{", *read, f"{indent}}} else {{", f"{indent}  {packed}",
                f"{indent}}}"]

    def load(q):
        return f"{P}tile[{P}r * {nr} + {q}] = {target};"

    def store(q):
        return f"{target} = {P}tile[{P}r * {nr} + {q}];"

    edge = [f"            memset({P}tile, 0, sizeof({P}tile));",
            "            {", *tile_copy(c, f"{P}h", f"{P}w", load), "            }",
            *call(f"{P}tile", str(nr), "            "),
            "            {", *tile_copy(c, f"{P}h", f"{P}w", store), "            }"]
    if direct:
        return [f"          if ({P}h == {mr} && {P}w == {nr}) {{",
                *decode(c.m, f"{P}ic + {P}ir", "            "),
                *decode(c.n, f"{P}jc + {P}jr", "            "),
                *call(f"&{target}", f"{P}ldc", "            "),
                "          } else {",
                *edge,
                "          }"]
    return [
        f"          const int {P}whole = {P}h == {mr} && {P}w == {nr};",
        f"          if ({P}whole) {{",
        *tile_copy(c, f"{mr}", f"{nr}", load),
        "          } else {",
        f"            memset({P}tile, 0, sizeof({P}tile));",
        *tile_copy(c, f"{P}h", f"{P}w", load),
        "          }",
        *call(f"{P}tile", str(nr), "          "),
        f"          if ({P}whole) {{",
        *tile_copy(c, f"{mr}", f"{nr}", store),
        "          } else {",
        *tile_copy(c, f"{P}h", f"{P}w", store),
        "          }",
    ]


def _read_along(c, loop: str) -> bool:
    """Whether the n-side factor's elements are consecutive in memory along `loop` (its arrays'
    last subscript moves with it: `B[k, j]` along j, `B[j, k]` along k, a convolution's
    `X[n, c, h + kh, w + kw]` along both kw and w); False where it reads no array."""
    accesses = [a for _, n_factor in c.terms for a in n_factor.walk() if isinstance(a, Access) and a.indices]
    return bool(accesses) and all(a.indices[-1].coeff(loop) != 0 for a in accesses)


def _pack_n_side(g: Groups, nr: int, ctype: str, n_factors: Sequence[str], omp_for: List[str], along_n: bool,
                 along_k: bool = False) -> List[str]:
    """Lines packing the n-side factor's (n block, k block) into `Bp[panel][k][lane]`, zero past
    the edge, in the order its memory runs: panel by panel, k inside (runs along k), or, for a
    factor laid out along n, groups of up to `PACK_GROUP_PANELS` panels read k by k, so each row
    is read in runs of `PACK_GROUP_PANELS * nr` elements instead of one cache line per row
    (M = 6, K = N = 4096 f32: 22 -> 13 ms; the panel order on `B[j, k]`: 23 ms, the grouped one 75).

    A factor laid out along both (`along_k` too: a convolution's weight gradient reads
    `X[n, c, h + kh, w + kw]` with kw a lane loop and w a k loop) is read along whichever of the
    last n and last k loop is longer at run time: lane by lane, k inside, where the k runs are
    longer (3 x 3 filters: runs of the image width instead of runs of 3).

    `n_factors`: the C text of each product's n-side factor (one for a plain contraction), packed
    side by side at each k position (`packed_slot`)."""
    if not along_n:
        return _pack_n_side_panels(g, nr, ctype, n_factors, omp_for)
    grouped = _pack_n_side_grouped(g, nr, ctype, n_factors, omp_for)
    if not along_k:
        return grouped
    return [f"    if ({P}e_{g.n[-1]} >= {P}e_{g.k[-1]}) {{", *grouped, "    } else {",
            *_pack_n_side_lanes(g, nr, ctype, n_factors, omp_for), "    }"]


def _one_panel(ctype: str, nr: int, indent: str, terms: int) -> List[str]:
    return [f"{indent}{ctype} *restrict {P}dst = {P}Bp + {P}jp * {_panel_stride(terms)};",
            f"{indent}const int64_t {P}w = {P}nb - {P}jp < {nr} ? {P}nb - {P}jp : {nr};"]


def _copy_row(g: Groups, nr: int, n_factors: Sequence[str], indent: str) -> List[str]:
    """One k position of a panel: its lanes along the n loops, zeros past the edge."""
    zeros = ["0"] * len(n_factors)
    return [*run_loop(g.n, f"{P}jc + {P}jp", f"{P}w", f"{P}q",
                      lambda q: _store_products(f"{P}kk", nr, q, n_factors), indent),
            f"{indent}for (int64_t {P}q = {P}w; {P}q < {nr}; {P}q++) {_store_products(f'{P}kk', nr, f'{P}q', zeros)}"]


def _pack_n_side_panels(g: Groups, nr: int, ctype: str, n_factors: Sequence[str], omp_for: List[str]) -> List[str]:
    """Panel by panel, k by k inside (a factor laid out along k, `B[j, k]`)."""
    return ["    /* pack the n-side factor: Bp[panel][k][lane], zero past the edge */",
            *omp_for,
            f"    for (int64_t {P}jp = 0; {P}jp < {P}nb; {P}jp += {nr}) {{",
            *_one_panel(ctype, nr, "      ", len(n_factors)),
            *k_positions(g.k, f"{P}pc", f"{P}kb", f"{P}kk", _copy_row(g, nr, n_factors, "          "), "      "),
            "    }"]


def _pack_n_side_lanes(g: Groups, nr: int, ctype: str, n_factors: Sequence[str], omp_for: List[str]) -> List[str]:
    """Panel by panel, lane by lane inside, each lane's k positions in runs along the last k loop."""
    terms = len(n_factors)
    return ["    /* pack the n-side factor: Bp[panel][k][lane], zero past the edge; each lane read along k */",
            *omp_for,
            f"    for (int64_t {P}jp = 0; {P}jp < {P}nb; {P}jp += {nr}) {{",
            *_one_panel(ctype, nr, "      ", terms),
            *decode(g.n, f"{P}jc + {P}jp", "      "),
            f"      for (int64_t {P}q = 0; {P}q < {P}w; {P}q++) {{",
            *run_loop(g.k, f"{P}pc", f"{P}kb", f"{P}kk",
                      lambda kk: _store_products(f"({kk})", nr, f"{P}q", n_factors), "        "),
            f"        {step(g.n)}",
            "      }",
            f"      for (int64_t {P}q = {P}w; {P}q < {nr}; {P}q++)",
            f"        for (int64_t {P}kk = 0; {P}kk < {_panel_stride(terms)}; {P}kk++) {P}dst[{P}kk * {nr} + {P}q] = 0;",
            "    }"]


def _pack_n_side_grouped(g: Groups, nr: int, ctype: str, n_factors: Sequence[str], omp_for: List[str]) -> List[str]:
    """Groups of up to `PACK_GROUP_PANELS` panels read k by k (a factor laid out along n); shared
    by the threads (`omp_for`), a block is split into a group per thread first.  Unshared (one
    thread, or the few-rows path, where each thread packs its own lanes), groups are whole."""
    group = PACK_GROUP_PANELS * nr
    size = ([f"    int64_t {P}grp = ({P}nb + {P}threads - 1) / {P}threads;",
             f"    {P}grp = {P}grp > {group} ? {group} : ({P}grp + {nr - 1}) / {nr} * {nr};"] if omp_for
            else [f"    const int64_t {P}grp = {group};"])
    return ["    /* pack the n-side factor: Bp[panel][k][lane], zero past the edge; groups of panels",
            "       read k by k, along the factor's rows */",
            *size,
            *omp_for,
            f"    for (int64_t {P}jg = 0; {P}jg < {P}nb; {P}jg += {P}grp) {{",
            f"      const int64_t {P}gend = {P}nb - {P}jg < {P}grp ? {P}nb : {P}jg + {P}grp;",
            *k_positions(g.k, f"{P}pc", f"{P}kb", f"{P}kk", [
                f"          for (int64_t {P}jp = {P}jg; {P}jp < {P}gend; {P}jp += {nr}) {{",
                *_one_panel(ctype, nr, "            ", len(n_factors)),
                *_copy_row(g, nr, n_factors, "            "),
                "          }"], "      "),
            "    }"]


def _pack_m_side(g: Groups, mr: int, ctype: str, m_factors: Sequence[str], a_rows: Optional[str] = None,
                 kc: int = 0) -> List[str]:
    """The loop packing the m panels `ip` of the block (`ic`, `mb`) into `Ap + ip * kb`:
    Ap[panel][k][row], zero past the edge.  A whole panel copies its `mr` rows with a literal trip
    count, which the compiler unrolls: with the count of rows left as a variable, a compare and
    branch per element made the packing a third of a product with 64 columns (1024x1024x64).
    `a_rows` ("rows" or "offsets"): whole panels are not packed when `pc_ain` (the micro-kernel
    reads the factor itself); with "offsets" the block's k offsets follow (`c_packed_arows`).
    `m_factors`: each product's m-side factor, packed side by side at each k position (`packed_slot`)."""
    terms = len(m_factors)
    m_factor = m_factors[0]

    def copy(rows: str) -> List[str]:
        return run_loop(g.m, f"{P}ic + {P}ip", rows, f"{P}r",
                        lambda r: _store_products(f"{P}kk", mr, r, m_factors), "            ")
    return [f"      for (int64_t {P}ip = 0; {P}ip < {P}mb; {P}ip += {mr}) {{",
            f"        {ctype} *restrict {P}dst = {P}Ap + {P}ip * {_panel_stride(terms)};",
            f"        const int64_t {P}h = {P}mb - {P}ip < {mr} ? {P}mb - {P}ip : {mr};",
            f"        if ({P}h == {mr}{f' && !{P}ain' if a_rows else ''})",
            *k_positions(g.k, f"{P}pc", f"{P}kb", f"{P}kk", copy(str(mr)), "        "),
            f"        else if ({P}h < {mr})",
            *k_positions(g.k, f"{P}pc", f"{P}kb", f"{P}kk", [
                *copy(f"{P}h"),
                f"            for (int64_t {P}r = {P}h; {P}r < {mr}; {P}r++) "
                f"{_store_products(f'{P}kk', mr, f'{P}r', ['0'] * terms)}"],
                "        "),
            "      }",
            *(k_offsets(g, ctype, m_factor, kc, "      ") if a_rows == "offsets" else [])]


def _box_extents(plan: PackPlan, loops, printer: CExprPrinter) -> List[str]:
    """The lowest value `pc_lo_x` and the extent `pc_e_x` of every loop of the contraction's box
    (`loops`: their C names, in the order m, n, k)."""
    c = plan.contraction
    out = []
    for user_x, x in zip(c.m + c.n + c.k, loops):
        lo, hi = plan.bound(user_x)
        out.append(f"  const int64_t {P}lo_{x} = {printer.affine(lo)}, {P}e_{x} = {printer.affine(hi)} - {P}lo_{x} + 1;")
    return out


def _empty(loops) -> str:
    return " || ".join(f"{P}e_{x} <= 0" for x in loops)


def packed_helper(plan: PackPlan, program: Program, typing: Typing, symbol: str, params: List[str],
                  prologue: List[str], parallel: bool,
                  access_text, names: CNames, zero_init: bool = False) -> str:
    """The C function `symbol(params..., batch iterators...)` running the packed contraction.

    Each group of loops (m, n, k) runs as one linear index from 0; the loops' own values are
    decoded from it where a block or panel starts and then advanced one position at a time.
    `zero_init` (`c_packed_init`): the target starts from zero, and the helper writes the zeros
    itself: the first k block stores its tiles without loading them, and where the helper does
    not run the blocks it zeroes the target box before returning."""
    c = plan.contraction
    st = program.statement(plan.statement)
    dtype = typing.tensors[st.target.tensor]
    ctype = dtype.c_name
    vbytes = plan.vector_bytes   # the target's SIMD width, chosen when the schedule was packed
    lanes = max(1, vbytes // (dtype.bits // 8))
    mr, nv, kc = plan.mr, plan.nv, plan.kc
    nr = nv * lanes
    mc = max(mr, plan.mc // mr * mr)
    nc = max(nr, plan.nc // nr * nr)
    iterators = c.m + c.n + c.k + tuple(c.batch)
    printer = CExprPrinter(typing, {x: names.index(x) for x in iterators}, access_text, names)
    by_isl = {isl_name(x): names.index(x) for x in iterators}

    def name(isl_id: str) -> str:
        return by_isl[isl_id] if isl_id in by_isl else names.id(isl_id)

    m_factors = tuple(printer.expr(m, dtype) for m, _ in c.terms)
    n_factors = tuple(printer.expr(n, dtype) for _, n in c.terms)
    m_factor, terms = m_factors[0], len(c.terms)
    target = printer.access(st.target)
    ukr = f"{symbol}_ukr"
    batch = [f"int64_t {names.index(b)}" for b in c.batch]
    g = Groups(*(tuple(names.index(x) for x in group) for group in (c.m, c.n, c.k)))
    loops = g.m + g.n + g.k

    def size(group) -> str:
        return " * ".join(f"{P}e_{x}" for x in group)

    zero = zero_box(g, target, "    ") if zero_init else []
    first = f"{P}pc == 0, " if zero_init else ""
    lines = [micro_kernel(ukr, ctype, lanes, mr, nv, vbytes, zero_start=zero_init, terms=terms), ""]
    in_place = not plan.mask and reads_in_place(st, c)
    a_rows = None if plan.mask else "rows" if reads_rows_in_place(c) else "offsets" if reads_at_offsets(c, kc) else None
    if a_rows == "rows":
        lines += [micro_kernel(f"{ukr}_ain", ctype, lanes, mr, nv, vbytes, zero_start=zero_init, a_rows=True), ""]
    elif a_rows == "offsets":
        lines += [micro_kernel(f"{ukr}_aoff", ctype, lanes, mr, nv, vbytes, zero_start=zero_init, a_offsets=True), ""]
    if in_place:
        lines += [micro_kernel(f"{ukr}_in", ctype, lanes, mr, nv, vbytes, in_place=True, zero_start=zero_init), ""]
        if nv > 1:
            lines += [micro_kernel(f"{ukr}_half", ctype, lanes, mr, 1, vbytes, zero_start=zero_init), "",
                      micro_kernel(f"{ukr}_half_in", ctype, lanes, mr, 1, vbytes, in_place=True, zero_start=zero_init), ""]
    lines.append(f"static int {symbol}({', '.join(params + batch)}) {{")
    lines += ["  " + line for line in prologue]
    nonempty = _condition_c(plan.nonempty, name)
    if zero_init:
        # The box's bounds first: where the contraction has nothing to do, its target is zeroed.
        lines += _box_extents(plan, loops, printer)
        lines += [f"  if (!({nonempty}) || {_empty(loops)}) {{", *zero, "    return 1;", "  }"]
    else:
        lines.append(f"  if (!({nonempty})) return 1;")
        lines += _box_extents(plan, loops, printer)
        lines.append(f"  if ({_empty(loops)}) return 1;")
    lines += [
        f"  const int64_t {P}M = {size(g.m)}, {P}N = {size(g.n)}, {P}K = {size(g.k)};",
        f"  int {P}threads = 1;",
    ]
    if a_rows:
        lines += rows_setup(g, ctype, m_factor) if a_rows == "rows" else offsets_setup()
    direct = not plan.mask and target_rows_direct(st, c)
    if direct or in_place:
        # Elements between two target rows (the address moves by `ldc` with the m loop).
        (m,) = g.m
        lines += [f"  int64_t {P}ldc;",
                  f"  {{ int64_t {m} = {P}lo_{m}; const int64_t {', '.join(f'{x} = {P}lo_{x}' for x in g.n)};",
                  f"    const {ctype} *{P}row = &{target}; {m}++; {P}ldc = (int64_t)(&{target} - {P}row); }}"]
    if parallel:
        # Too little work to pay for waking the thread pool: one thread (`PACKED_MIN_FLOPS`).
        lines += ["#ifdef _OPENMP", f"  {P}threads = omp_get_max_threads();",
                  f"  if (2.0 * (double){P}M * (double){P}N * (double){P}K < {float(PACKED_MIN_FLOPS)!r}) {P}threads = 1;",
                  "#endif"]
    if in_place:
        lines += inplace_path(g, ctype=ctype, mr=mr, nr=nr, lanes=lanes, ukr=ukr, ukr_in=f"{ukr}_in",
                              ukr_half=f"{ukr}_half" if nv > 1 else None, target=target,
                              factor=printer.access(c.n_factor), m_factor=m_factor,
                              parallel=parallel, first=first, on_fail=zero)
    tile = (_masked_tile(g, nr, target, ukr, _condition_c(plan.mask, name), terms) if plan.mask
            else _whole_or_edge_tile(g, mr, nr, target, ukr, direct, first, (a_rows, ctype, m_factor) if a_rows else None,
                                     terms))
    pack_m = _pack_m_side(g, mr, ctype, m_factors, a_rows, kc)
    lines += few_rows_path(ctype=ctype, mr=mr, nr=nr, mc=mc, kc=kc, terms=terms, pack_m=pack_m,
                           pack_n=_pack_n_side(g, nr, ctype=ctype, n_factors=n_factors, omp_for=[],
                                               along_n=_read_along(c, c.n[-1]), along_k=_read_along(c, c.k[-1])),
                           tile=tile, parallel=parallel, on_fail=zero)
    lines += [
        f"  const int64_t {P}nmax = {P}N < {nc} ? ({P}N + {nr - 1}) / {nr} * {nr} : {nc};",
        f"  const int64_t {P}kmax = {P}K < {kc} ? {P}K : {kc};",
        f"  int64_t {P}mc = {mc};",
        # Threads share the m-blocks: make their number a multiple of the thread count and their
        # sizes even, so no thread idles through the last round (768 rows in blocks of 256 on 2
        # threads ran at 75%; 288 rows as 256 + 32 left one thread 8 rows in 9 of the work).
        f"  if ({P}threads > 1) {{",
        f"    const int64_t {P}blocks = (({P}M + {P}mc - 1) / {P}mc + {P}threads - 1) / {P}threads * {P}threads;",
        f"    {P}mc = (({P}M + {P}blocks - 1) / {P}blocks + {mr - 1}) / {mr} * {mr};",
        "  }",
        f"  const size_t {P}asize = (size_t)((({P}mc + {mr - 1}) / {mr} * {mr} * {P}kmax * {terms} * sizeof({ctype}) + 63) / 64 * 64);",
        f"  {ctype} *{P}Bp = aligned_alloc(64, (size_t)(({P}nmax * {P}kmax * {terms} * sizeof({ctype}) + 63) / 64 * 64));",
        f"  {ctype} *{P}Aall = aligned_alloc(64, {P}asize * (size_t){P}threads);",
        f"  if (!{P}Bp || !{P}Aall) {{",
        f"    free({P}Bp); free({P}Aall);", *zero, "    return 0;",
        "  }",
    ]
    if parallel:
        lines.append(f"  #pragma omp parallel num_threads({P}threads) if({P}threads > 1)")
    lines.append("  {")
    tid = "0"
    if parallel:
        lines += ["#ifdef _OPENMP", f"    const int {P}tid = omp_get_thread_num();", "#else",
                  f"    const int {P}tid = 0;", "#endif"]
        tid = f"{P}tid"
    omp_for = ["    #pragma omp for schedule(static)"] if parallel else []
    lines += [
        f"    {ctype} *restrict {P}Ap = (void *)((char *){P}Aall + {P}asize * (size_t){tid});",
        f"    {ctype} {P}tile[{mr * nr}] __attribute__((aligned(64)));",
        f"    for (int64_t {P}jc = 0; {P}jc < {P}N; {P}jc += {nc}) {{",
        f"    const int64_t {P}nb = {P}N - {P}jc < {nc} ? {P}N - {P}jc : {nc};",
        f"    for (int64_t {P}pc = 0; {P}pc < {P}K; {P}pc += {P}kmax) {{",
        f"    const int64_t {P}kb = {P}K - {P}pc < {P}kmax ? {P}K - {P}pc : {P}kmax;",
        *_pack_n_side(g, nr, ctype=ctype, n_factors=n_factors, omp_for=omp_for, along_n=_read_along(c, c.n[-1]), along_k=_read_along(c, c.k[-1])),
        *omp_for,
        f"    for (int64_t {P}ic = 0; {P}ic < {P}M; {P}ic += {P}mc) {{",
        f"      const int64_t {P}mb = {P}M - {P}ic < {P}mc ? {P}M - {P}ic : {P}mc;",
        "      /* pack the m-side factor: Ap[panel][k][row], zero past the edge */",
        *pack_m,
        *tile_loops(mr, nr, tile, "      "),
        "    }",
        "    }",
        "    }",
        "  }",
        f"  free({P}Bp);",
        f"  free({P}Aall);",
        "  return 1;",
        "}",
    ]
    return "\n".join(lines)
