"""A shared-memory, register-tiled CUDA kernel for matmul-like contractions.

Recognised: a statement `C[b?, i, j] += f(A[.. i, k ..], B[.. k, j ..])` over a rectangular domain
(isl proves it: the domain equals the box of its per-iterator bounds), where `A` does not depend on
`j`, `B` not on `i`, neither is `C`, and the value reads nothing else (scalars are fine).  An
immediately preceding `C[b?, i, j] = <constant>` (what `+=!` produces) is fused as the
accumulator's start value.

Each block computes a BM x BN tile of C with 256 threads, each thread a TM x TN register tile;
K advances in steps of BK: the A and B tiles are staged in shared memory (A transposed, rows
padded to keep 16-byte alignment and spread banks) between two barriers.  Every element accumulates its k terms in source
order, from the start value (or C's old value), so results equal the serial loop bit for bit.

The kernel is expressed in the GPU program's intermediate form (regions, barriers, shared and
per-thread arrays), so the CPU emulator runs exactly the code nvcc compiles.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Optional

import islpy as isl

from ..ir import Access, Affine, Const, IndexExpr, Program, Statement
from ..poly.islutil import affine_str, isl_budget, isl_name, pw_aff_to_affine
from ..schedule.schedule import Schedule
from .cexpr import CExprPrinter, literal
from .cuda_ir import (Barrier, GPUKernel, GPUProgram, HostSeq, Launch, Mapped, Raw, Region, ULoop, USeq,
                      build_gpu_program)
from .loop_ast import LExpr, Loop
from .names import CNames
from .typing import Typing

BM, BN, BK, TM, TN = 128, 128, 16, 8, 8
THREADS = (BM // TM) * (BN // TN)          # 256


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


class _Match:
    """The roles of a recognised contraction statement."""

    def __init__(self, st: Statement, init: Optional[Statement], i: str, j: str, k: str,
                 batch: Optional[str], a: Access, b: Access, extents: Dict[str, Affine]):
        self.st, self.init, self.i, self.j, self.k, self.batch = st, init, i, j, k, batch
        self.a, self.b, self.extents = a, b, extents


def _box_extents(schedule: Schedule, st: Statement) -> Optional[Dict[str, Affine]]:
    """Per iterator, the extent E of `0 <= it < E` when the domain is exactly that box."""
    model = schedule.model
    dom = model.domains[st.name]
    extents: Dict[str, Affine] = {}
    with isl_budget(f"checking whether {st.name} is a rectangular contraction"):
        parts = []
        for d, it in enumerate(st.iterators):
            lo = pw_aff_to_affine(dom.dim_min(d), model.context)
            hi = pw_aff_to_affine(dom.dim_max(d), model.context)
            if lo is None or hi is None or lo.variables or lo.constant != 0 or set(hi.variables) & set(st.iterators):
                return None
            extents[it] = hi + 1
            parts.append(f"0 <= {isl_name(it)} <= {affine_str(hi)}")
        box = isl.Set(f"{model.pstr} -> {{ {isl_name(st.name)}[{', '.join(isl_name(i) for i in st.iterators)}] : "
                      f"{' and '.join(parts) or 'true'} }}")
        if not dom.intersect_params(model.context).is_equal(box.intersect_params(model.context)):
            return None
    return extents


def match_contraction(schedule: Schedule, name: str) -> Optional[_Match]:
    """The contraction roles of statement `name`, or None when it is not one we tile."""
    program = schedule.model.program
    st = program.statement(name)
    if st.update != "+" or len(st.target.indices) < 2:
        return None
    tvars = [e.as_single_var() for e in st.target.indices]
    if any(v is None or e.coeff(v) != 1 or e.constant for v, e in zip(tvars, st.target.indices)):
        return None
    if len(set(tvars)) != len(tvars) or len(tvars) > 3:
        return None
    red = [v for v in st.iterators if v not in tvars]
    if len(red) != 1 or any(isinstance(e, IndexExpr) for e in st.value.walk()):
        return None
    i, j, k = tvars[-2], tvars[-1], red[0]
    batch = tvars[0] if len(tvars) == 3 else None
    reads = list(st.value.accesses())
    if len(reads) != 2 or any(r.tensor == st.target.tensor for r in reads):
        return None

    def uses(acc: Access) -> set:
        return {v for e in acc.indices for v in e.variables if v in st.iterators}

    a, b = reads
    if j in uses(a):
        a, b = b, a
    ua, ub = uses(a), uses(b)
    if not ({i, k} <= ua <= {i, k, batch} and {k, j} <= ub <= {k, j, batch}):
        return None
    written = {s.target.tensor for s in program.statements}
    if a.tensor in written or b.tensor in written:
        return None
    extents = _box_extents(schedule, st)
    if extents is None:
        return None
    return _Match(st, None, i, j, k, batch, a, b, extents)


def _fusable_init(schedule: Schedule, program: Program, m: _Match) -> Optional[Statement]:
    """`C[b?, i, j] = const` right before the contraction, over the same (b, i, j) box."""
    idx = [s.name for s in program.statements].index(m.st.name)
    if idx == 0:
        return None
    init = program.statements[idx - 1]
    if init.update is not None or not isinstance(init.value, Const) or init.target != m.st.target:
        return None
    if set(init.iterators) != set(m.st.iterators) - {m.k}:
        return None
    return init if _box_extents(schedule, init) == {v: e for v, e in m.extents.items() if v != m.k} else None


def contraction_kernel(m: _Match, program: Program, typing: Typing, symbol: str) -> GPUKernel:
    """The tiled kernel for a matched contraction (see the module docstring)."""
    dt = typing.tensors[m.st.target.tensor]
    ct = dt.c_name
    ext = m.extents
    from .cuda import flat_index

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
    target = access(m.st.target, {m.i: row, m.j: col, **bvar})
    value_printer = CExprPrinter(typing, {}, lambda a, p: "pc_af[pc_m]" if a == m.a else "pc_bf[pc_n]", names)
    value = value_printer.expr(m.st.value, dt)
    zero = literal(0, dt)
    ty_tx = [f"const int pc_tcol = (int)$tid % {BN // TN};", f"const int pc_trow = (int)$tid / {BN // TN};"]
    # A thread owns rows ty*4 + {0..3} and BM/2 + ty*4 + {0..3} (same for columns): runs of four
    # consecutive, 16-byte aligned shared-memory words, which nvcc reads with vector loads.
    rm = f"(pc_trow * {TM // 2} + (pc_m % {TM // 2}) + (pc_m / {TM // 2}) * {BM // 2})"
    cn = f"(pc_tcol * {TN // 2} + (pc_n % {TN // 2}) + (pc_n / {TN // 2}) * {BN // 2})"
    if m.init is not None:
        start = [f"pc_acc[pc_m][pc_n] = {CExprPrinter(typing, {}, None, names).expr(m.init.value, dt)};"]
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
                     statements=(m.st.name,) + ((m.init.name,) if m.init else ()),
                     shared=(("pc_As", ct, (BK, BM + 4)), ("pc_Bs", ct, (BK, BN))),
                     private=(("pc_acc", ct, (TM, TN)),), fixed_block=True,
                     min_blocks=2)   # <= 128 registers: two blocks per SM hide latency (measured on H100)


def fits_device(elem_bytes: int, target) -> bool:
    """Whether the tiled contraction kernel for `elem_bytes`-byte elements fits within `target`'s
    per-block limits (a `polyc.Target`, None: current GPUs): shared memory for the A and B tiles,
    threads per block, and registers (a TM x TN accumulator tile, TM + TN operands and some
    addressing per thread; doubles take two 32-bit registers)."""
    if target is None:
        return True
    shared = (BK * (BM + 4) + BK * BN) * elem_bytes
    words = max(1, elem_bytes // 4)
    registers = THREADS * ((TM * TN + TM + TN) * words + 32)
    return (shared <= target.shared_memory_bytes and THREADS <= target.max_threads_per_block
            and registers <= target.registers_per_block)


def contraction_program(schedule: Schedule, typing: Typing, target=None):
    """The GPU program with tiled contraction kernels, or None when nothing matches.

    Applies to unmapped source-order schedules: each contraction statement that is its own
    top-level nest (and its fused `= const` initialisation) is replaced by the tiled kernel; the
    other statements keep the automatic mapping.  A contraction whose kernel would not fit the
    `target`'s per-block limits (`fits_device`) keeps the automatic mapping too.
    """
    if schedule.history:
        return None
    program = schedule.model.program
    matches: Dict[str, _Match] = {}
    for st in program.statements:
        m = match_contraction(schedule, st.name)
        if m is not None and not fits_device(typing.tensors[m.st.target.tensor].bits // 8, target):
            continue
        if m is not None:
            m.init = _fusable_init(schedule, program, m)
            matches[st.name] = m
    if not matches:
        return None
    from ..schedule.gpu import default_gpu_mapping
    from .c import c_symbol, kernel_signature
    from .cuda import print_program
    mapped = default_gpu_mapping(schedule, row_fusion=False)
    symbol = c_symbol(program.name)
    gpu = build_gpu_program(mapped, symbol)
    host = HostSeq((gpu.host,)) if isinstance(gpu.host, Launch) else gpu.host
    if not isinstance(host, HostSeq) or not all(isinstance(c, Launch) for c in host.children):
        return None
    fused = {m.init.name for m in matches.values() if m.init is not None}
    kernels: List[GPUKernel] = []
    order: List[Launch] = []
    replaced = False
    for launch in host.children:
        k = gpu.kernels[launch.kernel]
        stmts = set(k.statements)
        if len(stmts) == 1 and next(iter(stmts)) in matches:
            k = contraction_kernel(matches[next(iter(stmts))], program, typing, f"{symbol}_k{len(kernels)}")
            replaced = True
        elif stmts and stmts <= fused:
            continue
        else:
            k = replace(k, symbol=f"{symbol}_k{len(kernels)}")
        order.append(Launch(len(kernels)))
        kernels.append(k)
    if not replaced:
        return None
    # A fused initialisation is only dropped when its contraction kernel was emitted.
    emitted = {s for k in kernels for s in k.statements}
    if not fused <= emitted:
        return None
    prog = GPUProgram(HostSeq(tuple(order)), tuple(kernels))
    return print_program(program, typing, kernel_signature(program, typing), prog, mapped)
