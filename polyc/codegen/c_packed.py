"""C for a packed contraction (`Schedule.pack`): BLIS-style blocking, packing and a micro-kernel.

The generated helper runs the statement `T += P1 * P2` over its box (bounds from the plan) in the
order the schedule proved legal:

    n_block (nc) -> k_block (kc) -> pack the n-side factor of the block into `Bp`
      -> m_block (mc) -> pack the m-side factor into `Ap`
        -> n_panel (nr) -> m_panel (mr) -> micro-kernel: load the mr x nr target tile,
           for each k: tile[r][:] += Ap[k][r] * Bp[k][:]   (nv vectors per row, in registers)
           store the tile

Factors are packed through their own expressions (any affine layout, scalars folded as written);
panels are padded with zeros to whole micro-tiles, and edge tiles load and store only their valid
part.  With OpenMP and a `parallel` mark on the m_block loop, the threads share the packed `Bp`
(packed cooperatively) and each packs its own `Ap`.  The helper returns 0 when it cannot allocate
its buffers; the caller then runs the plain loops of the same schedule.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import islpy as isl

from ..ir import Access, Affine, Program
from ..schedule.packing import PackPlan, vector_bytes
from .cexpr import CExprPrinter
from .loop_ast import c_text, lexpr, strip_parens
from .typing import Typing

#: Statement iterators and sizes never collide with these local names (they carry the prefix).
_P = "polyc_"


def packable_types(plan: PackPlan, program: Program, typing: Typing) -> bool:
    """The packed code multiplies and accumulates in the target's float type: only when both factors
    evaluate in that type (no mixed precision, no integers)."""
    st = program.statement(plan.statement)
    t = typing.tensors[st.target.tensor]
    if not t.is_float:
        return False
    a, b = typing.operand_types(st.value, t)
    return a == t and b == t


def _condition_c(params_set: str) -> str:
    """An isl set of parameters (sizes, batch iterators, ...) as a C condition on those names."""
    where = isl.Set(params_set)
    build = isl.AstBuild.from_context(isl.Set.universe(where.get_space()))
    return strip_parens(c_text(lexpr(build.expr_from_set(where))))


def _affine_c(a: Affine, printer: CExprPrinter) -> str:
    return printer.affine(a)


def micro_kernel(name: str, ctype: str, lanes: int, mr: int, nv: int, vbytes: int) -> str:
    """An mr x (nv * lanes) register tile: `c[r][:] += a[k][r] * b[k][:]` for k < kb (GCC vectors)."""
    nr = nv * lanes
    vt = f"{name}_v"
    acc = [[f"c{r}_{v}" for v in range(nv)] for r in range(mr)]
    lines = [f"typedef {ctype} {vt} __attribute__((vector_size({vbytes})));",
             f"static inline void {name}(int64_t kb, const {ctype} *restrict a, const {ctype} *restrict b, "
             f"{ctype} *restrict c) {{"]
    for r in range(mr):
        for v in range(nv):
            lines.append(f"  {vt} {acc[r][v]}; memcpy(&{acc[r][v]}, c + {r * nr + v * lanes}, sizeof({vt}));")
    lines.append("  for (int64_t k = 0; k < kb; k++) {")
    for v in range(nv):
        lines.append(f"    {vt} b{v}; memcpy(&b{v}, b + k * {nr} + {v * lanes}, sizeof({vt}));")
    for r in range(mr):
        lines.append(f"    {{ const {ctype} a{r} = a[k * {mr} + {r}];")
        for v in range(nv):
            lines.append(f"      {acc[r][v]} += a{r} * b{v};")
        lines.append("    }")
    lines.append("  }")
    for r in range(mr):
        for v in range(nv):
            lines.append(f"  memcpy(c + {r * nr + v * lanes}, &{acc[r][v]}, sizeof({vt}));")
    lines.append("}")
    return "\n".join(lines)


def packed_helper(plan: PackPlan, program: Program, typing: Typing, symbol: str, params: List[str],
                  prologue: List[str], parallel: bool,
                  access_text) -> str:
    """The C function `symbol(params..., batch iterators...)` running the packed contraction."""
    c = plan.contraction
    st = program.statement(plan.statement)
    dtype = typing.tensors[st.target.tensor]
    ctype = dtype.c_name
    vbytes = vector_bytes()
    lanes = max(1, vbytes // (dtype.bits // 8))
    mr, nv, kc = plan.mr, plan.nv, plan.kc
    nr = nv * lanes
    mc = max(mr, plan.mc // mr * mr)
    nc = max(nr, plan.nc // nr * nr)
    printer = CExprPrinter(typing, {}, access_text)
    m, n, k = c.m, c.n, c.k
    (m_lo, m_hi), (n_lo, n_hi), (k_lo, k_hi) = plan.bound(m), plan.bound(n), plan.bound(k)
    m_factor = printer.expr(c.m_factor, dtype)
    n_factor = printer.expr(c.n_factor, dtype)
    target = printer.access(st.target)
    ukr = f"{symbol}_ukr"
    batch = [f"int64_t {b}" for b in c.batch]
    P = _P
    lines = [micro_kernel(ukr, ctype, lanes, mr, nv, vbytes), "",
             f"static int {symbol}({', '.join(params + batch)}) {{"]
    lines += ["  " + line for line in prologue]
    lines += [
        f"  if (!({_condition_c(plan.nonempty)})) return 1;",
        f"  const int64_t {P}m0 = {_affine_c(m_lo, printer)}, {P}m1 = {_affine_c(m_hi, printer)} + 1;",
        f"  const int64_t {P}n0 = {_affine_c(n_lo, printer)}, {P}n1 = {_affine_c(n_hi, printer)} + 1;",
        f"  const int64_t {P}k0 = {_affine_c(k_lo, printer)}, {P}k1 = {_affine_c(k_hi, printer)} + 1;",
        f"  if ({P}m1 <= {P}m0 || {P}n1 <= {P}n0 || {P}k1 <= {P}k0) return 1;",
        f"  int {P}threads = 1;",
    ]
    if parallel:
        lines += ["#ifdef _OPENMP", f"  {P}threads = omp_get_max_threads();", "#endif"]
    lines += [
        f"  const int64_t {P}nmax = {P}n1 - {P}n0 < {nc} ? ({P}n1 - {P}n0 + {nr - 1}) / {nr} * {nr} : {nc};",
        f"  const int64_t {P}kmax = {P}k1 - {P}k0 < {kc} ? {P}k1 - {P}k0 : {kc};",
        f"  int64_t {P}mc = {mc};",
        f"  if ({P}threads > 1 && ({P}m1 - {P}m0 + {P}mc - 1) / {P}mc < {P}threads)",
        f"    {P}mc = (({P}m1 - {P}m0 + {P}threads - 1) / {P}threads + {mr - 1}) / {mr} * {mr};",
        f"  const size_t {P}asize = (size_t)(({P}mc * {P}kmax * sizeof({ctype}) + 63) / 64 * 64);",
        f"  {ctype} *{P}Bp = aligned_alloc(64, (size_t)(({P}nmax * {P}kmax * sizeof({ctype}) + 63) / 64 * 64));",
        f"  {ctype} *{P}Aall = aligned_alloc(64, {P}asize * (size_t){P}threads);",
        f"  if (!{P}Bp || !{P}Aall) {{ free({P}Bp); free({P}Aall); return 0; }}",
    ]
    if parallel:
        lines.append(f"  #pragma omp parallel num_threads({P}threads)")
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
        f"    for (int64_t {P}jc = {P}n0; {P}jc < {P}n1; {P}jc += {nc}) {{",
        f"    const int64_t {P}nb = {P}n1 - {P}jc < {nc} ? {P}n1 - {P}jc : {nc};",
        f"    for (int64_t {P}pc = {P}k0; {P}pc < {P}k1; {P}pc += {kc}) {{",
        f"    const int64_t {P}kb = {P}k1 - {P}pc < {kc} ? {P}k1 - {P}pc : {kc};",
        "    /* pack the n-side factor: Bp[panel][k][lane], zero past the edge */",
        *omp_for,
        f"    for (int64_t {P}jp = 0; {P}jp < {P}nb; {P}jp += {nr}) {{",
        f"      {ctype} *restrict {P}dst = {P}Bp + {P}jp * {P}kb;",
        f"      const int64_t {P}w = {P}nb - {P}jp < {nr} ? {P}nb - {P}jp : {nr};",
        f"      for (int64_t {P}kk = 0; {P}kk < {P}kb; {P}kk++) {{",
        f"        const int64_t {k} = {P}pc + {P}kk;",
        f"        for (int64_t {P}q = 0; {P}q < {P}w; {P}q++) {{ const int64_t {n} = {P}jc + {P}jp + {P}q; "
        f"{P}dst[{P}kk * {nr} + {P}q] = {n_factor}; }}",
        f"        for (int64_t {P}q = {P}w; {P}q < {nr}; {P}q++) {P}dst[{P}kk * {nr} + {P}q] = 0;",
        "      }",
        "    }",
        *omp_for,
        f"    for (int64_t {P}ic = {P}m0; {P}ic < {P}m1; {P}ic += {P}mc) {{",
        f"      const int64_t {P}mb = {P}m1 - {P}ic < {P}mc ? {P}m1 - {P}ic : {P}mc;",
        "      /* pack the m-side factor: Ap[panel][k][row], zero past the edge */",
        f"      for (int64_t {P}ip = 0; {P}ip < {P}mb; {P}ip += {mr}) {{",
        f"        {ctype} *restrict {P}dst = {P}Ap + {P}ip * {P}kb;",
        f"        const int64_t {P}h = {P}mb - {P}ip < {mr} ? {P}mb - {P}ip : {mr};",
        f"        for (int64_t {P}kk = 0; {P}kk < {P}kb; {P}kk++) {{",
        f"          const int64_t {k} = {P}pc + {P}kk;",
        f"          for (int64_t {P}r = 0; {P}r < {P}h; {P}r++) {{ const int64_t {m} = {P}ic + {P}ip + {P}r; "
        f"{P}dst[{P}kk * {mr} + {P}r] = {m_factor}; }}",
        f"          for (int64_t {P}r = {P}h; {P}r < {mr}; {P}r++) {P}dst[{P}kk * {mr} + {P}r] = 0;",
        "        }",
        "      }",
        f"      for (int64_t {P}jr = 0; {P}jr < {P}nb; {P}jr += {nr}) {{",
        f"        const int64_t {P}w = {P}nb - {P}jr < {nr} ? {P}nb - {P}jr : {nr};",
        f"        for (int64_t {P}ir = 0; {P}ir < {P}mb; {P}ir += {mr}) {{",
        f"          const int64_t {P}h = {P}mb - {P}ir < {mr} ? {P}mb - {P}ir : {mr};",
        *(_masked_tile(P, m, n, nr, target, ukr, _condition_c(plan.mask)) if plan.mask else [
            f"          if ({P}h == {mr} && {P}w == {nr}) {{  /* a whole tile: constant trip counts */",
            *_tile_copy(P, m, n, f"{mr}", f"{nr}", nr, f"{P}tile[{P}r * {nr} + {P}q] = {target};"),
            "          } else {",
            f"            memset({P}tile, 0, sizeof({P}tile));",
            *_tile_copy(P, m, n, f"{P}h", f"{P}w", nr, f"{P}tile[{P}r * {nr} + {P}q] = {target};"),
            "          }",
            f"          {ukr}({P}kb, {P}Ap + {P}ir * {P}kb, {P}Bp + {P}jr * {P}kb, {P}tile);",
            f"          if ({P}h == {mr} && {P}w == {nr}) {{",
            *_tile_copy(P, m, n, f"{mr}", f"{nr}", nr, f"{target} = {P}tile[{P}r * {nr} + {P}q];"),
            "          } else {",
            *_tile_copy(P, m, n, f"{P}h", f"{P}w", nr, f"{target} = {P}tile[{P}r * {nr} + {P}q];"),
            "          }"]),
        "        }",
        "      }",
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


def _tile_copy(P: str, m: str, n: str, rows: str, cols: str, nr: int, assignment: str) -> List[str]:
    """Loops copying between the target and the tile buffer over `rows` x `cols` elements."""
    return [f"            for (int64_t {P}r = 0; {P}r < {rows}; {P}r++) {{",
            f"              const int64_t {m} = {P}ic + {P}ir + {P}r;",
            f"              for (int64_t {P}q = 0; {P}q < {cols}; {P}q++) {{",
            f"                const int64_t {n} = {P}jc + {P}jr + {P}q;",
            f"                {assignment}",
            "              }",
            "            }"]


def _masked_tile(P: str, m: str, n: str, nr: int, target: str, ukr: str, inside: str) -> List[str]:
    """Micro-tile of a region (not the whole box): only elements inside it are loaded and stored;
    a tile with none is skipped.  The other lanes compute on in-bounds reads and are dropped."""
    return [
        f"          memset({P}tile, 0, sizeof({P}tile));",
        f"          int {P}any = 0;",
        *_tile_copy(P, m, n, f"{P}h", f"{P}w", nr,
                    f"if ({inside}) {{ {P}tile[{P}r * {nr} + {P}q] = {target}; {P}any = 1; }}"),
        f"          if ({P}any) {{",
        f"          {ukr}({P}kb, {P}Ap + {P}ir * {P}kb, {P}Bp + {P}jr * {P}kb, {P}tile);",
        *_tile_copy(P, m, n, f"{P}h", f"{P}w", nr, f"if ({inside}) {target} = {P}tile[{P}r * {nr} + {P}q];"),
        "          }",
    ]


def batch_arguments(plan: PackPlan, call_args: Dict[str, str]) -> Optional[List[str]]:
    """C expressions of the batch iterators at the call site (from the statement's call in the
    loops isl generated), or None when one of them moves inside the packed loops."""
    return [call_args[b] for b in plan.contraction.batch] if all(b in call_args for b in plan.contraction.batch) \
        else None
