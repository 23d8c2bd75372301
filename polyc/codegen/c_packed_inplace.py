"""Packed contractions whose n-side factor is read in place: direct convolution.

A convolution `Y[n, f, h, w] += X[n, c, h + kh, w + kw] * K[f, c, kh, kw]` packed as a matrix
product copies its n-side factor into panels one k position at a time: an implicit im2col that
writes `KH * KW` copies of every input element (conv2d 64x56x56 with 3x3 weights: 6.7 MB of
panels per call, for an 800 KB input).  Yet the input's rows are already the lanes the
micro-kernel wants: along the last n loop (`w`) consecutive outputs read consecutive inputs.  So,
as in oneDNN's and TVM's direct convolutions, this variant

- packs the m-side factor (the weights) once, whole: `Apf[panel][k][row]`;
- reads the n-side factor where it lies: for one run of the last n loop (an output row) the
  element for k position `k` and lane `q` is at `base + koff[k] + q`, because an affine
  subscript's address is the sum of a part in the n loops and a part in the k loops (`koff`
  holds the k part, computed once);
- runs the rows of the output in parallel, and within a row, k block by k block, each m panel
  against every whole lane panel of the row (its weights stay in L1, the input rows in L2);
- reads a row's tail of exactly one vector in place too (a one-vector-wide register tile: 56
  outputs a row are three panels of 16 and one of 8); other tails (the row's length is rarely a
  multiple of the lanes) are copied into a panel through `koff`, and partial m panels go through
  a tile buffer, as the packed code does.  Before, every tail went through both buffers, its
  indices divided out per k position: 20% of conv2d 64x56x56's time.

The order of every target element's updates is the packed code's (k increasing, the target
loaded before and stored after each k block), so the result is the same bit for bit and the
legality proof of `Schedule.pack` covers it.  `reads_in_place` says when it applies: the n-side
factor is one array access whose subscripts slide along some k loop and some n loop together
(the im2col signature; a plain matrix product keeps its packed panels, which stream better).
"""
from __future__ import annotations

from typing import List, Optional, Sequence

from .c_packed_parts import P, Groups, decode, run_loop

#: Lane panels whose rows stay in L1 against one m panel: the k block of the in-place variant.
INPLACE_KC = 256


def _copy_tail(lanes: int, nr: int, indent: str) -> List[str]:
    """One k position of the packed tail panel (`bn` lanes: `lanes` or `nr`), `wl` read from `src`,
    zeros after them."""
    def copy(width: int) -> str:
        return (f"for (int64_t {P}q = 0; {P}q < {width}; {P}q++) "
                f"{P}Bt[{P}kk * {width} + {P}q] = {P}q < {P}wl ? {P}src[{P}q] : 0;")
    if lanes == nr:
        return [indent + copy(nr)]
    return [f"{indent}if ({P}bn == {lanes}) {copy(lanes)}", f"{indent}else {copy(nr)}"]


def inplace_path(g: Groups, *, ctype: str, mr: int, nr: int, lanes: int, ukr: str, ukr_in: str,
                 ukr_half: Optional[str], target: str, factor: str, m_factor: str,
                 parallel: bool, first: str = "", on_fail: Sequence[str] = ()) -> List[str]:
    """Lines of the helper (after the sizes `pc_M, pc_N, pc_K, pc_threads` are known) that run the
    contraction with the n-side factor read in place and return 1; they fall through to the
    packed code when a row is shorter than one lane panel (nothing to read in place) and return
    0 when they cannot allocate their buffers.  `factor` is the n-side factor's element (an
    lvalue), `target` the target's; `ukr_half`, when given, is the register tile one vector
    (`lanes` elements) wide that runs short row tails (`ukr_half` + "_in" reads them in place).
    `first`: the micro-kernels' leading argument saying the k block is the first
    (`c_packed_init`), "" without; `on_fail`: lines run before returning 0."""
    (m,) = g.m
    last = g.n[-1]
    kc = INPLACE_KC
    at_lo = [f"{x} = {P}lo_{x}" for x in g.n]
    par = [f"  #pragma omp parallel num_threads({P}threads) if({P}threads > 1)"] if parallel else []
    omp_for = ["    #pragma omp for schedule(static)"] if parallel else []

    def target_tile() -> List[str]:
        """`ct`: the target's element at the tile's corner; its rows lie `ldc` apart and each
        row's lanes are consecutive (`target_rows`)."""
        return [*decode(g.m, f"{P}ic + {P}ir", "            "),
                *decode(g.n, f"{P}jc + {P}jr", "            "),
                f"            {ctype} *{P}ct = &{target};"]

    def buffered_tile(call: str, cols: str) -> List[str]:
        """A partial tile (`h` rows of `cols` lanes) through the buffer.  `cols` is the literal
        `nr` for whole lane panels, so the copies are fixed-length vector moves."""
        def copy(dst: str, src: str) -> str:
            return (f"            for (int64_t {P}r = 0; {P}r < {P}h; {P}r++) for (int64_t {P}q = 0; {P}q < {cols}; {P}q++) "
                    f"{dst} = {src};")
        tile, ct = f"{P}tile[{P}r * {nr} + {P}q]", f"{P}ct[{P}r * {P}ldc + {P}q]"
        return ["            {", *target_tile(),
                f"            memset({P}tile, 0, sizeof({P}tile));",
                copy(tile, ct), f"            {call};", copy(ct, tile), "            }"]

    buffered_tail = buffered_tile(f"if ({P}bn == {nr}) {ukr}({first}{P}kb, {P}ap, {P}Bt, {P}tile, {nr}); "
                                  f"else {ukr_half}({first}{P}kb, {P}ap, {P}Bt, {P}tile, {nr})" if ukr_half
                                  else f"{ukr}({first}{P}kb, {P}ap, {P}Bt, {P}tile, {nr})", f"{P}wl")
    # A tail of exactly one vector (W = 56 in panels of 16 lanes) is read in place too, and a
    # whole m panel over it is stored into the target's rows, as whole panels are.
    packed_tail = f"{P}wl && {P}wl != {lanes}" if ukr_half else f"{P}wl"
    half_in = f"{ukr_half}_in({first}{P}kb, {P}ap, {P}brow + {P}jr, {P}koff + {P}pc, "
    tail = ([f"            if ({P}wl == {lanes} && {P}h == {mr}) {{", *target_tile(),
             f"            {half_in}{P}ct, {P}ldc);",
             f"            }} else if ({P}wl == {lanes})",
             *buffered_tile(f"{half_in}{P}tile, {nr})", str(lanes)),
             "            else", *buffered_tail] if ukr_half else buffered_tail)
    return [
        f"  if ({P}e_{last} >= {nr}) {{",
        "  /* the n-side factor read in place (c_packed_inplace): rows of the last n loop as lanes */",
        f"  const int64_t {P}rows = {P}N / {P}e_{last};",
        f"  {ctype} *{P}Apf = aligned_alloc(64, (size_t)((({P}M + {mr - 1}) / {mr} * {mr} * {P}K * sizeof({ctype}) + 63) / 64 * 64));",
        f"  int64_t *{P}koff = malloc((size_t){P}K * sizeof(int64_t));",
        f"  if (!{P}Apf || !{P}koff) {{",
        f"    free({P}Apf); free({P}koff);", *on_fail, "    return 0;",
        "  }",
        "  {",
        f"    int64_t {', '.join(at_lo)};",
        f"    const {ctype} *{P}b0;",
        "    {", *decode(g.k, "0", "      "), f"      {P}b0 = &{factor}; }}",
        f"    for (int64_t {P}kk = 0; {P}kk < {P}K; {P}kk++) {{",
        *decode(g.k, f"{P}kk", "      "),
        f"      {P}koff[{P}kk] = (int64_t)(&{factor} - {P}b0);",
        "    }",
        "  }",
        *par,
        "  {",
        "    /* the whole m-side factor: Apf[panel][k][row], zero past the edge */",
        *omp_for,
        f"    for (int64_t {P}ip = 0; {P}ip < {P}M; {P}ip += {mr}) {{",
        f"      {ctype} *restrict {P}dst = {P}Apf + {P}ip * {P}K;",
        f"      const int64_t {P}h = {P}M - {P}ip < {mr} ? {P}M - {P}ip : {mr};",
        f"      for (int64_t {P}kk = 0; {P}kk < {P}K; {P}kk++) {{",
        *decode(g.k, f"{P}kk", "        "),
        *run_loop(g.m, f"{P}ip", f"{P}h", f"{P}r", lambda r: f"{P}dst[{P}kk * {mr} + {r}] = {m_factor};", "        "),
        f"        for (int64_t {P}r = {P}h; {P}r < {mr}; {P}r++) {P}dst[{P}kk * {mr} + {P}r] = 0;",
        "      }",
        "    }",
        f"    {ctype} {P}tile[{mr * nr}] __attribute__((aligned(64)));",
        f"    {ctype} {P}Bt[{kc * nr}] __attribute__((aligned(64)));",
        f"    const int64_t {P}ic = 0;",
        *omp_for,
        f"    for (int64_t {P}row = 0; {P}row < {P}rows; {P}row++) {{",
        f"      const int64_t {P}jc = {P}row * {P}e_{last};",
        f"      const {ctype} *{P}brow;",
        "      {", *decode(g.n, f"{P}jc", "        "), *decode(g.k, "0", "        "),
        f"        {P}brow = &{factor}; }}",
        f"      const int64_t {P}wt = {P}e_{last} / {nr} * {nr}, {P}wl = {P}e_{last} - {P}wt;",
        # A tail of at most one vector runs on a one-vector-wide register tile (54 outputs a row
        # in panels of 16 lanes: 64 lanes computed with full panels only, 56 with the half one).
        f"      const int64_t {P}bn = {P}wl <= {lanes if ukr_half else 0} ? {lanes} : {nr};",
        f"      for (int64_t {P}pc = 0; {P}pc < {P}K; {P}pc += {kc}) {{",
        f"        const int64_t {P}kb = {P}K - {P}pc < {kc} ? {P}K - {P}pc : {kc};",
        f"        if ({packed_tail}) {{  /* the row's last, partial lane panel, packed */",
        f"          for (int64_t {P}kk = 0; {P}kk < {P}kb; {P}kk++) {{",
        f"            const {ctype} *{P}src = {P}brow + {P}koff[{P}pc + {P}kk] + {P}wt;",
        # Fixed trip counts and a conditional read (a masked load), so gcc does not make the
        # copy of a few elements a call to memcpy per k position (7% of conv2d 64x54x54).
        *_copy_tail(lanes, nr, "            "),
        "          }",
        "        }",
        f"        for (int64_t {P}ir = 0; {P}ir < {P}M; {P}ir += {mr}) {{",
        f"          const int64_t {P}h = {P}M - {P}ir < {mr} ? {P}M - {P}ir : {mr};",
        f"          const {ctype} *{P}ap = {P}Apf + {P}ir * {P}K + {P}pc * {mr};",
        f"          for (int64_t {P}jr = 0; {P}jr < {P}wt; {P}jr += {nr}) {{",
        f"            if ({P}h == {mr}) {{",
        *target_tile(), f"            {ukr_in}({first}{P}kb, {P}ap, {P}brow + {P}jr, {P}koff + {P}pc, {P}ct, {P}ldc);",
        "            } else {",
        *buffered_tile(f"{ukr_in}({first}{P}kb, {P}ap, {P}brow + {P}jr, {P}koff + {P}pc, {P}tile, {nr})", str(nr)),
        "            }",
        "          }",
        f"          if ({P}wl) {{",
        f"            const int64_t {P}jr = {P}wt;",
        *tail,
        "          }",
        "        }",
        "      }",
        "    }",
        "  }",
        f"  free({P}Apf);",
        f"  free({P}koff);",
        "  return 1;",
        "  }",
    ]
