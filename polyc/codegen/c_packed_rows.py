"""Packed contractions with few rows: each group of lane panels packed just before its use.

The packed code (`c_packed.packed_helper`) packs a whole block of the n-side factor, `kc` by `nc`
(256 x 8192), and then runs every m block against it: the packing pays when several m blocks
reuse the block.  With few rows (M <= mc, one m block: `C[64, 4096] += A[64, 4096] B[4096, 4096]`,
an attention head's `Q Kᵀ` against a long sequence, a batch of 64 through a wide layer) nothing
reuses it: the block, 4 MB written and read back through L3 per k block, cost a third of the time
(64 x 4096 x 4096 f32 on one thread: 0.59x OpenBLAS).  This path instead

- packs the m-side factor once per k block, for all rows, shared by the threads;
- gives each thread an equal run of lane panels, in groups of at most `ROW_GROUP_PANELS`: the
  thread packs a group into a buffer of its own (at most 128 KB, in L2: the factor's rows are
  still read in runs of the group's width) and runs every m panel against each of its panels
  while the panel is in L1.

Each target element is updated in the packed code's order (k increasing, one k block at a time,
loaded before and stored after each block), so the result is the same bit for bit and
`Schedule.pack`'s proof covers it.
"""
from __future__ import annotations

from typing import List, Sequence

from .c_packed_parts import P, tile_loops

#: Lane panels packed and run together by one thread in the few-rows path.
ROW_GROUP_PANELS = 8


def few_rows_path(*, ctype: str, mr: int, nr: int, mc: int, kc: int, terms: int = 1, pack_m: Sequence[str],
                  pack_n: Sequence[str], tile: Sequence[str], parallel: bool,
                  on_fail: Sequence[str] = ()) -> List[str]:
    """Lines of the helper (after the sizes `pc_M, pc_N, pc_K, pc_threads` are known) that run the
    contraction when its rows fit one m block (`pc_M <= mc`) and return 1, or return 0 when they
    cannot allocate their buffers (after `on_fail`).  `pack_m`: lines packing the m panels
    `ip` of the block (`ic`, `mb`) into `Ap + ip * kb`; `pack_n`: lines packing the lane panels of
    `[jc, jc + nb)` into `Bp` (no work sharing inside); `tile`: lines running the micro-tile
    (`ir`, `jr`, `h`, `w`) against `Ap + ir * kb` and `Bp + jr * kb` (times `terms`, the products
    of a sum packed side by side)."""
    group = ROW_GROUP_PANELS * nr
    par = [f"    #pragma omp parallel num_threads({P}threads) if({P}threads > 1)"] if parallel else []
    omp_for = ["      #pragma omp for schedule(static)"] if parallel else []
    tid = ["#ifdef _OPENMP", f"      const int {P}tid = omp_get_thread_num(), {P}nt = omp_get_num_threads();", "#else",
           f"      const int {P}tid = 0, {P}nt = 1;", "#endif"] if parallel else [f"      const int {P}tid = 0, {P}nt = 1;"]
    barrier = ["      #pragma omp barrier"] if parallel else []
    return [
        f"  if ({P}M <= {mc}) {{",
        "    /* few rows (c_packed_rows): lane panels packed group by group, just before their use */",
        f"    const int64_t {P}kmax = {P}K < {kc} ? {P}K : {kc};",
        f"    const size_t {P}bsize = (size_t)(({group} * {P}kmax * {terms} * sizeof({ctype}) + 63) / 64 * 64);",
        f"    {ctype} *{P}Ap = aligned_alloc(64, (size_t)((({P}M + {mr - 1}) / {mr} * {mr} * {P}kmax * {terms} * sizeof({ctype}) + 63) / 64 * 64));",
        f"    {ctype} *{P}Ball = aligned_alloc(64, {P}bsize * (size_t){P}threads);",
        f"    if (!{P}Ap || !{P}Ball) {{",
        f"      free({P}Ap); free({P}Ball);", *["  " + line for line in on_fail], "      return 0;",
        "    }",
        *par,
        "    {",
        *tid,
        f"      {ctype} *restrict {P}Bp = (void *)((char *){P}Ball + {P}bsize * (size_t){P}tid);",
        f"      {ctype} {P}tile[{mr * nr}] __attribute__((aligned(64)));",
        f"      const int64_t {P}ic = 0, {P}mb = {P}M;",
        f"      for (int64_t {P}pc = 0; {P}pc < {P}K; {P}pc += {P}kmax) {{",
        f"      const int64_t {P}kb = {P}K - {P}pc < {P}kmax ? {P}K - {P}pc : {P}kmax;",
        "      /* the m-side factor, all rows: Ap[panel][k][row] (the loop's end waits for it) */",
        *omp_for,
        *pack_m,
        # Each thread takes an equal run of lane panels (to one panel), in groups of at most
        # ROW_GROUP_PANELS: a work-shared loop over fixed groups left one of two threads a
        # third of the work (288 lanes: groups of 128, 128 and 32).
        f"      {{ const int64_t {P}panels = ({P}N + {nr - 1}) / {nr}, {P}per = ({P}panels + {P}nt - 1) / {P}nt;",
        f"        const int64_t {P}ng = {P}per > {ROW_GROUP_PANELS} ? ({P}per + {ROW_GROUP_PANELS - 1}) / {ROW_GROUP_PANELS} : 1;",
        f"        const int64_t {P}gw = ({P}per + {P}ng - 1) / {P}ng * {nr};",
        f"        const int64_t {P}end = ({P}tid + 1) * {P}per * {nr} < {P}N ? ({P}tid + 1) * {P}per * {nr} : {P}N;",
        f"      for (int64_t {P}jc = {P}tid * {P}per * {nr}; {P}jc < {P}end; {P}jc += {P}gw) {{",
        f"        const int64_t {P}nb = {P}end - {P}jc < {P}gw ? {P}end - {P}jc : {P}gw;",
        *pack_n,
        *tile_loops(mr, nr, list(tile), "        "),
        "      }",
        "      }",
        *barrier,   # the next k block packs Ap over what the others still read
        "      }",
        "    }",
        f"    free({P}Ap);",
        f"    free({P}Ball);",
        "    return 1;",
        "  }",
    ]
