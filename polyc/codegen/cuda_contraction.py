"""Printing the tiled kernel of a contraction the CUDA scheduler planned (`GPUContractionPlan`).

The decision, and the roles of the statement (an implicit matrix product
`C[b?, i.., j..] += f(A[.. i.., k.. ..], B[.. k.., j.. ..])` over a box, see
`polyc.poly.contraction.tiled_contraction`), come from the schedule (`polyc.schedule.auto_gpu`);
this module only writes the kernel and puts it in place of the launch of that statement's loops
(`with_tiled_contractions`).

Each block computes a BM x BN tile of C with 256 threads, each thread a TM x TN register tile.
K advances in steps of BK through two shared-memory buffers (A transposed, rows padded to keep
16-byte alignment and spread banks): while a step computes from one buffer, the next step's tiles
are already loading into registers, and land in the other buffer after the compute; one barrier
per step.  Where a block's tile is whole and the operands are 16-byte aligned along a unit-stride
loop, the loads are 16-byte vectors (checked at run time, uniformly per block); elsewhere each
element is read with its bounds checked.  A dimension of several loops (a convolution's columns
(n, h, w), its reduction (c, kh, kw)) is enumerated row-major: each thread decodes its rows and
columns once per tile and its one reduction index once per step.  Every element accumulates its
k terms in source order, from the start value (or C's old value), so results equal the serial
loop bit for bit.

The kernel is expressed in the GPU program's intermediate form (regions, barriers, shared and
per-thread arrays), so the CPU emulator runs exactly the code nvcc compiles.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Mapping, Optional, Tuple

from ..errors import PolycError
from ..ir import Access, Affine, Program
from ..poly.islutil import isl_name
from ..schedule.auto_gpu import GPUContractionPlan, k_step, threads_of
from .cexpr import CExprPrinter, assignment, literal
from .cuda_ir import (Barrier, GPUKernel, GPUProgram, HNode, HostGuard, HostLoop, HostSeq, Launch, Mapped, Raw,
                      Region, UGuard, ULoop, USeq, flat_index)
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


def _group_lexpr(group: Tuple[str, ...], ext: Mapping[str, Affine]) -> LExpr:
    """The product of the extents of `group`'s loops as a loop-AST expression."""
    out = _affine_lexpr(ext[group[0]])
    for v in group[1:]:
        out = LExpr("*", (out, _affine_lexpr(ext[v])))
    return out


def _ceil_div(group: Tuple[str, ...], ext: Mapping[str, Affine], d: int) -> LExpr:
    return LExpr("floord", (LExpr("+", (_group_lexpr(group, ext), LExpr("int", value=d - 1))), LExpr("int", value=d)))


#: Vector types of 16-byte loads by element type: (C type, lanes).
_VECTOR = {"f32": ("float4", 4), "f64": ("double2", 2), "i32": ("int4", 4), "i64": ("longlong2", 2)}


@dataclass(frozen=True)
class _Operand:
    """How one factor's K tile is staged.  The tile is `rows x BK` (A: rows are the i group) or
    `BK x rows` (B: the j group); `regs` holds the next tile while the current one is computed,
    `smem` is indexed `[buffer][k][row]`.  `vector` is the 16-byte fast path: (C vector type, lanes,
    the loop with unit stride the lanes run along), or None."""

    access: Access
    regs: str
    smem: str
    group: Tuple[str, ...]
    rows: int
    origin: str            # C text of the tile's first (linear) row: pc_i0 / pc_j0
    extent: str            # C text of the group's (linear) extent
    is_a: bool
    vector: Optional[Tuple[str, int, str]]

    @property
    def tag(self) -> str:
        return self.regs[-1]     # "a" / "b": suffix of the operand's per-thread arrays


def _unit_stride_iterator(acc: Access, candidates: Tuple[str, ...]) -> Optional[str]:
    """The candidate iterator whose step moves one element in memory (row-major layout): it has
    coefficient 1 in the access's last index and appears in no other index."""
    if not acc.indices:
        return None
    last = acc.indices[-1]
    for v in candidates:
        if last.coeff(v) == 1 and all(e.coeff(v) == 0 for e in acc.indices[:-1]):
            return v
    return None


def _product(texts: List[str]) -> str:
    return "(" + " * ".join(f"({t})" for t in texts) + ")"


def contraction_kernel(plan: GPUContractionPlan, program: Program, typing: Typing, symbol: str,
                       tile: Optional[Tuple[int, int, int, int, int]] = None) -> GPUKernel:
    """The tiled kernel of a planned contraction (see the module docstring), with the plan's tile
    or one of its `narrow` tiles."""
    m = plan.contraction
    st = program.statement(m.statement)
    dt = typing.tensors[st.target.tensor]
    ct = dt.c_name

    def own(acc: Access) -> str:
        """An operand is staged in its own type, the accumulator is the result's: `+=` converts
        after every step, as the C target's update does (an int64 C of double products, or
        uint8 products that wrap, computed in uint8 before they are added)."""
        return typing.tensors[acc.tensor].c_name
    at, bt = own(m.a), own(m.b)
    widest = max(typing.tensors[a.tensor].bits // 8 for a in (st.target, m.a, m.b))
    tile = tile or plan.tile
    BM, BN, _, TM, TN = tile
    BK = k_step(tile, widest)
    THREADS = threads_of(tile)
    ext = dict(m.extents)
    names = CNames.for_program(program)
    sizes = CExprPrinter(typing, {}, lambda a, p: "", names)
    bvar = {m.batch: "pc_batch"} if m.batch else {}

    def data(acc: Access) -> str:
        return names.data(acc.tensor)

    def access(acc: Access, index_text: Dict[str, str]) -> str:
        printer = CExprPrinter(typing, {**bvar, **index_text},
                               lambda a, p: f"{data(a)}[{flat_index(program, a, p)}]", names)
        return printer.access(acc)

    def offset(acc: Access, index_text: Dict[str, str]) -> str:
        """The flat element offset of `acc` at the given iterator values."""
        return flat_index(program, acc, CExprPrinter(typing, {**bvar, **index_text}, None, names))

    def extent(group: Tuple[str, ...]) -> str:
        return _product([sizes.affine(ext[v]) for v in group])

    def decode(group: Tuple[str, ...], linear: str) -> Dict[str, str]:
        """The loops of `group` at row-major position `linear` (C text)."""
        out: Dict[str, str] = {}
        inner: List[str] = []
        for n, v in enumerate(reversed(group)):
            below = f"({linear})" if not inner else f"(({linear}) / {_product(inner)})"
            out[v] = below if n == len(group) - 1 else f"({below} % ({sizes.affine(ext[v])}))"
            inner.append(sizes.affine(ext[v]))
        return out

    EI, EJ, EK = extent(m.i), extent(m.j), extent(m.k)
    grouped = m.grouped
    zero = literal(0, dt)
    row, col = "(pc_i0 + pc_r)", "(pc_j0 + pc_c)"
    target = access(st.target, {**decode(m.i, row), **decode(m.j, col)})
    value_printer = CExprPrinter(typing, {}, lambda a, p: "pc_af[pc_m]" if a == m.a else "pc_bf[pc_n]", names)
    value = value_printer.expr(st.value, dt)

    def vector_of(acc: Access, group: Tuple[str, ...], rows: int) -> Optional[Tuple[str, int, str]]:
        kind = _VECTOR.get(typing.tensors[acc.tensor].name)
        along = None if grouped else _unit_stride_iterator(acc, (m.k[0], group[0]))
        if kind is None or along is None:
            return None
        vtype, lanes = kind
        run = BK if along == m.k[0] else rows
        return (vtype, lanes, along) if run % lanes == 0 and (rows * BK // THREADS) % lanes == 0 else None

    ops = (_Operand(m.a, "pc_ra", "pc_As", m.i, BM, "pc_i0", EI, True, vector_of(m.a, m.i, BM)),
           _Operand(m.b, "pc_rb", "pc_Bs", m.j, BN, "pc_j0", EJ, False, vector_of(m.b, m.j, BN)))
    per_thread = {op.tag: op.rows * BK // THREADS for op in ops}
    lanes_of = {op.tag: op.vector[1] for op in ops if op.vector}

    def scalar_elements(op: _Operand):
        """(register index, local row, local k) of the element-wise mapping.  Plain dimensions:
        consecutive threads take consecutive elements along the operand's rows of memory.  Grouped:
        each thread keeps one local k (A: tid % BK, B: tid / (THREADS / BK)) for all its rows, so it
        decodes one reduction index per step."""
        spread = THREADS // BK
        for t in range(per_thread[op.tag]):
            l = f"((int)$tid + {THREADS * t})"
            if op.is_a:
                yield t, f"({l} / {BK})", f"({l} % {BK})"
            elif grouped:
                yield t, f"((int)$tid % {spread} + {spread * t})", f"((int)$tid / {spread})"
            else:
                yield t, f"({l} % {op.rows})", f"({l} / {op.rows})"

    def vector_elements(op: _Operand):
        """(first register index, local row, local k, lanes along "k" or "row") per 16-byte vector."""
        _, lanes, along = op.vector  # type: ignore[misc]
        run = BK if along == m.k[0] else op.rows
        for u in range(per_thread[op.tag] // lanes):
            q = f"((int)$tid + {THREADS * u})"
            major, minor = f"({q} / {run // lanes})", f"(({q} % {run // lanes}) * {lanes})"
            yield (u * lanes, major, minor, "k") if along == m.k[0] else (u * lanes, minor, major, "row")

    def load_scalar(op: _Operand, k0: str) -> List[str]:
        out = []
        if grouped:      # row offsets come from the tile's setup, the k offset is decoded once here
            _, _, kl = next(scalar_elements(op))
            kk = f"({k0} + {kl})"
            zero_rows = {v: "0" for v in op.group}
            koff = f"(({offset(op.access, {**zero_rows, **decode(m.k, kk)})}) - " \
                   f"({offset(op.access, {**zero_rows, **{v: '0' for v in m.k}})}))"
            out.append(f"const int64_t pc_k{op.tag} = {kk} < {EK} ? {koff} : 0;")
            for t, r, _ in scalar_elements(op):
                out.append(f"{op.regs}[{t}] = ({op.origin} + {r} < {op.extent} && {kk} < {EK}) ? "
                           f"{data(op.access)}[pc_o{op.tag}[{t}] + pc_k{op.tag}] : {zero};")
            return out
        for t, r, c in scalar_elements(op):
            rr, kk = f"({op.origin} + {r})", f"({k0} + {c})"
            src = access(op.access, {op.group[0]: rr, m.k[0]: kk})
            out.append(f"{op.regs}[{t}] = ({rr} < {op.extent} && {kk} < {EK}) ? {src} : {zero};")
        return out

    def row_offsets(op: _Operand) -> List[str]:
        """Grouped: each of the thread's rows decoded once per tile, as its offset at k = 0."""
        zero_k = {v: "0" for v in m.k}
        out = []
        for t, r, _ in scalar_elements(op):
            rr = f"({op.origin} + {r})"
            out.append(f"pc_o{op.tag}[{t}] = {rr} < {op.extent} ? "
                       f"{offset(op.access, {**decode(op.group, rr), **zero_k})} : 0;")
        return out

    def store(op: _Operand, buf: str, fast: bool) -> List[str]:
        out = []
        if fast:
            for t, r, c, along in vector_elements(op):
                for e in range(lanes_of[op.tag]):
                    rr, kk = (r, f"{c} + {e}") if along == "k" else (f"{r} + {e}", c)
                    out.append(f"{op.smem}[{buf}][{kk}][{rr}] = {op.regs}[{t + e}];")
        else:
            for t, r, c in scalar_elements(op):
                out.append(f"{op.smem}[{buf}][{c}][{r}] = {op.regs}[{t}];")
        return out

    def pointers(op: _Operand) -> List[str]:
        """Each thread's vector sources at K tile 0 (advanced a tile per step)."""
        return [f"pc_p{op.tag}[{u}] = {data(op.access)} + "
                f"{offset(op.access, {op.group[0]: f'({op.origin} + {r})', m.k[0]: c})};"
                for u, (_, r, c, _) in enumerate(vector_elements(op))]

    def load_vector(op: _Operand) -> List[str]:
        vtype, lanes, _ = op.vector  # type: ignore[misc]
        return [f"pc_vload{lanes}({vtype}, pc_p{op.tag}[{u}], "
                f"{', '.join(f'{op.regs}[{t + e}]' for e in range(lanes))});"
                for u, (t, _, _, _) in enumerate(vector_elements(op))]

    def step_of(op: _Operand) -> str:
        at = {op.group[0]: op.origin}
        return f"(({offset(op.access, {**at, m.k[0]: str(BK)})}) - ({offset(op.access, {**at, m.k[0]: '0'})}))"

    # The fast path (uniform per block): the block's tile lies inside C, and every vector operand's
    # tile corner is 16-byte aligned and its rows a whole number of vectors apart.
    vec_ops = [op for op in ops if op.vector]
    conditions = [f"pc_i0 + {BM} <= {EI}", f"pc_j0 + {BN} <= {EJ}"]
    for op in vec_ops:
        _, lanes, along = op.vector  # type: ignore[misc]
        corner = offset(op.access, {op.group[0]: op.origin, m.k[0]: "0"})
        beside = ({op.group[0]: f"({op.origin} + 1)", m.k[0]: "0"} if along == m.k[0]
                  else {op.group[0]: op.origin, m.k[0]: "1"})
        stride = f"(({offset(op.access, beside)}) - ({corner}))"     # between consecutive vectors' rows
        conditions += [f"((uintptr_t)({data(op.access)} + {corner}) % 16 == 0)", f"({stride} % {lanes} == 0)"]
    conditions += [f"{EK} > 0", f"{EK} % {BK} == 0"]   # K = 0: nothing to load (an empty operand)

    def load_tile(k0: str, vector: bool) -> List[str]:
        """Registers <- the K tile at k0 (16-byte vectors on the fast path)."""
        return [x for op in ops for x in (load_vector(op) if vector and op.vector else load_scalar(op, k0))]

    def store_tile(buf: str, vector: bool) -> List[str]:
        return [x for op in ops for x in store(op, buf, bool(vector and op.vector))]

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
    setup = [x for op in ops for x in row_offsets(op)] if grouped else []
    step = [f"  {at} pc_af[{TM}];", f"  {bt} pc_bf[{TN}];",
            "  #pragma unroll",
            f"  for (int pc_m = 0; pc_m < {TM}; pc_m++) pc_af[pc_m] = pc_As[pc_buf][pc_kk][{rm}];",
            "  #pragma unroll",
            f"  for (int pc_n = 0; pc_n < {TN}; pc_n++) pc_bf[pc_n] = pc_Bs[pc_buf][pc_kk][{cn}];",
            "  #pragma unroll",
            f"  for (int pc_m = 0; pc_m < {TM}; pc_m++)",
            "    #pragma unroll",
            f"    for (int pc_n = 0; pc_n < {TN}; pc_n++)",
            f"      {assignment(typing, st, 'pc_acc[pc_m][pc_n]', value)}"]
    whole = ["#pragma unroll", f"for (int pc_kk = 0; pc_kk < {BK}; pc_kk++) {{"] + step + ["}"]
    k_loop = Loop("pc_k0", LExpr("int", value=0), LExpr("<", (LExpr("id", value="pc_k0"), _group_lexpr(m.k, ext))),
                  BK, None, None)  # type: ignore[arg-type]

    def pipeline(vector: bool) -> USeq:
        """Tile 0 staged, then one K step per iteration: the next tile's loads go out first, the
        current tile is computed while they are in flight, then the next tile lands in the other
        shared buffer; one barrier per step.  The vector pipeline runs only whole K tiles (its
        condition says so), the general one also a last partial tile."""
        pointer_setup = [x for op in vec_ops for x in pointers(op)] if vector else []
        prologue = Raw(tuple(setup + pointer_setup + load_tile("0", vector) + store_tile("0", vector)))
        advance = [f"pc_p{op.tag}[{u}] += {step_of(op)};" for op in vec_ops
                   for u in range(per_thread[op.tag] // lanes_of[op.tag])] if vector else []
        compute = whole if vector else [f"if (pc_k0 + {BK} <= {EK}) {{"] + whole + ["} else {",
                                        f"for (int pc_kk = 0; pc_kk < {EK} - pc_k0; pc_kk++) {{"] + step + ["}", "}"]
        nxt = f"(pc_k0 + {BK})"
        body = Raw(tuple(ty_tx + [f"const int pc_buf = (int)((pc_k0 / {BK}) & 1);",
                                  f"const int pc_more = pc_k0 + {BK} < {EK};", "if (pc_more) {"]
                         + ["  " + x for x in advance + load_tile(nxt, vector)] + ["}"] + compute
                         + ["if (pc_more) {"] + ["  " + x for x in store_tile("pc_buf ^ 1", vector)] + ["}"]))
        return USeq((Region(prologue, False), Barrier(),
                     ULoop(k_loop, USeq((Region(body, False), Barrier())), sync=False)))

    store_c = Raw(tuple(ty_tx + [
        f"for (int pc_m = 0; pc_m < {TM}; pc_m++)",
        f"  for (int pc_n = 0; pc_n < {TN}; pc_n++) {{",
        f"    const int64_t pc_r = {rm};",
        f"    const int64_t pc_c = {cn};",
        f"    if ({row} < {EI} && {col} < {EJ}) {target} = pc_acc[pc_m][pc_n];",
        "  }",
    ]))
    # The vector pipeline where this block's tiles allow it (uniform per block), else the general one.
    staged = (UGuard(LExpr("id", value="pc_fast"), pipeline(True), pipeline(False)) if vec_ops
              else pipeline(False))
    body = USeq((Region(init, False), staged, Region(store_c, False)))
    if vec_ops:
        body = USeq((Raw((f"const int pc_fast = {' && '.join(conditions)};",)), body))

    def grid_loop(var: str, tile: int, group: Tuple[str, ...], axis: int, inner) -> Mapped:
        it = f"{var}_tile"
        lp = Loop(it, LExpr("int", value=0), LExpr("<", (LExpr("id", value=it), _ceil_div(group, ext, tile))),
                  1, None, None)  # type: ignore[arg-type]
        return Mapped("block", axis, lp, USeq((Raw((f"const int64_t {var} = {tile} * {it};",)), inner)))

    body = grid_loop("pc_j0", BN, m.j, 0, body)
    body = grid_loop("pc_i0", BM, m.i, 1, body)
    grid = [_ceil_div(m.j, ext, BN), _ceil_div(m.i, ext, BM), None]
    if m.batch:
        lp = Loop("pc_batch", LExpr("int", value=0), LExpr("<", (LExpr("id", value="pc_batch"), _affine_lexpr(ext[m.batch]))), 1, None, None)  # type: ignore[arg-type]
        body = Mapped("block", 2, lp, body)
        grid[2] = _affine_lexpr(ext[m.batch])
    private = [("pc_acc", ct, (TM, TN))] + [(op.regs, own(op.access), (per_thread[op.tag],)) for op in ops]
    if grouped:
        private += [(f"pc_o{op.tag}", "int64_t", (per_thread[op.tag],)) for op in ops]
    private += [(f"pc_p{op.tag}", f"const {typing.tensors[op.access.tensor].c_name} *",
                 (per_thread[op.tag] // lanes_of[op.tag],)) for op in vec_ops]
    return GPUKernel(symbol, body, (), tuple(grid), (LExpr("int", value=THREADS), None, None),  # type: ignore[arg-type]
                     statements=(st.name,) + ((plan.init,) if plan.init else ()),
                     shared=(("pc_As", at, (2, BK, BM + 4)), ("pc_Bs", bt, (2, BK, BN))),
                     private=tuple(private), fixed_block=True,
                     min_blocks=max(1, 256 // THREADS))   # up to 255 registers a thread; the prefetch hides latency


def with_tiled_contractions(gpu: GPUProgram, plans: Mapping[str, GPUContractionPlan], program: Program,
                            typing: Typing, symbol: str) -> GPUProgram:
    """`gpu` with the launch of each planned contraction's loops replaced by its tiled kernel and
    the launch of its fused `= const` statement dropped; kernels renumbered `<symbol>_k<n>`.

    The scheduler plans only contractions that are their own top-level nests, so each one's loops
    form one top-level kernel, maybe inside host loops and guards that launch nothing else (loops
    beyond the grid's three axes, e.g. a convolution's batch): the tiled kernel, which covers the
    whole box, replaces that subtree with one launch.  Anything else is a PolycError (the schedule
    and the program disagree)."""
    fused = {p.init for p in plans.values() if p.init is not None}
    kernels: List[GPUKernel] = []
    done: set = set()

    def launched(n: HNode) -> set:
        if isinstance(n, Launch):
            return set(gpu.kernels[n.kernel].statements)
        if isinstance(n, HostSeq):
            return set().union(*(launched(ch) for ch in n.children)) if n.children else set()
        if isinstance(n, HostLoop):
            return launched(n.body)
        if isinstance(n, HostGuard):
            return launched(n.then) | (launched(n.orelse) if n.orelse is not None else set())
        raise TypeError(n)

    def tiled(name: str) -> HNode:
        """The launch of the plan's kernel; with narrow tiles, host guards pick one by the sizes."""
        plan = plans[name]
        done.add(name)
        ext = dict(plan.contraction.extents)
        node: Optional[HNode] = None
        for tile in [plan.tile] + [t for _, t in reversed(plan.narrow)]:
            kernels.append(contraction_kernel(plan, program, typing, f"{symbol}_k{len(kernels)}", tile))
            if node is None:
                node = Launch(len(kernels) - 1)
                continue
            group, most = ((plan.contraction.i, tile[0]) if tile[0] < plan.tile[0]
                           else (plan.contraction.j, tile[1]))
            small = LExpr("<=", (_group_lexpr(group, ext), LExpr("int", value=most)))
            node = HostGuard(small, Launch(len(kernels) - 1), node)
        assert node is not None
        return node

    def launch(index: int) -> Optional[HNode]:
        k = gpu.kernels[index]
        kernels.append(replace(k, symbol=f"{symbol}_k{len(kernels)}"))
        return Launch(len(kernels) - 1)

    def host(n: HNode) -> Optional[HNode]:
        names = launched(n)
        if names and not isinstance(n, HostSeq):
            if len(names) == 1 and next(iter(names)) in plans and next(iter(names)) not in done:
                return tiled(next(iter(names)))
            if names <= fused:
                return None
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
