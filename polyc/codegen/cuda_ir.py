"""The GPU program: host control (loops, guards, launches) around kernels, built from the loop AST.

This is the single intermediate form both the CUDA source and its CPU emulation are printed from,
so they execute the same index arithmetic and guards.  The rules:

- A loop marked "block" or "thread", or any subtree without mapped loops, starts a kernel; an
  unmapped loop or guard that encloses mapped loops stays on the host (evaluated in Python) and
  passes its iterators to the kernels inside as `int64_t` arguments.
- In a kernel, *uniform* code (the same for every thread of a block: block loops, serial loops and
  guards that enclose thread loops) runs on all threads; everything at or below a thread loop, and
  any statement outside thread loops, sits in a `Region` that each thread runs (a statement outside
  thread loops runs on thread 0 only).  Consecutive regions are separated by barriers.
- A block loop becomes a grid-stride loop, a thread loop a block-stride loop: correct for any
  launch size, so the launch extents computed here (with isl, from the schedule) only set speed.
- A thread loop also marked "reduction_parallel" (one statement reducing along it) becomes a
  `Reduce`: strided partial results per thread, then a tree over shared memory (fixed 256 threads).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import islpy as isl

from ..errors import IllegalScheduleError, PolycError
from ..ir import Access, Program
from ..poly.islutil import isl_budget, isl_name
from ..schedule.schedule import LoopKind, Schedule
from .cuda_races import RaceCheck, statements_of
from .loop_ast import Block, Call, Guard, LExpr, Loop, Node, build_loop_ast, lexpr, strip_parens, walk

# -- kernel-side nodes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mapped:
    """A block- or thread-mapped loop: `kind` "block"/"thread", `axis` 0 (x), 1 (y) or 2 (z)."""

    kind: str
    axis: int
    loop: Loop
    body: "KNode"


@dataclass(frozen=True)
class ULoop:
    """A uniform serial loop (same trip count on every thread of a block); `sync`: barrier at the end."""

    loop: Loop
    body: "KNode"
    sync: bool


@dataclass(frozen=True)
class UGuard:
    cond: LExpr
    then: "KNode"
    orelse: Optional["KNode"]


@dataclass(frozen=True)
class USeq:
    children: Tuple["KNode", ...]


@dataclass(frozen=True)
class Region:
    """Per-thread code: `body` is loop AST (thread loops inside are `Mapped`); `single`: thread 0 only."""

    body: "KNode"
    single: bool


@dataclass(frozen=True)
class Barrier:
    pass


@dataclass(frozen=True)
class Reduce:
    """A reduction loop spread over the threads of a block (axis x), then tree-reduced.

    Each thread folds its strided share of `loop` into a partial value, the partials meet in
    shared memory `scratch` (one per thread), are combined pairwise over log2(threads) barrier
    steps, and thread 0 folds the result into the statement's target.  The printers expand it.
    """

    loop: Loop
    call: Call
    scratch: str


@dataclass(frozen=True)
class Raw:
    """Per-thread code lines of specialised kernels (e.g. the tiled contraction).

    Tokens the printers replace: `$tid` (thread index along x), `$bx`/`$by`/`$bz` (block index),
    `$gx`/`$gy`/`$gz` (grid extent); a kernel's private arrays are indexed per thread in emulation.
    """

    lines: Tuple[str, ...]


KNode = Union[Mapped, ULoop, UGuard, USeq, Region, Barrier, Raw, "IdxGuard", Reduce, Loop, Guard, Block, Call]

#: Threads per block of kernels with tree reductions (a power of two).
REDUCE_THREADS = 256


@dataclass(frozen=True)
class GPUKernel:
    """One `__global__` function.

    - `symbol`: its name; `host_iterators`: host loop iterators passed after the program's params;
    - `grid`/`block`: extents (x, y, z) as expressions of sizes and host iterators (None = 1);
    - `shared`/`private`: arrays (name, C type, extents) in shared memory / per thread (registers);
      per-thread arrays outlive regions, so the emulator keeps one copy per thread;
    - `statements`: the statements it runs; `fixed_block`: the code relies on exactly `block` threads.
    """

    symbol: str
    body: KNode
    host_iterators: Tuple[str, ...]
    grid: Tuple[Optional[LExpr], Optional[LExpr], Optional[LExpr]]
    block: Tuple[Optional[LExpr], Optional[LExpr], Optional[LExpr]]
    statements: Tuple[str, ...] = ()
    shared: Tuple[Tuple[str, str, Tuple[int, ...]], ...] = ()
    private: Tuple[Tuple[str, str, Tuple[int, ...]], ...] = ()
    fixed_block: bool = False
    min_blocks: int = 0         # `__launch_bounds__` occupancy hint for fixed-block kernels


# -- host-side nodes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostLoop:
    iterator: str
    init: LExpr
    cond: LExpr
    step: int
    body: "HNode"


@dataclass(frozen=True)
class HostGuard:
    cond: LExpr
    then: "HNode"
    orelse: Optional["HNode"]


@dataclass(frozen=True)
class HostSeq:
    children: Tuple["HNode", ...]


@dataclass(frozen=True)
class Launch:
    kernel: int


HNode = Union[HostLoop, HostGuard, HostSeq, Launch]


@dataclass(frozen=True)
class GPUProgram:
    host: HNode
    kernels: Tuple[GPUKernel, ...]


# -- analysis helpers ---------------------------------------------------------------------------------

def _tree_reduced(loop: Loop) -> bool:
    """A loop that reassociates a reduction across its parallel iterations (a thread loop: tree)."""
    return loop.dim is not None and loop.dim.reduction and loop.dim.runs(LoopKind.PARALLEL)


def _mapped_kind(loop: Loop) -> Optional[str]:
    kinds = loop.dim.kinds if loop.dim is not None else frozenset()
    if LoopKind.GPU_BLOCK in kinds:
        return "block"
    if LoopKind.GPU_THREAD in kinds:
        return "thread"
    return None


def contains_mapped(n: Node, kinds: Tuple[str, ...] = ("block", "thread")) -> bool:
    if isinstance(n, Loop):
        return _mapped_kind(n) in kinds or contains_mapped(n.body, kinds)
    if isinstance(n, Guard):
        return contains_mapped(n.then, kinds) or (n.orelse is not None and contains_mapped(n.orelse, kinds))
    if isinstance(n, Block):
        return any(contains_mapped(c, kinds) for c in n.children)
    return False


def statements_in(n: Node) -> List[str]:
    return [x.statement for x in walk(n) if isinstance(x, Call)]


def _mapped_dims(n: Node, kind: str, out: List[str]) -> List[str]:
    """Iterator names of `kind`-mapped loops, outermost first (each name once)."""
    if isinstance(n, Loop):
        if _mapped_kind(n) == kind and n.iterator not in out:
            out.append(n.iterator)
        _mapped_dims(n.body, kind, out)
    elif isinstance(n, Guard):
        _mapped_dims(n.then, kind, out)
        if n.orelse is not None:
            _mapped_dims(n.orelse, kind, out)
    elif isinstance(n, Block):
        for c in n.children:
            _mapped_dims(c, kind, out)
    return out


# -- building kernels -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class IdxGuard:
    """Run `body` only where `blockIdx`/`threadIdx` (`kind` "block"/"thread") is 0 on `axes`.

    A statement that no loop of some grid axis encloses must run once, not once per index there.
    """

    kind: str
    axes: Tuple[int, ...]
    body: "KNode"


@dataclass(frozen=True)
class IdxGuardU:
    """Uniform code run only by the blocks whose index is 0 on `axes` (like `IdxGuard`)."""

    kind: str
    axes: Tuple[int, ...]
    body: "KNode"


class _KernelBuilder:
    """Converts one kernel's loop AST; mapped loops get axes by nesting depth (innermost -> x)."""

    def __init__(self, n_block_axes: int, n_thread_axes: int, races: Optional["RaceCheck"] = None):
        self.n_block = n_block_axes
        self.n_thread = n_thread_axes
        self.races = races
        self.block_loops: List[Tuple[str, int]] = []    # (iterator, axis)
        self.thread_loops: List[Tuple[str, int]] = []
        self.reductions: List[Reduce] = []

    def _call(self, n: Call, blocks: Tuple[int, ...], threads: Tuple[int, ...]) -> KNode:
        out: KNode = n
        missing_t = tuple(a for a in range(self.n_thread) if a not in threads)
        if missing_t:
            out = IdxGuard("thread", missing_t, out)
        missing_b = tuple(a for a in range(self.n_block) if a not in blocks)
        if missing_b:
            out = IdxGuard("block", missing_b, out)
        return out

    def uniform(self, n: Node, blocks: Tuple[int, ...] = ()) -> KNode:
        """Convert code that every thread of a block runs in lockstep (no thread loop above)."""
        if isinstance(n, Loop):
            kind = _mapped_kind(n)
            if kind == "block":
                axis = self.n_block - 1 - len(blocks)
                self.block_loops.append((n.iterator, axis))
                return Mapped("block", axis, n, self.uniform(n.body, blocks + (axis,)))
            if kind == "thread" and _tree_reduced(n):
                if self.n_thread == 1 and isinstance(n.body, Call):
                    red = Reduce(n, n.body, f"pc_red{len(self.reductions)}")
                    self.reductions.append(red)
                    self.thread_loops.append((n.iterator, 0))
                    if self.n_block and len(blocks) < self.n_block:
                        return IdxGuardU("block", tuple(a for a in range(self.n_block) if a not in blocks), red)
                    return red
                return Region(self.threaded(_unmapped(n), blocks, ()), single=True)
            if kind == "thread":
                return Region(self.threaded(n, blocks, ()), single=False)
            if contains_mapped(n.body, ("block",)):
                raise PolycError(f"block-mapped loop(s) {', '.join(_mapped_dims(n.body, 'block', []))} "
                                 f"sit inside the serial loop {n.iterator!r} of the same kernel; blocks "
                                 f"cannot synchronise, so map {n.iterator!r} to blocks too or move it "
                                 f"outside (it then runs on the host)")
            if contains_mapped(n.body, ("thread",)):
                return ULoop(n, self.uniform(n.body, blocks), sync=True)
            return Region(self.threaded(n, blocks, ()), single=True)
        if isinstance(n, Guard):
            if contains_mapped(n, ("block", "thread")):
                orelse = self.uniform(n.orelse, blocks) if n.orelse is not None else None
                return UGuard(n.cond, self.uniform(n.then, blocks), orelse)
            return Region(self.threaded(n, blocks, ()), single=True)
        if isinstance(n, Block):
            if self.races is not None:
                inner = [v for c in n.children for v in _mapped_dims(c, "block", [])]
                self.races.between(statements_of(n.children), inner, "block")
            kids = [self.uniform(c, blocks) for c in n.children]
            out: List[KNode] = []
            for k in kids:
                if out and _has_region(out[-1]) and _has_region(k):
                    out.append(Barrier())
                out.append(k)
            return USeq(tuple(out))
        if isinstance(n, Call):
            return Region(self._call(n, blocks, ()), single=True)
        raise TypeError(n)

    def threaded(self, n: Node, blocks: Tuple[int, ...], threads: Tuple[int, ...]) -> KNode:
        """Convert per-thread code: thread loops become `Mapped`, the rest stays loop AST."""
        if isinstance(n, Loop):
            kind = _mapped_kind(n)
            if kind == "block":
                raise IllegalScheduleError(f"the schedule is refused: loop {n.iterator!r} is mapped to blocks but "
                                           f"sits inside a thread-mapped or serial in-kernel loop; block loops must "
                                           f"enclose thread loops")
            if kind == "thread" and _tree_reduced(n):
                return self.threaded(_unmapped(n), blocks, threads)   # inside a thread: serial
            if kind == "thread":
                axis = self.n_thread - 1 - len(threads)
                self.thread_loops.append((n.iterator, axis))
                return Mapped("thread", axis, n, self.threaded(n.body, blocks, threads + (axis,)))
            if threads and self.races is not None:
                self.races.within(statements_in(n), _mapped_dims(n.body, "thread", []), n.iterator)
            return Loop(n.iterator, n.init, n.cond, n.step, self.threaded(n.body, blocks, threads), n.dim)  # type: ignore[arg-type]
        if isinstance(n, Guard):
            orelse = self.threaded(n.orelse, blocks, threads) if n.orelse is not None else None
            return Guard(n.cond, self.threaded(n.then, blocks, threads), orelse)  # type: ignore[arg-type]
        if isinstance(n, Block):
            if threads and self.races is not None:
                inner = [v for c in n.children for v in _mapped_dims(c, "thread", [])]
                self.races.between(statements_of(n.children), inner, "thread")
            return Block(tuple(self.threaded(c, blocks, threads) for c in n.children))  # type: ignore[arg-type]
        if isinstance(n, Call):
            return self._call(n, blocks, threads)
        raise TypeError(n)


def _unmapped(loop: Loop) -> Loop:
    """The loop without GPU marks (a reduction that cannot be tree-reduced runs serially)."""
    kinds = loop.dim.kinds - {LoopKind.GPU_THREAD, LoopKind.GPU_BLOCK, LoopKind.PARALLEL} if loop.dim else frozenset()
    dim = replace(loop.dim, kinds=kinds, reduction=loop.dim.reduction and bool(kinds)) if loop.dim else None
    return Loop(loop.iterator, loop.init, loop.cond, loop.step, loop.body, dim)


def mapped_depth(n: Node, kind: str) -> int:
    """The largest number of nested `kind`-mapped loops on a path of `n`."""
    if isinstance(n, Loop):
        return (_mapped_kind(n) == kind) + mapped_depth(n.body, kind)
    if isinstance(n, Guard):
        return max(mapped_depth(n.then, kind), mapped_depth(n.orelse, kind) if n.orelse is not None else 0)
    if isinstance(n, Block):
        return max((mapped_depth(c, kind) for c in n.children), default=0)
    return 0


def _has_region(n: KNode) -> bool:
    if isinstance(n, (Region, Reduce)):
        return True
    if isinstance(n, IdxGuardU):
        return _has_region(n.body)
    if isinstance(n, (Mapped, ULoop)):
        return _has_region(n.body)
    if isinstance(n, UGuard):
        return _has_region(n.then) or (n.orelse is not None and _has_region(n.orelse))
    if isinstance(n, USeq):
        return any(_has_region(c) for c in n.children)
    return False


# -- launch extents from isl ------------------------------------------------------------------------------

class _Extents:
    """Extents of schedule dimensions over a kernel's statements, as expressions of sizes and
    host iterators (isl: project the scheduled domain, treat host dims as parameters)."""

    def __init__(self, schedule: Schedule):
        self.schedule = schedule
        self.names = list(schedule.iterator_names())

    def extent(self, statements: Sequence[str], dim_name: str, host: Sequence[str]) -> Optional[LExpr]:
        sched = self.schedule
        model = sched.model
        k = self.names.index(dim_name)
        host_idx = [self.names.index(h) for h in host]
        with isl_budget(f"computing the launch size of loop {dim_name!r}"):
            rng: Optional[isl.Set] = None
            for st in dict.fromkeys(statements):
                m = sched.statement_map(st).intersect_domain(model.domains[st])
                r = m.range()
                rng = r if rng is None else rng.union(r)
            if rng is None:
                return None
            keep = host_idx + [k]
            n = rng.dim(isl.dim_type.set)
            # Project everything but host dims and k; then host dims become parameters.
            for d in reversed(range(n)):
                if d not in keep:
                    rng = rng.project_out(isl.dim_type.set, d, 1)
            for j, h in enumerate(host):
                rng = rng.set_dim_name(isl.dim_type.set, j, h)
            nparam = rng.dim(isl.dim_type.param)
            rng = rng.move_dims(isl.dim_type.param, nparam, isl.dim_type.set, 0, len(host))
            rng = rng.coalesce()
            if rng.is_empty():
                return None
            # A launch extent may be larger than the loop (mapped loops are stride loops that test
            # their bounds): drop the existentials of projected tiles and skews when that keeps it
            # bounded, since exact minima over them can cost isl minutes.
            loose = rng.remove_divs().coalesce()
            if loose.is_bounded():
                rng = loose
            lo = rng.dim_min(0)
            hi = rng.dim_max(0)
            ext = hi.sub(lo).add_constant_val(isl.Val.int_from_si(isl.DEFAULT_CONTEXT, 1))
            ctx = rng.params().intersect_params(model.codegen_context.align_params(rng.params().get_space()))
            ext = ext.gist_params(ctx).coalesce()
            build = isl.AstBuild.from_context(ctx)
            return lexpr(build.expr_from_pw_aff(ext))


# -- array indexing ------------------------------------------------------------------------------------

def flat_index(program: Program, acc: Access, printer) -> str:
    """Row-major offset of an access: `((i0) * S1 + (i1)) * S2 + (i2)`."""
    shape = program.tensor(acc.tensor).shape or ()
    text = ""
    for d, e in enumerate(acc.indices):
        idx = printer.affine(e)
        if d == 0:
            text = f"({idx})" if len(acc.indices) > 1 else idx
        else:
            text = f"({text} * ({printer.affine(shape[d])}) + ({idx}))"
    return strip_parens(text) if text else "0"


# -- the program builder ----------------------------------------------------------------------------------

def build_gpu_program(schedule: Schedule, symbol: str) -> GPUProgram:
    """Host tree and kernels for a mapped `schedule`; kernels are named `<symbol>_k<n>`."""
    root = build_loop_ast(schedule)
    kernels: List[GPUKernel] = []
    extents = _Extents(schedule)
    races = RaceCheck(schedule)

    def kernel(n: Node, host: Tuple[str, ...]) -> HNode:
        n_block, n_thread = mapped_depth(n, "block"), mapped_depth(n, "thread")
        for kind, depth in (("block", n_block), ("thread", n_thread)):
            if depth > 3:
                raise PolycError(f"{depth} nested loops are mapped to CUDA {kind}s "
                                 f"({', '.join(_mapped_dims(n, kind, []))}); at most 3 fit (x, y, z)")
        builder = _KernelBuilder(n_block, n_thread, races)
        body = builder.uniform(n)
        stmts = tuple(dict.fromkeys(statements_in(n)))
        grid: List[Optional[LExpr]] = [None, None, None]
        block: List[Optional[LExpr]] = [None, None, None]
        for loops, dims in ((builder.block_loops, grid), (builder.thread_loops, block)):
            for name, axis in dict.fromkeys(loops):
                e = extents.extent(stmts, name, host)
                if e is not None:
                    dims[axis] = e if dims[axis] is None else LExpr("max", (dims[axis], e))
        shared: Tuple[Tuple[str, str, Tuple[int, ...]], ...] = ()
        if builder.reductions:
            block = [LExpr("int", value=REDUCE_THREADS), None, None]
            shared = tuple((r.scratch, "", (REDUCE_THREADS,)) for r in builder.reductions)
        kernels.append(GPUKernel(f"{symbol}_k{len(kernels)}", body, host, tuple(grid), tuple(block),  # type: ignore[arg-type]
                                 statements=stmts, shared=shared, fixed_block=bool(builder.reductions)))
        return Launch(len(kernels) - 1)

    def host_node(n: Node, host: Tuple[str, ...]) -> HNode:
        if isinstance(n, Block):
            return HostSeq(tuple(host_node(c, host) for c in n.children))
        if isinstance(n, Loop) and _mapped_kind(n) is None and contains_mapped(n.body):
            return HostLoop(n.iterator, n.init, n.cond, n.step, host_node(n.body, host + (n.iterator,)))
        if isinstance(n, Guard) and contains_mapped(n):
            orelse = host_node(n.orelse, host) if n.orelse is not None else None
            return HostGuard(n.cond, host_node(n.then, host), orelse)
        return kernel(n, host)

    host = host_node(root, ())
    return GPUProgram(host, tuple(kernels))


# -- evaluating host expressions and launch sizes ---------------------------------------------------

def eval_lexpr(e: LExpr, env: Dict[str, int]) -> int:
    """The integer value of a loop-AST expression (isl's semantics: floord floors, `/` is exact)."""
    op = e.op
    if op == "int":
        return int(e.value)  # type: ignore[arg-type]
    if op == "id":
        return int(env[e.value])  # type: ignore[index]
    a = [eval_lexpr(x, env) for x in e.args] if op != "?" else []
    if op == "?":
        return eval_lexpr(e.args[1], env) if eval_lexpr(e.args[0], env) else eval_lexpr(e.args[2], env)
    if op == "+":
        return a[0] + a[1]
    if op == "-":
        return a[0] - a[1]
    if op == "*":
        return a[0] * a[1]
    if op == "neg":
        return -a[0]
    if op == "min":
        return min(a)
    if op == "max":
        return max(a)
    if op == "floord":
        return a[0] // a[1]
    if op == "/":      # exact or non-negative division in isl's AST; C truncates
        q = abs(a[0]) // abs(a[1])
        return q if (a[0] >= 0) == (a[1] > 0) else -q
    if op == "%":
        q = abs(a[0]) // abs(a[1])
        q = q if (a[0] >= 0) == (a[1] > 0) else -q
        return a[0] - q * a[1]
    if op == "&&":
        return int(bool(a[0]) and bool(a[1]))
    if op == "||":
        return int(bool(a[0]) or bool(a[1]))
    if op in _COMPARE:
        return int(_COMPARE[op](a[0], a[1]))
    raise PolycError(f"cannot evaluate loop expression operator {op!r}")


_COMPARE = {"==": lambda x, y: x == y, "<=": lambda x, y: x <= y, "<": lambda x, y: x < y,
            ">=": lambda x, y: x >= y, ">": lambda x, y: x > y}

#: CUDA limits: threads per block, and grid extents per axis (x, y, z).
MAX_THREADS = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2 ** 31 - 1, 65535, 65535)


def launch_dims(kernel: GPUKernel, env: Dict[str, int],
                max_threads: int = MAX_THREADS) -> Tuple[Tuple[int, int, int], Tuple[int, int, int]]:
    """(grid, block) for one launch: extents evaluated, clamped to [1, CUDA limit] (`max_threads`:
    the device's threads per block, `Target.max_threads_per_block`).

    Clamping is always safe: mapped loops are stride loops, so fewer blocks or threads than
    iterations only means more iterations each.  Kernels with `fixed_block` need their exact block.
    """
    grid = [1, 1, 1]
    block = [1, 1, 1]
    for axis in range(3):
        g = kernel.grid[axis]
        if g is not None:
            grid[axis] = max(1, min(MAX_GRID[axis], eval_lexpr(g, env)))
        b = kernel.block[axis]
        if b is not None:
            block[axis] = max(1, min(MAX_BLOCK[axis], eval_lexpr(b, env)))
    if not kernel.fixed_block:
        while block[0] * block[1] * block[2] > max_threads:
            big = max(range(3), key=lambda k: block[k] if k else block[k] // 4)
            block[big] = max(1, block[big] // 2)
    return (grid[0], grid[1], grid[2]), (block[0], block[1], block[2])


# -- running the host side -------------------------------------------------------------------------

LaunchFn = Callable[[GPUKernel, Tuple[int, int, int], Tuple[int, int, int], Tuple[int, ...]], None]


def walk_host(program: GPUProgram, sizes: Mapping[str, int], launch: LaunchFn,
              max_threads: Optional[int] = None) -> None:
    """Run the host side of `program`: host loops and guards in Python, kernels through `launch`
    (blocks of at most `max_threads` threads, the target's limit; default CUDA's 1024)."""
    env: Dict[str, int] = {isl_name(k): v for k, v in sizes.items()}   # the loop AST's ids are isl names

    def run(n: HNode) -> None:
        if isinstance(n, HostSeq):
            for ch in n.children:
                run(ch)
        elif isinstance(n, HostLoop):
            v = eval_lexpr(n.init, env)
            while True:
                env[n.iterator] = v
                if not eval_lexpr(n.cond, env):
                    break
                run(n.body)
                v += n.step
            env.pop(n.iterator, None)
        elif isinstance(n, HostGuard):
            if eval_lexpr(n.cond, env):
                run(n.then)
            elif n.orelse is not None:
                run(n.orelse)
        elif isinstance(n, Launch):
            kernel = program.kernels[n.kernel]
            grid, block = launch_dims(kernel, env) if max_threads is None else launch_dims(kernel, env, max_threads)
            launch(kernel, grid, block, tuple(env[h] for h in kernel.host_iterators))
        else:
            raise TypeError(n)

    run(program.host)
