"""Loop AST -> C source (OpenMP + SIMD pragmas) through cgen.

The generated function takes every tensor as a flat pointer (re-typed as a pointer to a
variable-length array so accesses read `t_C[i_i][i_j]`), every size as `int64_t` and every scalar
parameter by value.  Sizes stay symbolic, so one compiled kernel serves every size.  Every
identifier comes from `polyc.codegen.names` (user names by kind, polyc's own under `pc_`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import cgen as c

from ..ir import Access, Program
from ..ir.types import DTYPES
from .signature import KernelParam, KernelSignature
from ..schedule.schedule import Dim, LoopKind, Schedule
from ..schedule.storage import PRIVATE_COPY_BYTES, private_copies
from ..target import MVEC_FUNCTIONS
from .c_omp import (ACCUMULATOR_TYPES, MIN_WORK_DEFINITION, OMP_OPERATOR, Accumulator, guarded_parallel,
                    omp_schedule, parallel_condition, single_call)
from .c_packed_init import Deferred
from . import c_align
from .c_align import PEEL_HELPER
from .cexpr import CExprPrinter, expression_helpers, float_sizes
from .loop_ast import Block, Call, Guard, Loop, Node, build_loop_ast, c_text, flat_block, ids, strip_parens, walk
from .names import INTERNAL, TENSOR, CNames, ascii_spelling, kernel_symbol, mangle
from .typing import Typing

PREAMBLE = """\
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static inline int64_t pc_min(int64_t pc_a, int64_t pc_b) { return pc_a < pc_b ? pc_a : pc_b; }
static inline int64_t pc_max(int64_t pc_a, int64_t pc_b) { return pc_a > pc_b ? pc_a : pc_b; }
static inline int64_t pc_floord(int64_t pc_a, int64_t pc_b) { return (pc_a >= 0) ? pc_a / pc_b : -((-pc_a + pc_b - 1) / pc_b); }
/* Iterations until pc_p reaches a cache line (see polyc.codegen.c_align). */
%s
/* Estimated operations below which a parallel loop runs on one thread (polyc.codegen.c_omp). */
%s
/* Iterations per chunk of a parallel loop of pc_trip iterations whose work varies: about 4 chunks
   per thread, dealt out in turn (see polyc.codegen.c_omp.omp_schedule). */
#ifdef _OPENMP
#include <omp.h>
static inline int64_t pc_omp_chunk(int64_t pc_trip) { const int64_t pc_n = 4 * (int64_t)omp_get_max_threads(); return pc_trip > pc_n ? (pc_trip + pc_n - 1) / pc_n : 1; }
#else
static inline int64_t pc_omp_chunk(int64_t pc_trip) { return pc_trip > 1 ? pc_trip : 1; }
#endif
""" % (PEEL_HELPER, MIN_WORK_DEFINITION) + expression_helpers("static inline")


#: Parallel loops run their bodies in helpers with restrict parameters (`_Emitter._outlined`), so the
#: automatic scheduler may parallelise loops around accumulations and block for registers.
PARALLEL_LOOPS_KEEP_RESTRICT = True

#: Added when a packed contraction is emitted (memcpy'd vectors; `omp.h`, for its OpenMP queries,
#: is in `PREAMBLE`).
PACKED_PREAMBLE = """#include <string.h>
"""


#: libmvec functions the generated C may declare SIMD versions of, with their vector ABI argument
#: letters (one `v` per vector argument); `polyc.runtime.vector_math` finds which the machine has.
#: The libmvec functions (and their vector ABI argument letters) the generated C may declare SIMD.
VECTOR_MATH_FUNCTIONS = MVEC_FUNCTIONS


def vector_math_declarations(program: Program) -> str:
    """SIMD declarations of the math functions `program` calls that libmvec may provide, each guarded
    by `POLYC_VMATH_<fn>` (defined by the compile command where available; see
    polyc.runtime.vector_math): with them gcc vectorises loops that call these functions."""
    from ..ir import Call as CallExpr
    used = sorted({e.fn for st in program.statements for e in st.value.walk()
                   if isinstance(e, CallExpr) and e.fn in VECTOR_MATH_FUNCTIONS})
    out = []
    for fn in used:
        params = ", ".join(["float"] * len(VECTOR_MATH_FUNCTIONS[fn]))
        dparams = ", ".join(["double"] * len(VECTOR_MATH_FUNCTIONS[fn]))
        out += [f"#ifdef POLYC_VMATH_{fn}", "#pragma omp declare simd notinbranch", f"float {fn}f({params});",
                "#pragma omp declare simd notinbranch", f"double {fn}({dparams});", "#endif"]
    return "\n".join(out) + "\n" if out else ""


@dataclass(frozen=True)
class GeneratedC:
    source: str
    signature: KernelSignature


def c_symbol(name: str) -> str:
    """The exported symbol of kernel `name` (see `names.kernel_symbol`)."""
    return kernel_symbol(name)


def kernel_signature(program: Program, typing: Typing) -> KernelSignature:
    params: List[KernelParam] = [KernelParam(t.name, "array", typing.tensors[t.name]) for t in program.tensors]
    from ..ir import i64
    params += [KernelParam(s, "size", i64) for s in program.sizes]
    params += [KernelParam(s.name, "scalar", typing.scalars[s.name]) for s in program.scalars]
    return KernelSignature(c_symbol(program.name), tuple(params))


#: Prefix of a row buffer's C name (`polyc.codegen.names.INTERNAL`: no user name carries it), and the
#: largest row kept on an OpenMP thread's stack.
ROW_BUFFER = INTERNAL + "row_"
ROW_BUFFER_BYTES = 65536


def _array_access(acc: Access, printer: CExprPrinter) -> str:
    view = mangle(TENSOR, acc.tensor)
    if not acc.indices:
        return f"{view}[0]"
    return view + "".join(f"[{printer.affine(e)}]" for e in acc.indices)


class _Emitter:
    def __init__(self, program: Program, typing: Typing, names: CNames, plans=None,
                 parallel_loops=frozenset(), fixed_sizes=None, row_buffers=None, shared_reductions=None,
                 private_temporaries=None, zero_inits=None):
        self.program = program
        #: packed statement -> the statement zeroing its target, which its packed helper folds in
        #: (`c_packed_init`): emitted only unless every execution of the packed statement went
        #: through its helper (`c_packed_init.Deferred`; `_folding` records how each one went).
        self.zero_inits: Dict[str, str] = dict(zero_inits or {})
        self._folding: Dict[str, bool] = {}
        self._deferring = False
        self._fallback_of: Optional[str] = None   # the packed statement whose fallback loops are emitted
        #: reduction-parallel loop -> the tensors two of its iterations update at one element (None:
        #: not known, every tensor updated inside counts); see `schedule.storage.shared_reductions`.
        self.shared_reductions: Dict[str, Optional[frozenset]] = dict(shared_reductions or {})
        self._racing: frozenset = frozenset()    # tensors updated by several threads at once (atomically)
        #: parallel loop -> intermediates each thread keeps a copy of (`storage.private_temporaries`)
        self.private_temporaries: Dict[str, frozenset] = dict(private_temporaries or {})
        #: tensor -> (dimension fixed by the loop, parallel loop): each iteration of that loop may
        #: keep the tensor's row in a buffer of its own (`schedule.storage.row_buffers`).
        self.row_buffers: Dict[str, Tuple[int, str]] = dict(row_buffers or {})
        self._rows: Dict[str, int] = {}   # the row buffers of the outlined loop being emitted
        self.names = names
        self.fixed_sizes = dict(fixed_sizes or {})
        self.typing = typing
        self.statements = {s.name: s for s in program.statements}
        self.plans = dict(plans or {})
        self.parallel_loops = parallel_loops
        self.packed_loops = frozenset(nm for plan in self.plans.values() for nm in plan.loops)
        self.helpers: List[str] = []
        self._accs: Dict[Call, Accumulator] = {}  # reduction accumulators (by statement instance) of the loop emitted
        self._atomic_depth = 0                   # reduction-parallel loops (atomic updates) around
        self._scope: List[str] = []   # iterators of the loops around the node being emitted
        self.signature: KernelSignature = None  # type: ignore[assignment]

    def _packed(self, n: Loop, in_parallel: bool) -> Optional[List]:
        """A call of the packed-contraction helper for the loop nest `n` (see c_packed), with the
        plain loops as the fallback; None when this nest is not a packed contraction."""
        from .c_packed import packable_types, packed_helper
        calls = [x for x in walk(n.body) if isinstance(x, Call)]
        names = {c.statement for c in calls}
        if len(names) != 1:
            return None
        plan = self.plans.get(names.pop())
        # The outermost packed loop isl generated: the packed loops outside it, if any, take one
        # value here (isl drops such loops, e.g. for a size compiled in as 1), so every instance of
        # the statement at this point is below it.
        if plan is None or n.dim.name not in plan.loops or not packable_types(plan, self.program, self.typing):
            return None
        zero_init = plan.statement in self.zero_inits
        st = self.statements[plan.statement]
        inner = {x.iterator for x in walk(n) if isinstance(x, Loop)}
        # The batch iterators' values at this call (isl writes them in terms of outer loops).
        args = dict(zip(st.iterators, calls[0].args))
        if any(ids(args[b]) & inner for b in plan.contraction.batch):
            return None
        batch = [strip_parens(self._c(args[b])) for b in plan.contraction.batch]
        parallel = plan.m_block_loop in self.parallel_loops and not in_parallel
        symbol = f"{self.signature.symbol}_{ascii_spelling(plan.statement)}_packed{'_par' if parallel else ''}"
        if not any(h.startswith(f"/* {symbol} */") for h in self.helpers):
            params, prologue = self.parameters()
            self.helpers.append(f"/* {symbol} */\n" + packed_helper(
                plan, self.program, self.typing, symbol, [str(p.inline()) for p in params],
                [str(line) for line in prologue], parallel, _array_access, self.names, zero_init=zero_init))
        call_args = self._call_arguments() + batch
        self._folding.setdefault(plan.statement, True)
        fallback_of, self._fallback_of = self._fallback_of, plan.statement
        try:
            fallback = c.Block(self.node(n, in_parallel, packed=False))
        finally:
            self._fallback_of = fallback_of
        return [c.If(f"!{symbol}({', '.join(call_args)})", fallback)]

    def _deferred_init(self, n: Node, in_parallel: bool) -> Optional[List]:
        """The nest `n` wrapped in `Deferred` when every statement in it is a zeroing statement a
        packed helper folds in (`zero_inits`); None otherwise."""
        if self._deferring or not self.zero_inits:
            return None
        inside = {x.statement for x in walk(n) if isinstance(x, Call)}
        folders = [st for st, init in self.zero_inits.items() if init in inside]
        if not inside or not inside <= set(self.zero_inits.values()):
            return None
        self._deferring = True
        try:
            items = self.node(n, in_parallel)
        finally:
            self._deferring = False
        return [Deferred(items, lambda: all(self._folding.get(st) for st in folders))]

    def node(self, n: Node, in_parallel: bool, packed: bool = True) -> List:
        if isinstance(n, Block):
            out: List = []
            for ch in n.children:
                out.extend(self.node(ch, in_parallel))
            return out
        if isinstance(n, Guard):
            then = c.Block(self.node(n.then, in_parallel))
            orelse = c.Block(self.node(n.orelse, in_parallel)) if n.orelse is not None else None
            return [c.If(strip_parens(self._c(n.cond)), then, orelse)]
        if isinstance(n, (Loop, Call)):
            deferred = self._deferred_init(n, in_parallel)
            if deferred is not None:
                return deferred
        if isinstance(n, Loop):
            dim = n.dim if n.dim is not None else Dim("_")
            is_parallel, is_vector = dim.runs(LoopKind.PARALLEL), dim.runs(LoopKind.VECTORIZED)
            if packed and dim.name in self.packed_loops:
                call = self._packed(n, in_parallel)
                if call is not None:
                    return call
            reduction_here = is_parallel and dim.reduction and not in_parallel
            if not self._accs and (reduction_here or (is_vector and dim.reduction)):
                opened = self._accumulated(n, is_vector, in_parallel, reduction_here)
                if opened is not None:
                    return opened
            racing = self._racing
            if reduction_here:
                shared = self._shared(n)
                private = private_copies(shared, self._statements_in(n))
                if private:
                    return self._privately_reduced(n, private)
                racing = racing | shared
            pragmas = []
            parallel_pragma = None
            plain_simd = False      # an `omp simd` loop of its own: alignment peeling may split it
            # "reduction_parallel" without an accumulator: iterations race only on reduction
            # updates, made atomic below.
            parallel_here = is_parallel and not in_parallel
            # At most one pragma may precede a for (gcc rejects `omp simd` after `omp parallel for`
            # and `GCC unroll` next to any OpenMP loop pragma); SIMD is dropped where updates are
            # atomic (a reduction-parallel region), the unroll hint where OpenMP takes the loop.
            simd = is_vector and not dim.reduction and not (self._atomic_depth or reduction_here)
            if is_vector and self._accs:
                pragmas.append(c.Pragma("omp simd " + " ".join(dict.fromkeys(a.clauses for a in self._accs.values()))))
            elif parallel_here:
                parallel_pragma = "omp parallel for" + (" simd" if simd else "") + " " + omp_schedule(n, self._c)
            elif simd:
                pragmas.append(c.Pragma("omp simd"))
                plain_simd = True
            elif not dim.unroll.is_none:  # a full unroll isl could not write out: the compiler's turn
                pragmas.append(c.Pragma(f"GCC unroll {dim.unroll.hint or 64}"))
            if parallel_here and not simd and not reduction_here:
                private = self.private_temporaries.get(dim.name)
                if private:
                    return self._private_temporaries(n, private)
            self._atomic_depth += reduction_here
            it = self.names.id(n.iterator)
            self._scope.append(it)
            outer_racing, self._racing = self._racing, racing
            try:
                if parallel_here and not simd and not reduction_here:
                    body = c.Block([self._outlined(n)])
                else:
                    body = c.Block(self.node(n.body, in_parallel or parallel_here))
            finally:
                self._atomic_depth -= reduction_here
                self._racing = outer_racing
                self._scope.pop()
            if parallel_pragma is not None:
                return guarded_parallel(parallel_condition(n, self.statements, self._c), parallel_pragma,
                                        "omp simd" if simd else None, self._for(n, body))
            if plain_simd:
                return self._vector_for(n, body, pragmas)
            return pragmas + [self._for(n, body)]
        if isinstance(n, Call):
            if n.statement in self.zero_inits and self._fallback_of != n.statement:
                self._folding[n.statement] = False    # runs outside its packed helper: keep its zeroing
            st = self.statements[n.statement]
            index_text = {it: strip_parens(self._c(a)) for it, a in zip(st.iterators, n.args)}
            printer = CExprPrinter(self.typing, index_text, self._access, self.names)
            line = c.Line(printer.statement(st))
            acc = self._accs.get(n)
            if acc is not None:
                return [c.Line(acc.update_line(printer.expr(st.value, self.typing.tensors[st.target.tensor])))]
            if st.update and self._atomic_depth and st.target.tensor in self._racing:
                return [c.Pragma("omp atomic" if st.update in ("+", "*") else "omp critical"), line]
            return [line]
        raise TypeError(n)

    def _for(self, n: Loop, body) -> c.For:
        it = self.names.id(n.iterator)
        return c.For(f"int64_t {it} = {strip_parens(self._c(n.init))}", strip_parens(self._c(n.cond)),
                     f"{it} += {n.step}" if n.step != 1 else f"{it}++", body)

    def _vector_for(self, n: Loop, body, pragmas: List) -> List:
        """Vector loop `n` under `pragmas`, peeled so that its vector part starts on a cache line of
        its anchor array where it reads whole rows (`c_align.peeled_loop`); else as it is."""
        return c_align.peeled_loop(self, n, body, pragmas) or pragmas + [self._for(n, body)]

    def _accumulated(self, n: Loop, is_vector: bool, in_parallel: bool, reduction_here: bool) -> Optional[List]:
        """Loop `n` with its reductions' target elements held in scalar accumulators reduced by
        OpenMP (`c_omp.Accumulator`): `omp simd reduction(...)` for a "reduction_vector" loop (its
        body: statements, the reductions among them accumulated, the others as they are),
        `omp parallel for reduction(...)` (with `if()`) for a "reduction_parallel" one (a perfect
        nest around one reduction).  None when that shape is not there or a target element moves
        along the loops (the caller then emits the loop in order, or with atomic updates)."""
        loops = {x.iterator for x in walk(n) if isinstance(x, Loop)}
        if reduction_here:
            call = single_call(n.body)
            calls = [call] if call is not None else []
        else:
            body = flat_block(n.body)
            calls = list(body) if all(isinstance(x, Call) for x in body) else []
        if not calls:
            return None
        # One accumulator per target element: the unrolled copies of a statement (rows jammed into
        # the loop) each update their own element; updates of one element share its accumulator.
        by_target: Dict[str, Accumulator] = {}
        accs: Dict[Call, Accumulator] = {}
        targets: Dict[str, str] = {}   # accumulator name -> the target element's C text
        for call in calls:
            st = self.statements[call.statement]
            dtype = self.typing.tensors[st.target.tensor]
            varying = {i for i, a in zip(st.iterators, call.args) if ids(a) & loops}
            if st.update not in OMP_OPERATOR or any(set(e.variables) & varying for e in st.target.indices) \
                    or any(a.tensor == st.target.tensor for a in st.value.accesses()) \
                    or self.typing.converts_each_step(st):       # rounds every step: in order
                continue
            if st.target.tensor in self._racing and not reduction_here:
                continue      # other threads update the element too: each update stays atomic
            if dtype.name not in ACCUMULATOR_TYPES:
                return None
            # The target's subscripts only use iterators fixed outside `n`.
            index_text = {i: strip_parens(self._c(a)) for i, a in zip(st.iterators, call.args) if i not in varying}
            target = CExprPrinter(self.typing, index_text, self._access, self.names).access(st.target)
            acc = by_target.get(target)
            if acc is None:
                name = "pc_acc" if not by_target else f"pc_acc{len(by_target)}"
                acc = by_target[target] = Accumulator(st.name, dtype.c_name, st.update,
                                                      dtype.name in ("f32", "f64") and st.update in ("max", "min"), name)
                targets[acc.name] = target
            elif acc.update != st.update or acc.ctype != dtype.c_name:
                return None   # one element reduced by two operators: keep the written order
            accs[call] = acc
        if not accs:
            return None   # nothing to hold (e.g. every update is atomic): the caller emits the loop in order
        # Another statement of the loop touching an accumulated tensor would see a stale element.
        held = {self.statements[k.statement].target.tensor for k in accs}
        for call in calls:
            st = self.statements[call.statement]
            if call not in accs and held & ({st.target.tensor} | {a.tensor for a in st.value.accesses()}):
                return None
        unique = list(by_target.values())
        clauses = " ".join(a.clauses for a in unique)
        simd = is_vector
        if reduction_here:
            pragma = "omp parallel for" + (" simd" if simd else "") + f" {clauses} schedule(static)"
        else:
            pragma = f"omp simd {clauses}".rstrip()
        self._accs = accs
        self._scope.append(self.names.id(n.iterator))
        try:
            body = c.Block(self.node(n.body, in_parallel or reduction_here))
        finally:
            self._accs = {}
            self._scope.pop()
        if reduction_here:
            # The serial copy keeps the accumulator (and SIMD with its reduction clauses).
            looped = guarded_parallel(parallel_condition(n, self.statements, self._c), pragma,
                                      f"omp simd {clauses}" if simd else None, self._for(n, body))
        else:
            looped = self._vector_for(n, body, [c.Pragma(pragma)])
        lines = [c.Line(x) for a in unique for x in a.opening(targets[a.name])]
        lines += looped + [c.Line(a.closing(targets[a.name])) for a in unique]
        return [c.Block(lines)] if accs else looped

    def _c(self, e) -> str:
        """C text of a loop-AST expression, its ids spelled as C identifiers."""
        return c_text(e, self.names.id)

    def _outlined(self, n: Loop, arguments: Optional[Dict[str, str]] = None):
        """The body of parallel loop `n` as a call of a static helper taking the arrays as restrict
        parameters (and the enclosing iterators): OpenMP hands an outlined loop body its arrays
        through a struct, which loses `restrict`; gcc keeps it for an inlined helper's parameters,
        so accumulators stay in registers and inner loops vectorise as in sequential code.
        `arguments` replaces some of the kernel's parameters in the call (a thread's private copy)."""
        name = self._helper(n)
        call = [(arguments or {}).get(a, a) for a in self._call_arguments()] + list(self._scope)
        return c.Statement(f"{name}({', '.join(call)})")

    def _helper(self, n: Loop) -> str:
        """The name of a new static helper running one iteration of loop `n` (see `_outlined`)."""
        name = f"{self.signature.symbol}_loop{sum(h.startswith('/* loop') for h in self.helpers)}"
        params, prologue = self.parameters()
        scope = list(self._scope)
        body = self._with_row_buffers(n)
        fn = c.FunctionBody(
            c.FunctionDeclaration(c.Value("static void", name), params + [c.Value("int64_t", v) for v in scope]),
            c.Block(prologue + body))
        self.helpers.append(f"/* loop {name} */\n{fn}")
        return name

    def _shared(self, n: Loop) -> frozenset:
        """Tensors that several iterations of reduction-parallel loop `n` update at one element."""
        known = self.shared_reductions.get(n.dim.name if n.dim is not None else "")
        if known is not None:
            return known
        return frozenset(st.target.tensor for st in self._statements_in(n) if st.update)

    def _statements_in(self, n: Node) -> List:
        return [self.statements[x.statement] for x in walk(n) if isinstance(x, Call)]

    def _size_text(self, t: str) -> str:
        printer = CExprPrinter(self.typing, {}, _array_access, self.names)
        return " * ".join(f"({strip_parens(printer.affine(x))})" for x in self.program.tensor(t).shape or ()) or "1"

    def _privately_reduced(self, n: Loop, private: frozenset) -> List:
        """Reduction-parallel loop `n` with each thread updating a private copy of the tensors
        `private` (on its stack, starting at the update's identity) and adding it to the tensor
        once at the end, one thread at a time: per-thread partials instead of an atomic update per
        element.  The copies are used when every one holds at most `PRIVATE_COPY_BYTES` and the loop
        does enough work to go parallel; otherwise the loop runs on the calling thread."""
        params = {p.name: p.c_name for p in self.signature.params if p.kind == "array"}
        ops = {self.statements[x.statement].target.tensor: self.statements[x.statement].update
               for x in walk(n) if isinstance(x, Call)}
        fits, setup, combine, copies = [], [], [], {}
        e = "pc_e"
        for t in sorted(private):
            ctype = self.typing.tensors[t].c_name
            size = self._size_text(t)
            copy = f"pc_private_{mangle(TENSOR, t)}"
            copies[params[t]] = copy
            identity = "0" if ops[t] == "+" else "1"
            fits.append(f"({size}) <= {PRIVATE_COPY_BYTES} / (int64_t)sizeof({ctype})")
            setup += [c.Line(f"{ctype} {copy}[{size}];"),
                      c.For(f"int64_t {e} = 0", f"{e} < {size}", f"{e}++", c.Line(f"{copy}[{e}] = {identity};"))]
            combine.append(c.For(f"int64_t {e} = 0", f"{e} < {size}", f"{e}++",
                                 c.Line(f"{params[t]}[{e}] {ops[t]}= {copy}[{e}];")))
        return self._region(n, copies, setup, [c.Pragma("omp critical"), c.Block(combine)], fits)

    def _private_temporaries(self, n: Loop, private: frozenset) -> List:
        """Parallel loop `n` with each thread keeping its own copy of the intermediates `private`
        (`storage.private_temporaries`: the loop reuses them, no value crosses iterations) on its
        stack, when each holds at most `PRIVATE_COPY_BYTES`; otherwise the loop runs on the calling
        thread with the tensors themselves."""
        params = {p.name: p.c_name for p in self.signature.params if p.kind == "array"}
        setup, fits, copies = [], [], {}
        for t in sorted(private):
            ctype = self.typing.tensors[t].c_name
            copy = f"pc_private_{mangle(TENSOR, t)}"
            copies[params[t]] = copy
            size = self._size_text(t)
            fits.append(f"({size}) <= {PRIVATE_COPY_BYTES} / (int64_t)sizeof({ctype})")
            setup.append(c.Line(f"{ctype} {copy}[{size}];"))
        return self._region(n, copies, setup, [], fits)

    def _region(self, n: Loop, copies: Dict[str, str], setup: List, finish: List, fits: List[str]) -> List:
        """`#pragma omp parallel` around `setup`, the iterations of `n` shared out (`omp for`) as
        calls of its outlined body with the kernel's arrays `copies` replaced by each thread's
        copies, then `finish`; when the loop does too little work or `fits` fails, the loop on the
        calling thread with the arrays themselves."""
        it = self.names.id(n.iterator)
        self._scope.append(it)
        try:
            name = self._helper(n)
        finally:
            self._scope.pop()
        scope = list(self._scope) + [it]
        args = self._call_arguments()

        def loop(replace) -> c.For:
            return self._for(n, c.Block([c.Statement(f"{name}({', '.join([replace.get(a, a) for a in args] + scope)})")]))
        region = c.Block(setup + [c.Pragma("omp for " + omp_schedule(n, self._c)), loop(copies)] + finish)
        condition = parallel_condition(n, self.statements, self._c)
        when = " && ".join(([f"({condition})"] if condition else []) + fits)
        if not when:
            return [c.Pragma("omp parallel"), region]
        return [c.If(when, c.Block([c.Pragma("omp parallel"), region]), c.Block([loop({})]))]

    def _access(self, acc: Access, printer: CExprPrinter) -> str:
        """An array element in C; a tensor held in a row buffer is indexed along its other dimension."""
        d = self._rows.get(acc.tensor)
        if d is None:
            return _array_access(acc, printer)
        return f"{ROW_BUFFER}{mangle(TENSOR, acc.tensor)}[{printer.affine(acc.indices[1 - d])}]"

    def _with_row_buffers(self, n: Loop) -> List:
        """The body of parallel loop `n`; where intermediates live inside one of its iterations
        (`row_buffers`), each iteration keeps their row in a stack buffer of its own (read and
        written in L1 instead of a full temporary in memory), when the row is at most
        `ROW_BUFFER_BYTES`; longer rows use the full temporary, as before."""
        full = self.node(n.body, True)
        packed = {plan.statement for plan in self.plans.values()}
        touched = set()
        for call in (x for x in walk(n.body) if isinstance(x, Call)):
            st = self.statements[call.statement]
            touched |= {st.target.tensor} | {a.tensor for a in st.value.accesses()}
        rows = {t: d for t, (d, loop) in self.row_buffers.items()
                if t in touched and n.dim is not None and loop == n.dim.name
                and len(self.program.tensor(t).shape or ()) == 2
                and not any(self.statements[s].target.tensor == t or t in {a.tensor for a in self.statements[s].value.accesses()}
                            for s in packed)}
        if not rows:
            return full
        self._rows = rows
        try:
            local = self.node(n.body, True)
        finally:
            self._rows = {}
        printer = CExprPrinter(self.typing, {}, _array_access, self.names)
        decls, fits = [], []
        for t, d in sorted(rows.items()):
            ctype = self.typing.tensors[t].c_name
            extent = strip_parens(printer.affine(self.program.tensor(t).shape[1 - d]))
            decls.append(c.Line(f"{ctype} {ROW_BUFFER}{mangle(TENSOR, t)}[{extent}];"))
            fits.append(f"({extent}) >= 1 && ({extent}) <= {ROW_BUFFER_BYTES} / (int64_t)sizeof({ctype})")
        return [c.If(" && ".join(fits), c.Block(decls + local), c.Block(full))]

    def _call_arguments(self) -> List[str]:
        """The kernel function's own parameters, passed on to a helper."""
        return [self.names.given(p.name) if p.kind == "size" and p.name in self.fixed_sizes
                else p.c_name for p in self.signature.params]

    def parameters(self):
        """The kernel function's C parameters and the prologue that re-types array pointers."""
        params = []
        # A specialised size keeps its place among the parameters (the caller passes it as always)
        # but is a compile-time constant inside.
        names = self.names
        prologue: List = [c.Line(f"const int64_t {names.size(k)} = {v}; (void){names.given(k)};")
                          for k, v in sorted(self.fixed_sizes.items())]
        sizes = CExprPrinter(self.typing, {}, _array_access, names)   # `affine` spells sizes plainly
        for (value, dtype), var in names.float_sizes.items():
            ctype = DTYPES[dtype].c_name
            prologue.append(c.Line(f"const {ctype} {var} = ({ctype})({sizes.affine(value)}); (void){var};"))
        for p in self.signature.params:
            if p.kind == "array":
                t = self.program.tensor(p.name)
                ctype = p.dtype.c_name
                view = names.tensor(p.name)
                params.append(c.Value(f"{ctype} *restrict", p.c_name))
                shape = t.shape or ()
                if len(shape) <= 1:
                    prologue.append(c.Line(f"{ctype} *restrict {view} = {p.c_name};"))
                else:
                    printer = CExprPrinter(self.typing, {}, _array_access, names)
                    tail = "".join(f"[{printer.affine(e)}]" for e in shape[1:])
                    prologue.append(c.Line(f"{ctype} (*restrict {view}){tail} = ({ctype} (*){tail}) {p.c_name};"))
            elif p.kind == "size" and p.name in self.fixed_sizes:
                params.append(c.Value(p.dtype.c_name, names.given(p.name)))
            else:
                params.append(c.Value(p.dtype.c_name, p.c_name))
        return params, prologue

    def function(self, loops: Node, signature: KernelSignature) -> str:
        self.signature = signature
        params, prologue = self.parameters()
        body = prologue + self.node(loops, False)
        fn = c.FunctionBody(c.FunctionDeclaration(c.Value("void", signature.symbol), params), c.Block(body))
        helpers = "".join(h + "\n\n" for h in self.helpers)
        extra = PACKED_PREAMBLE if self.helpers else ""
        return PREAMBLE + vector_math_declarations(self.program) + extra + "\n" + helpers + str(fn) + "\n"


def generate_c(schedule: Schedule, typing: Typing, fixed_sizes: Optional[dict] = None) -> GeneratedC:
    """C source and its signature for `schedule` of a kernel, specialised to `typing` and, when
    given, to the values of some sizes (`fixed_sizes`; the function still takes every size, and the
    caller must pass those values)."""
    program = schedule.model.program
    signature = kernel_signature(program, typing)
    loops = build_loop_ast(schedule, fixed_sizes)
    from ..schedule.packing import packing_plans
    plans = packing_plans(schedule)
    parallel = frozenset(d.name for d in schedule.dims if d.is_loop and d.runs(LoopKind.PARALLEL))
    from ..schedule.storage import storage_plan
    storage = storage_plan(schedule)
    names = dataclasses.replace(CNames.for_program(program, schedule), float_sizes=float_sizes(program, typing))
    from .c_packed import packable_types
    from .c_packed_init import zero_inits
    inits = zero_inits(schedule, plans, lambda plan: packable_types(plan, program, typing))
    emitter = _Emitter(program, typing, names, plans, parallel, fixed_sizes,
                       {t: (d, loop) for t, d, loop in storage.row_buffers},
                       {loop: None if ts is None else frozenset(ts) for loop, ts in storage.reductions},
                       {loop: frozenset(ts) for loop, ts in storage.private}, inits)
    return GeneratedC(emitter.function(loops, signature), signature)

