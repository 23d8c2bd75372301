"""GPU program -> CUDA C++ source, and the same program -> C that emulates it on the CPU.

`generate_cuda(schedule, typing)` builds the `GPUProgram` of a mapped schedule (host control +
kernels, see `cuda_ir`; the mapping and the tiled contractions are the scheduler's,
`polyc.schedule.auto_gpu`) and prints it twice from the one intermediate form:

- CUDA: one `extern "C" __global__` function per kernel; block/thread loops become grid- and
  block-stride loops over `blockIdx`/`threadIdx`; tensors are flat pointers indexed row-major
  (`A[i * K + k]`, no VLAs in CUDA C++); barriers are `__syncthreads()`.
- Emulation C: the same kernel bodies inside loops over blocks and, for each per-thread region,
  loops over threads (both run backwards, so a mapping that silently relies on source order shows
  up as a wrong result); a barrier is the end of a region's thread loop.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

import cgen as c

from ..ir import Access, Program
from .signature import KernelSignature
from ..schedule.auto_gpu import gpu_contraction_plans
from ..schedule.schedule import Schedule
from .c import c_symbol, kernel_signature
from .cexpr import CExprPrinter, expression_helpers, literal, wrapping
from .cuda_contraction import with_tiled_contractions
from .cuda_ir import (REDUCE_THREADS, Barrier, GPUKernel, GPUProgram, IdxGuard, IdxGuardU, KNode, Mapped, Raw, Reduce,
                      Region, UGuard, ULoop, USeq, build_gpu_program, flat_index)
from .loop_ast import Block, Call, Guard, Loop, c_text, operand, strip_parens
from .names import CNames
from .typing import Typing

CUDA_PREAMBLE = """\
#include <stdint.h>
#include <math.h>
#pragma nv_diag_suppress 177

static __device__ __forceinline__ int64_t pc_min(int64_t pc_a, int64_t pc_b) { return pc_a < pc_b ? pc_a : pc_b; }
static __device__ __forceinline__ int64_t pc_max(int64_t pc_a, int64_t pc_b) { return pc_a > pc_b ? pc_a : pc_b; }
static __device__ __forceinline__ int64_t pc_floord(int64_t pc_a, int64_t pc_b) { return (pc_a >= 0) ? pc_a / pc_b : -((-pc_a + pc_b - 1) / pc_b); }
#define pc_vload4(T, p, d0, d1, d2, d3) do { const T pc_v = *(const T *)(p); d0 = pc_v.x; d1 = pc_v.y; d2 = pc_v.z; d3 = pc_v.w; } while (0)
#define pc_vload2(T, p, d0, d1) do { const T pc_v = *(const T *)(p); d0 = pc_v.x; d1 = pc_v.y; } while (0)
""" + expression_helpers("static __device__ __forceinline__")

EMU_PREAMBLE = """\
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static inline int64_t pc_min(int64_t pc_a, int64_t pc_b) { return pc_a < pc_b ? pc_a : pc_b; }
static inline int64_t pc_max(int64_t pc_a, int64_t pc_b) { return pc_a > pc_b ? pc_a : pc_b; }
static inline int64_t pc_floord(int64_t pc_a, int64_t pc_b) { return (pc_a >= 0) ? pc_a / pc_b : -((-pc_a + pc_b - 1) / pc_b); }
/* 16-byte vector loads (CUDA) read the same elements one by one here */
#define pc_vload4(T, p, d0, d1, d2, d3) do { d0 = (p)[0]; d1 = (p)[1]; d2 = (p)[2]; d3 = (p)[3]; } while (0)
#define pc_vload2(T, p, d0, d1) do { d0 = (p)[0]; d1 = (p)[1]; } while (0)
""" + expression_helpers("static inline")

_AXES = "xyz"

#: Element types whose tree reductions combine within a warp by `__shfl_down_sync` (the types it
#: takes); others keep the shared-memory tree with a barrier per level.
_SHUFFLED = ("f32", "f64", "i32", "i64")


@dataclass(frozen=True)
class Dialect:
    """How the two printers differ: index variables, qualifiers, barriers."""

    name: str
    restrict: str
    block_idx: str      # format with axis letter
    grid_dim: str
    thread_idx: str
    block_dim: str
    barrier: Optional[str]
    shared: str


CUDA = Dialect("cuda", "__restrict__", "(int64_t)blockIdx.{a}", "(int64_t)gridDim.{a}", "(int64_t)threadIdx.{a}",
               "(int64_t)blockDim.{a}", "__syncthreads();", "__shared__ ")
EMU = Dialect("emu", "restrict", "pc_b{a}", "pc_g{a}", "pc_t{a}", "pc_n{a}", None, "")


@dataclass(frozen=True)
class GeneratedCUDA:
    """CUDA source, the program-level signature, the launch plan, and the emulation C source.

    `launch` is the `GPUProgram`: host loops/guards and, per kernel, grid/block extents as
    expressions of sizes (evaluated at call time by `cuda_ir.launch_dims`).  Each kernel takes the
    signature's parameters followed by its host iterators (`int64_t`).
    """

    source: str
    signature: KernelSignature
    launch: GPUProgram
    emulation_source: str
    schedule: Schedule


class _Printer:
    def __init__(self, program: Program, typing: Typing, dialect: Dialect, names: CNames):
        self.program = program
        self.names = names
        self.typing = typing
        self.d = dialect
        self.statements = {s.name: s for s in program.statements}
        self.private: tuple = ()

    def _access(self, acc: Access, printer: CExprPrinter) -> str:
        return f"{self.names.data(acc.tensor)}[{flat_index(self.program, acc, printer)}]"

    def _c(self, e) -> str:
        """C text of a loop-AST expression without outer parentheses, ids as C identifiers."""
        return strip_parens(c_text(e, self.names.id))

    def call(self, n: Call) -> List:
        st = self.statements[n.statement]
        index_text = {it: self._c(a) for it, a in zip(st.iterators, n.args)}
        printer = CExprPrinter(self.typing, index_text, self._access, self.names)
        return [c.Line(printer.statement(st))]

    def loop(self, it: str, init: str, cond: str, step: str, body: List) -> c.For:
        """A for loop over the loop-AST iterator `it` (an isl id)."""
        it = self.names.id(it)
        return c.For(f"int64_t {it} = {init}", cond, f"{it} += {step}" if step != "1" else f"{it}++", c.Block(body))

    def node(self, n: KNode) -> List:
        d = self.d
        if isinstance(n, USeq):
            return [x for ch in n.children for x in self.node(ch)]
        if isinstance(n, Block):
            return [x for ch in n.children for x in self.node(ch)]
        if isinstance(n, Mapped):
            lp = n.loop
            a = _AXES[n.axis]
            idx, dim = (d.block_idx, d.grid_dim) if n.kind == "block" else (d.thread_idx, d.block_dim)
            idx, dim = idx.format(a=a), dim.format(a=a)
            scale = f" * {lp.step}" if lp.step != 1 else ""
            start = self._c(lp.init)
            init = f"{idx}{scale}" if start == "0" else f"{operand(start)} + {idx}{scale}"
            body = self.node(n.body)
            if n.kind == "block" and d.barrier and _reductions(n.body):
                # a block running several rows (a clamped grid): the next row's tree must not write
                # the shared partials while this row's last stage may still read them
                body.append(c.Line(d.barrier))
            return [self.loop(lp.iterator, init, self._c(lp.cond), f"{dim}{scale}", body)]
        if isinstance(n, ULoop):
            lp = n.loop
            body = self.node(n.body)
            if n.sync and d.barrier:
                body.append(c.Line(d.barrier))
            return [self.loop(lp.iterator, self._c(lp.init), self._c(lp.cond), str(lp.step), body)]
        if isinstance(n, Loop):
            return [self.loop(n.iterator, self._c(n.init), self._c(n.cond), str(n.step), self.node(n.body))]
        if isinstance(n, (UGuard, Guard)):
            orelse = c.Block(self.node(n.orelse)) if n.orelse is not None else None
            return [c.If(self._c(n.cond), c.Block(self.node(n.then)), orelse)]
        if isinstance(n, Reduce):
            return [x for m in self.reduce_nodes(n) for x in self.node(m)]
        if isinstance(n, (IdxGuard, IdxGuardU)):
            fmt = d.block_idx if n.kind == "block" else d.thread_idx
            cond = " && ".join(f"{fmt.format(a=_AXES[a])} == 0" for a in n.axes)
            return [c.If(cond, c.Block(self.node(n.body)))]
        if isinstance(n, Region):
            body = self.node(n.body)
            if d.name == "cuda":
                return [c.Block(body)]    # own scope: regions may declare the same names
            inner: List = body
            for a in "xyz":   # threads run backwards: order-dependent mappings fail visibly
                inner = [c.For(f"int64_t pc_t{a} = pc_n{a} - 1", f"pc_t{a} >= 0", f"pc_t{a}--", c.Block(inner))]
            return inner
        if isinstance(n, Barrier):
            return [c.Line(d.barrier)] if d.barrier else []
        if isinstance(n, Raw):
            return [c.Line(self.raw(line)) for line in n.lines]
        if isinstance(n, Call):
            return self.call(n)
        raise TypeError(n)

    def reduce_nodes(self, n: Reduce) -> List[KNode]:
        """A tree reduction in regions and barriers (see `cuda_ir.Reduce`)."""
        st = self.statements[n.call.statement]
        dt = self.typing.tensors[st.target.tensor]
        index_text = {it: self._c(a) for it, a in zip(st.iterators, n.call.args)}
        printer = CExprPrinter(self.typing, index_text, self._access, self.names)
        value, target = printer.expr(st.value, dt), printer.access(st.target)
        op = st.update or "+"

        def comb(a: str, b: str) -> str:
            if op in ("+", "*"):      # integers wrap, never overflow
                return wrapping(a, op, f"({b})", dt.c_name)
            return f"pc_{op}_{dt.name}({a}, {b})"      # NaN-propagating, as cexpr prints max/min

        identity = {"+": 0, "*": 1, "max": float("-inf"), "min": float("inf")}[op]
        lp, red, nt = n.loop, n.scratch, REDUCE_THREADS
        scale = f" * {lp.step}" if lp.step != 1 else ""
        start = self._c(lp.init)
        start = f"$tid{scale}" if start == "0" else f"{operand(start)} + $tid{scale}"
        it = self.names.id(lp.iterator)
        if self.typing.converts_each_step(st):
            # `T op= e` converts to T's type after every step (README "Types"): not associative,
            # so no tree; thread 0 folds the terms in order, as the serial code does.
            return [Region(Raw(("if ($tid == 0)",
                                f"  for (int64_t {it} = {self._c(lp.init)}; {self._c(lp.cond)}; {it} += {lp.step})",
                                f"    {printer.statement(st)}")), False)]
        fold = (f"{dt.c_name} pc_part = {literal(identity, dt)};",
                f"for (int64_t {it} = {start}; {self._c(lp.cond)}; {it} += {nt}{scale})",
                f"  pc_part = {comb('pc_part', value)};")
        if dt.name in _SHUFFLED:
            return self._warp_tree(fold, red, comb, literal(identity, dt), target, dt.c_name)
        nodes: List[KNode] = [Region(Raw(fold + (f"{red}[$tid] = pc_part;",)), False), Barrier()]
        half = nt // 2
        while half >= 1:
            nodes += [Region(Raw((f"if ($tid < {half}) {red}[$tid] = {comb(f'{red}[$tid]', f'{red}[$tid + {half}]')};",)),
                             False), Barrier()]
            half //= 2
        nodes.append(Region(Raw((f"if ($tid == 0) {target} = {comb(target, f'{red}[0]')};",)), False))
        return nodes

    def _warp_tree(self, fold, red: str, comb, identity: str, target: str, ctype: str) -> List[KNode]:
        """The tree in two levels: within each warp of 32 threads (offsets 16, 8, 4, 2, 1), then
        over the warps' results (offsets warps/2 .. 1).  CUDA combines with warp shuffles and two
        barriers; the emulator combines the same pairs in the same order through shared memory."""
        warps = REDUCE_THREADS // 32
        offsets = [16, 8, 4, 2, 1]
        across = []
        k = warps // 2
        while k >= 1:
            across.append(k)
            k //= 2
        if self.d.name == "cuda":
            def shuffle(v: str, offs) -> Tuple[str, ...]:
                return tuple(f"{v} = {comb(v, f'__shfl_down_sync(0xffffffffu, {v}, {o})')};" for o in offs)
            first = Raw(fold + shuffle("pc_part", offsets) + (f"if ($tid % 32 == 0) {red}[$tid / 32] = pc_part;",))
            last = Raw(("if ($tid < 32) {",
                        f"  {ctype} pc_w = $tid < {warps} ? {red}[$tid] : {identity};")
                       + tuple("  " + x for x in shuffle("pc_w", across))
                       + (f"  if ($tid == 0) {target} = {comb(target, 'pc_w')};", "}"))
            return [Region(first, False), Barrier(), Region(last, False)]
        nodes: List[KNode] = [Region(Raw(fold + (f"{red}[$tid] = pc_part;",)), False), Barrier()]
        for o in offsets:
            nodes += [Region(Raw((f"if ($tid % 32 < {o}) {red}[$tid] = {comb(f'{red}[$tid]', f'{red}[$tid + {o}]')};",)),
                             False), Barrier()]
        for o in across:
            nodes += [Region(Raw((f"if ($tid < {o}) {red}[32 * $tid] = "
                                  f"{comb(f'{red}[32 * $tid]', f'{red}[32 * ($tid + {o})]')};",)), False), Barrier()]
        nodes.append(Region(Raw((f"if ($tid == 0) {target} = {comb(target, f'{red}[0]')};",)), False))
        return nodes

    def shared_decls(self, kernel: GPUKernel) -> List[str]:
        """Shared arrays; a reduction's scratch takes its statement's element type."""
        types = {}
        for r in _reductions(kernel.body):
            st = self.statements[r.call.statement]
            types[r.scratch] = self.typing.tensors[st.target.tensor].c_name
        return [_decl((name, ctype or types[name], dims)) for name, ctype, dims in kernel.shared]

    def raw(self, line: str) -> str:
        d = self.d
        for a in "xyz":
            line = line.replace(f"$b{a}", d.block_idx.format(a=a)).replace(f"$g{a}", d.grid_dim.format(a=a))
        line = line.replace("$tid", d.thread_idx.format(a="x"))
        if d.name == "emu":
            for name, _, _ in self.private:
                line = re.sub(rf"\b{name}\[", f"{name}[pc_tx][", line)
        return line

    def params(self, signature: KernelSignature, kernel: GPUKernel) -> List:
        out = []
        for p in signature.params:
            if p.kind == "array":
                out.append(c.Value(f"{p.dtype.c_name} *{self.d.restrict}", p.c_name))
            else:
                out.append(c.Value(p.dtype.c_name, p.c_name))
        out += [c.Value("int64_t", self.names.id(h)) for h in kernel.host_iterators]
        return out

    def cuda_kernel(self, signature: KernelSignature, kernel: GPUKernel) -> str:
        self.private = kernel.private
        body = [c.Line(f"__shared__ __align__(16) {d}") for d in self.shared_decls(kernel)]
        body += [c.Line(_decl(a)) for a in kernel.private]
        body += self.node(kernel.body)
        bounds = ""
        if kernel.fixed_block:
            threads = kernel.block[0].value  # type: ignore[union-attr]
            bounds = f" __launch_bounds__({threads}{f', {kernel.min_blocks}' if kernel.min_blocks else ''})"
        decl = c.FunctionDeclaration(c.Value(f'extern "C" __global__ void{bounds}', kernel.symbol),
                                     self.params(signature, kernel))
        return str(c.FunctionBody(decl, c.Block(body)))

    def emu_kernel(self, signature: KernelSignature, kernel: GPUKernel) -> str:
        self.private = kernel.private
        block_body: List = [c.Line(d) for d in self.shared_decls(kernel)]
        block_body += [c.Line(_decl((n, t, (_emu_threads(kernel),) + dims))) for n, t, dims in kernel.private]
        block_body += self.node(kernel.body)
        inner: List = block_body
        for a in "xyz":   # blocks run backwards too
            inner = [c.For(f"int64_t pc_b{a} = pc_g{a} - 1", f"pc_b{a} >= 0", f"pc_b{a}--", c.Block(inner))]
        params = self.params(signature, kernel)
        params += [c.Value("int64_t", f"pc_g{a}") for a in "xyz"] + [c.Value("int64_t", f"pc_n{a}") for a in "xyz"]
        decl = c.FunctionDeclaration(c.Value("void", kernel.symbol + "_emu"), params)
        return str(c.FunctionBody(decl, c.Block(inner)))


def _reductions(n) -> List[Reduce]:
    if isinstance(n, Reduce):
        return [n]
    if isinstance(n, USeq):
        return [r for ch in n.children for r in _reductions(ch)]
    if isinstance(n, (Mapped, ULoop, IdxGuardU, Region)):
        return _reductions(n.body)
    if isinstance(n, UGuard):
        return _reductions(n.then) + (_reductions(n.orelse) if n.orelse is not None else [])
    return []


def _decl(array) -> str:
    name, ctype, dims = array
    return f"{ctype} {name}{''.join(f'[{d}]' for d in dims)};"


def _emu_threads(kernel: GPUKernel) -> int:
    if not kernel.fixed_block or kernel.block[1] is not None or kernel.block[2] is not None:
        raise ValueError("per-thread arrays need a fixed 1-D thread block")
    return int(kernel.block[0].value)  # type: ignore[union-attr]


def generate_cuda(schedule: Schedule, typing: Typing) -> GeneratedCUDA:
    """CUDA source (+ emulation C, launch plan, signature) for `schedule`, specialised to `typing`.

    Prints what the schedule says and decides nothing: loops marked "block"/"thread" run on the
    grid, the others inside a thread or on the host, and each tiled-contraction plan the schedule
    holds (`polyc.schedule.auto_gpu`) becomes its tiled kernel.  An unmapped schedule therefore runs
    in one thread; `pc.compile`/`pc.codegen` map it with `auto_gpu_schedule` first.
    """
    program = schedule.model.program
    signature = kernel_signature(program, typing)
    symbol = c_symbol(program.name)
    gpu = build_gpu_program(schedule, symbol)
    plans = gpu_contraction_plans(schedule)
    if plans:
        gpu = with_tiled_contractions(gpu, plans, program, typing, symbol)
    return print_program(program, typing, signature, gpu, schedule)


def print_program(program: Program, typing: Typing, signature: KernelSignature, gpu: GPUProgram,
                  schedule: Schedule) -> GeneratedCUDA:
    """Print a GPU program as CUDA and as emulation C."""
    names = CNames.for_program(program, schedule)
    cuda = _Printer(program, typing, CUDA, names)
    emu = _Printer(program, typing, EMU, names)
    cuda_src = CUDA_PREAMBLE + "\n" + "\n\n".join(cuda.cuda_kernel(signature, k) for k in gpu.kernels) + "\n"
    emu_src = EMU_PREAMBLE + "\n" + "\n\n".join(emu.emu_kernel(signature, k) for k in gpu.kernels) + "\n"
    return GeneratedCUDA(cuda_src, signature, gpu, emu_src, schedule)
