"""Printing the tiled kernel of a contraction the CUDA scheduler planned (`GPUContractionPlan`).

The decision, and the roles of the statement (`C[b?, i, j] += f(A[.. i, k ..], B[.. k, j ..])`
over a box, see `polyc.poly.contraction.tiled_contraction`), come from the schedule
(`polyc.schedule.auto_gpu`); this module only writes the kernel and puts it in place of the
launch of that statement's loops (`with_tiled_contractions`).

Each block computes a BM x BN tile of C with 256 threads, each thread a TM x TN register tile;
K advances in steps of BK: the A and B tiles are staged in shared memory (A transposed, rows
padded to keep 16-byte alignment and spread banks) between two barriers.  Every element accumulates its k terms in source
order, from the start value (or C's old value), so results equal the serial loop bit for bit.

The kernel is expressed in the GPU program's intermediate form (regions, barriers, shared and
per-thread arrays), so the CPU emulator runs exactly the code nvcc compiles.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Mapping, Optional

from ..errors import PolycError
from ..ir import Access, Affine, Program
from ..poly.islutil import isl_name
from ..schedule.auto_gpu import GPUContractionPlan
from .cexpr import CExprPrinter, literal
from .cuda_ir import (Barrier, GPUKernel, GPUProgram, HNode, HostGuard, HostLoop, HostSeq, Launch, Mapped, Raw,
                      Region, ULoop, USeq, flat_index)
from .loop_ast import LExpr, Loop
from .names import CNames
from .typing import Typing


def _affine_lexpr(a: Affine) -> LExpr:
    """`a` (over sizes) as a loop-AST expression: its ids are isl names, as in isl's own AST."""
    out: Optional[LExpr] = None
    for v, c in a.terms:
        var = LExpr("id", value=isl_name(v))
        term = var if c == 1 else LExpr("*", (LExpr("int", value=c), var))
        out = term if out is None else LExpr("+", (out, term))
    if a.constant or out is None:
        k = LExpr("int", value=a.constant)
        out = k if out is None else LExpr("+", (out, k))
    return out


def _ceil_div(a: Affine, d: int) -> LExpr:
    return LExpr("floord", (LExpr("+", (_affine_lexpr(a), LExpr("int", value=d - 1))), LExpr("int", value=d)))


def contraction_kernel(plan: GPUContractionPlan, program: Program, typing: Typing, symbol: str) -> GPUKernel:
    """The tiled kernel of a planned contraction (see the module docstring)."""
    m = plan.contraction
    st = program.statement(m.statement)
    BM, BN, BK, TM, TN = plan.tile
    THREADS = plan.threads
    dt = typing.tensors[st.target.tensor]
    ct = dt.c_name
    ext = dict(m.extents)

    names = CNames.for_program(program)

    def access(acc: Access, index_text: Dict[str, str]) -> str:
        printer = CExprPrinter(typing, index_text, lambda a, p: f"{names.data(a.tensor)}[{flat_index(program, a, p)}]",
                               names)
        return printer.access(acc)

    sizes = CExprPrinter(typing, {}, lambda a, p: "", names)
    EI, EJ, EK = (sizes.affine(ext[v]) for v in (m.i, m.j, m.k))
    bvar = {m.batch: "pc_batch"} if m.batch else {}
    row, col = "(pc_i0 + pc_r)", "(pc_j0 + pc_c)"
    a_load = access(m.a, {m.i: "(pc_i0 + pc_r)", m.k: "(pc_k0 + pc_c)", **bvar})
    b_load = access(m.b, {m.k: "(pc_k0 + pc_r)", m.j: "(pc_j0 + pc_c)", **bvar})
    target = access(st.target, {m.i: row, m.j: col, **bvar})
    value_printer = CExprPrinter(typing, {}, lambda a, p: "pc_af[pc_m]" if a == m.a else "pc_bf[pc_n]", names)
    value = value_printer.expr(st.value, dt)
    zero = literal(0, dt)
    ty_tx = [f"const int pc_tcol = (int)$tid % {BN // TN};", f"const int pc_trow = (int)$tid / {BN // TN};"]
    # A thread owns rows ty*4 + {0..3} and BM/2 + ty*4 + {0..3} (same for columns): runs of four
    # consecutive, 16-byte aligned shared-memory words, which nvcc reads with vector loads.
    rm = f"(pc_trow * {TM // 2} + (pc_m % {TM // 2}) + (pc_m / {TM // 2}) * {BM // 2})"
    cn = f"(pc_tcol * {TN // 2} + (pc_n % {TN // 2}) + (pc_n / {TN // 2}) * {BN // 2})"
    if plan.init_value is not None:
        start = [f"pc_acc[pc_m][pc_n] = {CExprPrinter(typing, {}, None, names).expr(plan.init_value, dt)};"]
    else:
        start = [f"const int64_t pc_r = {rm};",
                 f"const int64_t pc_c = {cn};",
                 f"pc_acc[pc_m][pc_n] = ({row} < {EI} && {col} < {EJ}) ? {target} : {zero};"]
    init = Raw(tuple(ty_tx + [f"for (int pc_m = 0; pc_m < {TM}; pc_m++)",
                              f"  for (int pc_n = 0; pc_n < {TN}; pc_n++) {{"]
                     + ["    " + s for s in start] + ["  }"]))
    load = Raw((
        f"for (int pc_l = (int)$tid; pc_l < {BM * BK}; pc_l += {THREADS}) {{",
        f"  const int pc_r = pc_l / {BK}, pc_c = pc_l % {BK};",
        f"  pc_As[pc_c][pc_r] = (pc_i0 + pc_r < {EI} && pc_k0 + pc_c < {EK}) ? {a_load} : {zero};",
        "}",
        f"for (int pc_l = (int)$tid; pc_l < {BK * BN}; pc_l += {THREADS}) {{",
        f"  const int pc_r = pc_l / {BN}, pc_c = pc_l % {BN};",
        f"  pc_Bs[pc_r][pc_c] = (pc_k0 + pc_r < {EK} && pc_j0 + pc_c < {EJ}) ? {b_load} : {zero};",
        "}",
    ))
    step = [f"  {ct} pc_af[{TM}], pc_bf[{TN}];",
            "  #pragma unroll",
            f"  for (int pc_m = 0; pc_m < {TM}; pc_m++) pc_af[pc_m] = pc_As[pc_kk][{rm}];",
            "  #pragma unroll",
            f"  for (int pc_n = 0; pc_n < {TN}; pc_n++) pc_bf[pc_n] = pc_Bs[pc_kk][{cn}];",
            "  #pragma unroll",
            f"  for (int pc_m = 0; pc_m < {TM}; pc_m++)",
            "    #pragma unroll",
            f"    for (int pc_n = 0; pc_n < {TN}; pc_n++)",
            f"      pc_acc[pc_m][pc_n] += {value};"]
    # Full K tiles (all but maybe the last) run a constant trip count the compiler unrolls.
    compute = Raw(tuple(ty_tx + [f"if (pc_k0 + {BK} <= {EK}) {{", "#pragma unroll",
                                 f"for (int pc_kk = 0; pc_kk < {BK}; pc_kk++) {{"] + step + ["}", "} else {",
                                 f"for (int pc_kk = 0; pc_kk < {EK} - pc_k0; pc_kk++) {{"] + step + ["}", "}"]))
    store = Raw(tuple(ty_tx + [
        f"for (int pc_m = 0; pc_m < {TM}; pc_m++)",
        f"  for (int pc_n = 0; pc_n < {TN}; pc_n++) {{",
        f"    const int64_t pc_r = {rm};",
        f"    const int64_t pc_c = {cn};",
        f"    if ({row} < {EI} && {col} < {EJ}) {target} = pc_acc[pc_m][pc_n];",
        "  }",
    ]))
    k_loop = Loop("pc_k0", LExpr("int", value=0), LExpr("<", (LExpr("id", value="pc_k0"), _affine_lexpr(ext[m.k]))),
                  BK, None, None)  # type: ignore[arg-type]
    body = USeq((Region(init, False), ULoop(k_loop, USeq((Region(load, False), Barrier(), Region(compute, False))),
                                             sync=True), Region(store, False)))

    def grid_loop(var: str, tile: int, extent: Affine, axis: int, inner) -> Mapped:
        it = f"{var}_tile"
        lp = Loop(it, LExpr("int", value=0), LExpr("<", (LExpr("id", value=it), _ceil_div(extent, tile))), 1, None, None)  # type: ignore[arg-type]
        return Mapped("block", axis, lp, USeq((Raw((f"const int64_t {var} = {tile} * {it};",)), inner)))

    body = grid_loop("pc_j0", BN, ext[m.j], 0, body)
    body = grid_loop("pc_i0", BM, ext[m.i], 1, body)
    grid = [_ceil_div(ext[m.j], BN), _ceil_div(ext[m.i], BM), None]
    if m.batch:
        lp = Loop("pc_batch", LExpr("int", value=0), LExpr("<", (LExpr("id", value="pc_batch"), _affine_lexpr(ext[m.batch]))), 1, None, None)  # type: ignore[arg-type]
        body = Mapped("block", 2, lp, body)
        grid[2] = _affine_lexpr(ext[m.batch])
    return GPUKernel(symbol, body, (), tuple(grid), (LExpr("int", value=THREADS), None, None),  # type: ignore[arg-type]
                     statements=(st.name,) + ((plan.init,) if plan.init else ()),
                     shared=(("pc_As", ct, (BK, BM + 4)), ("pc_Bs", ct, (BK, BN))),
                     private=(("pc_acc", ct, (TM, TN)),), fixed_block=True,
                     min_blocks=2)   # <= 128 registers: two blocks per SM hide latency (measured on H100)


def with_tiled_contractions(gpu: GPUProgram, plans: Mapping[str, GPUContractionPlan], program: Program,
                            typing: Typing, symbol: str) -> GPUProgram:
    """`gpu` with the launch of each planned contraction's loops replaced by its tiled kernel and
    the launch of its fused `= const` statement dropped; kernels renumbered `<symbol>_k<n>`.

    The scheduler plans only contractions that are their own top-level nests, so each one's loops
    form one top-level kernel; anything else is a PolycError (the schedule and the program disagree)."""
    fused = {p.init for p in plans.values() if p.init is not None}
    kernels: List[GPUKernel] = []
    done: set = set()

    def launch(index: int) -> Optional[HNode]:
        k = gpu.kernels[index]
        stmts = set(k.statements)
        top = not k.host_iterators
        if top and len(stmts) == 1 and next(iter(stmts)) in plans:
            name = next(iter(stmts))
            k = contraction_kernel(plans[name], program, typing, f"{symbol}_k{len(kernels)}")
            done.add(name)
        elif top and stmts and stmts <= fused:
            return None
        else:
            k = replace(k, symbol=f"{symbol}_k{len(kernels)}")
        kernels.append(k)
        return Launch(len(kernels) - 1)

    def host(n: HNode) -> Optional[HNode]:
        if isinstance(n, Launch):
            return launch(n.kernel)
        if isinstance(n, HostSeq):
            kept = tuple(c for c in (host(ch) for ch in n.children) if c is not None)
            return HostSeq(kept)
        if isinstance(n, HostLoop):
            return replace(n, body=host(n.body) or HostSeq(()))
        if isinstance(n, HostGuard):
            orelse = host(n.orelse) if n.orelse is not None else None
            return replace(n, then=host(n.then) or HostSeq(()), orelse=orelse)
        raise TypeError(n)

    root = host(gpu.host) or HostSeq(())
    missing = set(plans) - done
    dropped_without_kernel = {p.init for p in plans.values() if p.init is not None and p.statement not in done}
    if missing or dropped_without_kernel:
        raise PolycError(f"the schedule plans tiled kernels for {', '.join(sorted(missing))}, but their loops do not "
                         f"form top-level kernels of their own; re-create the schedule with auto_gpu_schedule")
    return GPUProgram(root, tuple(kernels))
