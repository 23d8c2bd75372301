"""Loop AST -> C source (OpenMP + SIMD pragmas) through cgen.

The generated function takes every tensor as a flat pointer (re-typed as a pointer to a
variable-length array so accesses read `C[i][j]`), every size as `int64_t` and every scalar
parameter by value.  Sizes stay symbolic, so one compiled kernel serves every size.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List

import cgen as c

from ..ir import Access, Program
from ..runtime.signature import KernelParam, KernelSignature
from ..schedule.schedule import Schedule
from .cexpr import CExprPrinter
from .loop_ast import Block, Call, Guard, Loop, Node, build_loop_ast, c_text, strip_parens
from .typing import Typing

PREAMBLE = """\
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static inline int64_t polyc_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t polyc_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t polyc_floord(int64_t a, int64_t b) { return (a >= 0) ? a / b : -((-a + b - 1) / b); }
"""


@dataclass(frozen=True)
class GeneratedC:
    source: str
    signature: KernelSignature


def c_symbol(name: str) -> str:
    return "polyc_" + re.sub(r"\W", "_", name)


def kernel_signature(program: Program, typing: Typing) -> KernelSignature:
    params: List[KernelParam] = [KernelParam(t.name, "array", typing.tensors[t.name]) for t in program.tensors]
    from ..ir import i64
    params += [KernelParam(s, "size", i64) for s in program.sizes]
    params += [KernelParam(s.name, "scalar", typing.scalars[s.name]) for s in program.scalars]
    return KernelSignature(c_symbol(program.name), tuple(params))


def _array_access(acc: Access, printer: CExprPrinter) -> str:
    if not acc.indices:
        return f"{acc.tensor}[0]"
    return acc.tensor + "".join(f"[{printer.affine(e)}]" for e in acc.indices)


class _Emitter:
    def __init__(self, program: Program, typing: Typing):
        self.program = program
        self.typing = typing
        self.statements = {s.name: s for s in program.statements}

    def node(self, n: Node, in_parallel: bool) -> List:
        if isinstance(n, Block):
            out: List = []
            for ch in n.children:
                out.extend(self.node(ch, in_parallel))
            return out
        if isinstance(n, Guard):
            then = c.Block(self.node(n.then, in_parallel))
            orelse = c.Block(self.node(n.orelse, in_parallel)) if n.orelse is not None else None
            return [c.If(strip_parens(c_text(n.cond)), then, orelse)]
        if isinstance(n, Loop):
            marks = n.dim.marks if n.dim is not None else frozenset()
            pragmas = []
            # "reduction_parallel": iterations race only on reduction updates, made atomic below.
            reduction_here = "reduction_parallel" in marks and not in_parallel
            parallel_here = ("parallel" in marks or reduction_here) and not in_parallel
            # At most one pragma may precede a for (gcc rejects `omp simd` after `omp parallel for`
            # and `GCC unroll` next to any OpenMP loop pragma); SIMD is dropped where updates are
            # atomic (a reduction-parallel region), the unroll hint where OpenMP takes the loop.
            simd = "vector" in marks and not (getattr(self, "_atomic_depth", 0) or reduction_here)
            if parallel_here:
                pragmas.append(c.Pragma("omp parallel for" + (" simd" if simd else "") + " schedule(static)"))
            elif simd:
                pragmas.append(c.Pragma("omp simd"))
            elif n.dim is not None and n.dim.unroll:
                pragmas.append(c.Pragma(f"GCC unroll {n.dim.unroll if n.dim.unroll > 0 else 64}"))
            self._atomic_depth = getattr(self, "_atomic_depth", 0) + reduction_here
            try:
                body = c.Block(self.node(n.body, in_parallel or parallel_here))
            finally:
                self._atomic_depth -= reduction_here
            loop = c.For(f"int64_t {n.iterator} = {strip_parens(c_text(n.init))}", strip_parens(c_text(n.cond)),
                         f"{n.iterator} += {n.step}" if n.step != 1 else f"{n.iterator}++", body)
            return pragmas + [loop]
        if isinstance(n, Call):
            st = self.statements[n.statement]
            index_text = {it: strip_parens(c_text(a)) for it, a in zip(st.iterators, n.args)}
            printer = CExprPrinter(self.typing, index_text, _array_access)
            line = c.Line(printer.statement(st))
            if st.update and getattr(self, "_atomic_depth", 0):
                return [c.Pragma("omp atomic" if st.update in ("+", "*") else "omp critical"), line]
            return [line]
        raise TypeError(n)

    def function(self, loops: Node, signature: KernelSignature) -> str:
        params = []
        prologue: List = []
        for p in signature.params:
            if p.kind == "array":
                t = self.program.tensor(p.name)
                ctype = p.dtype.c_name
                params.append(c.Value(f"{ctype} *restrict", f"{p.name}_data"))
                shape = t.shape or ()
                if len(shape) <= 1:
                    prologue.append(c.Line(f"{ctype} *restrict {p.name} = {p.name}_data;"))
                else:
                    printer = CExprPrinter(self.typing, {}, _array_access)
                    tail = "".join(f"[{printer.affine(e)}]" for e in shape[1:])
                    prologue.append(c.Line(f"{ctype} (*restrict {p.name}){tail} = ({ctype} (*){tail}) {p.name}_data;"))
            else:
                params.append(c.Value(p.dtype.c_name, p.name))
        body = prologue + self.node(loops, False)
        fn = c.FunctionBody(c.FunctionDeclaration(c.Value("void", signature.symbol), params), c.Block(body))
        return PREAMBLE + "\n" + str(fn) + "\n"


def generate_c(schedule: Schedule, typing: Typing) -> GeneratedC:
    """C source and its signature for `schedule` of a kernel, specialised to `typing`."""
    program = schedule.model.program
    signature = kernel_signature(program, typing)
    loops = build_loop_ast(schedule)
    return GeneratedC(_Emitter(program, typing).function(loops, signature), signature)
