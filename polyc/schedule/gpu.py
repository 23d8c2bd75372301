"""Mapping schedule loops onto the CUDA grid: explicit (`map_to_blocks`, `map_to_threads`) and
automatic (`default_gpu_mapping`).

A mapped loop runs its iterations on different blocks or threads at the same time, so it must
carry no dependence (`check_parallel`); the marks "block"/"thread" are then read by the CUDA code
generator, which turns a block loop into a grid-stride loop over `blockIdx` and a thread loop into
a block-stride loop over `threadIdx` (so any extent is correct, whatever the launch size).

The automatic mapping works per loop nest.  Schedule dimensions are shared by all statements, so
a mark on a dimension would apply to every nest that has a loop there: loops at one dimension
that get different roles are first given their own dimensions (an order-preserving change of the
schedule space), then each nest is mapped on its own: the outermost perfectly nested parallel loops are
tiled into (block, thread) pairs, or, when only the outermost loop is parallel and its body holds
further parallel loops, that loop goes to blocks and the inner parallel loops to threads.
Serial loops stay inside a thread, or on the host when they enclose parallel work.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import AbstractSet, Dict, List, Optional, Sequence, Tuple

import islpy as isl

from ..errors import PolycError, ScheduleArgumentError
from ..ir import Const
from ..poly.dependences import Dependences
from ..poly.islutil import fixed_value, isl_budget
from ..poly.reduction import is_reduction_dependence, is_reduction_update
from .legality import carried_at, check_parallel, with_proven_mark
from .rewrite import fully_unrolled
from .state import Dim, LoopKind, ScheduleState as Schedule

#: Threads per block for a 1-D mapping, and the (outer, inner) thread tile of a 2-D mapping.
TILE_1D = 256
TILE_2D = (8, 32)

def dependences_of(schedule: Schedule) -> Dependences:
    """The dependences of the schedule's kernel (computed once, cached on its model)."""
    return schedule.model.dependences


# -- explicit mapping ---------------------------------------------------------------------------

def _map(schedule: Schedule, loops: Sequence[str], mark: str) -> Schedule:
    if not loops:
        raise PolycError(f"map_to_{mark}s needs at least one loop name; the loops are: "
                         f"{', '.join(schedule.loop_names)}")
    deps = dependences_of(schedule)
    for loop in loops:
        dim = schedule.dims[schedule.dim_index(loop)]
        other = {LoopKind.GPU_BLOCK, LoopKind.GPU_THREAD} - {LoopKind(mark)}
        if dim.kinds & other:
            raise ScheduleArgumentError(f"loop {loop!r} is already mapped to {'threads' if mark == 'block' else 'blocks'}; "
                                        f"a loop maps to blocks or to threads, not both (tile it first)")
        check_parallel(schedule, deps, loop, f"mapping loop {loop!r} to CUDA {mark}s")
        schedule = schedule.with_mark(loop, LoopKind(mark), f"map_to_{mark}s({loop!r})")
    mapped = [d.name for d in schedule.dims if LoopKind(mark) in d.kinds]
    if len(mapped) > 3:
        raise ScheduleArgumentError(f"map_to_{mark}s would map {len(mapped)} nested loops to CUDA {mark}s "
                                    f"({', '.join(map(str, mapped))}); at most 3 fit (x, y, z)")
    from .rewrite import check_blocks_enclose_threads
    check_blocks_enclose_threads(schedule, f"map_to_{mark}s({', '.join(map(repr, loops))})")
    return schedule


def map_to_blocks(schedule: Schedule, *loops: str) -> Schedule:
    """Run the iterations of `loops` on different CUDA blocks (innermost named loop -> blockIdx.x).

    Raises IllegalScheduleError when a loop carries a dependence (blocks cannot synchronise).
    """
    return _map(schedule, loops, "block")


def map_to_threads(schedule: Schedule, *loops: str) -> Schedule:
    """Run the iterations of `loops` on different threads of a block (innermost -> threadIdx.x)."""
    return _map(schedule, loops, "thread")


def is_mapped(schedule: Schedule) -> bool:
    """True when some loop of `schedule` carries a "block" or "thread" mark."""
    return any(d.kinds & {LoopKind.GPU_BLOCK, LoopKind.GPU_THREAD} for d in schedule.dims)


# -- the loop tree ---------------------------------------------------------------------------------

def _scalar_values(schedule: Schedule) -> Optional[Dict[str, Tuple[Optional[int], ...]]]:
    """Per statement, the constant value of every scalar dimension (None for loop dims), from
    `Schedule.fixed_positions`; None when some scalar dimension is not constant for a statement."""
    out: Dict[str, Tuple[Optional[int], ...]] = {}
    for name, fixed in schedule.fixed_positions.items():
        vals = tuple(None if d.is_loop else v for d, v in zip(schedule.dims, fixed))
        if any(v is None for d, v in zip(schedule.dims, vals) if not d.is_loop):
            return None
        out[name] = vals
    return out


def _loop_key(values: Tuple[Optional[int], ...], k: int) -> Tuple[int, ...]:
    """Statements share the loop at dimension k iff they agree on the scalar dims before k."""
    return tuple(v for v in values[:k] if v is not None)


@dataclass
class LoopNode:
    """One loop of the loop tree: dimension `dim` for the statements with scalar prefix `key`."""

    dim: int
    key: Tuple[int, ...]
    name: str
    statements: Tuple[str, ...] = ()
    children: List["LoopNode"] = field(default_factory=list)
    ends_here: Tuple[str, ...] = ()   # statements whose innermost loop this is
    parallel: bool = False
    reducible: bool = False           # carries only a reduction: a block can tree-reduce it
    role: Tuple = ("serial",)

    def any_parallel(self) -> bool:
        return self.parallel or any(c.any_parallel() for c in self.children)


def carried_levels(schedule: Schedule, deps: Dependences) -> Tuple[Dict[str, set], Dict[str, set]]:
    """Per source statement, the schedule dimensions at which some dependence from it is carried
    (`legality.carried_at`, the one analysis of carried dependences); and the same counting only
    dependences that are not reductions (`poly.reduction`, the one rule)."""
    program = schedule.model.program
    carried: Dict[str, set] = {name: set() for name, _ in schedule.maps}
    other: Dict[str, set] = {name: set() for name, _ in schedule.maps}
    for k, d in enumerate(schedule.dims):
        if not d.is_loop:
            continue
        for dep, _ in carried_at(schedule, deps, k):
            carried[dep.source].add(k)
            if not is_reduction_dependence(program, dep):
                other[dep.source].add(k)
    return carried, other


def _reducible(program, node: "LoopNode", other: Dict[str, set]) -> bool:
    """A loop that only carries one statement's reduction chain over its innermost iterator."""
    if len(node.statements) != 1 or node.ends_here != node.statements or node.children:
        return False
    st = program.statement(node.statements[0])
    if not is_reduction_update(st) or not st.iterators or node.dim in other[st.name]:
        return False
    last = st.iterators[-1]
    target_vars = {v for e in st.target.indices for v in e.variables}
    return last in st.reduction and last not in target_vars


def loop_tree(schedule: Schedule, deps: Dependences, reassociate: bool = True) -> Optional[List[LoopNode]]:
    """The loop forest of `schedule` with the parallelism of each loop; None if its scalar
    dimensions are not constant per statement."""
    values = _scalar_values(schedule)
    if values is None:
        return None
    maps = {name: smap.intersect_domain(schedule.model.domains[name]) for name, smap in schedule.maps}
    nodes: Dict[Tuple[int, Tuple[int, ...]], LoopNode] = {}
    roots: List[LoopNode] = []
    with isl_budget(f"finding the parallel loops of {schedule.model.program.name}"):
        # on the statements' instances (a loop of one iteration is no loop)
        varying = {(k, _loop_key(values[name], k)) for name, m in maps.items()
                   for k, d in enumerate(schedule.dims) if d.is_loop and fixed_value(m, k) is None}
        for name, m in maps.items():
            parent: Optional[LoopNode] = None
            for k, d in enumerate(schedule.dims):
                key = _loop_key(values[name], k)
                # A statement fixed at a loop dimension that another statement with the same
                # scalar prefix iterates (`fuse` of a 1-D into a 2-D nest puts S1 at j = 0) runs
                # inside that loop in the generated code (under a guard): it belongs to its node.
                if not d.is_loop or (k, key) not in varying:
                    continue
                node = nodes.get((k, key))
                if node is None:
                    node = nodes[(k, key)] = LoopNode(k, key, d.name or f"_d{k}")
                    (parent.children if parent else roots).append(node)
                node.statements += (name,)
                parent = node
            if parent is not None:
                parent.ends_here += (name,)
        carried, other = carried_levels(schedule, deps)
    # A floor-division quotient's loop runs once per outer instance: never a grid axis.
    quotients = {q for st in schedule.model.program.statements for q in st.divisions}
    for node in nodes.values():
        # A loop the user unrolled (`unroll`, `unroll_and_jam`) stays in each thread, written out.
        node.parallel = (not any(node.dim in carried[st] for st in node.statements) and node.name not in quotients
                         and not fully_unrolled(schedule.dims[node.dim]))
        node.reducible = reassociate and not node.parallel and _reducible(schedule.model.program, node, other)
    return roots


# -- planning -------------------------------------------------------------------------------------

def _chain(node: LoopNode) -> List[LoopNode]:
    """The outermost perfectly nested parallel loops starting at `node`."""
    chain = [node]
    while (len(chain[-1].children) == 1 and not chain[-1].ends_here
           and chain[-1].children[0].parallel):
        chain.append(chain[-1].children[0])
    return chain


def _plan(node: LoopNode) -> None:
    """Set the `role` of the loops of the nest at `node`.

    Roles: ("serial",); ("block",); ("thread",); ("tile1",): tiled into block and thread loops;
    ("tile2", partner dim, 0 | 1): one of two loops tiled together into 2-D blocks and threads.
    """
    if not node.parallel:
        for c in node.children:        # a serial loop around parallel work stays on the host
            _plan(c)
        return
    chain = _chain(node)
    if len(chain) >= 2:
        # Three grid axes: the loop just outside the tiled pair goes to blocks untiled; loops
        # further out stay serial (on the host).
        a, b = chain[-2], chain[-1]
        a.role, b.role = ("tile2", b.dim, 0), ("tile2", a.dim, 1)
        if len(chain) >= 3:
            chain[-3].role = ("block",)
        return
    if any(c.any_parallel() or c.reducible for c in node.children):
        node.role = ("block",)
        for c in node.children:
            _thread_plan(c)
        return
    node.role = ("tile1",)


def _thread_plan(node: LoopNode) -> None:
    """Inside a block: the first parallel loop of each subtree goes to threads; a reduction loop
    goes to threads with a tree reduction across the block."""
    if node.parallel:
        node.role = ("thread",)
        return
    if node.reducible:
        node.role = ("reduce",)
        return
    for c in node.children:
        _thread_plan(c)


def _walk(nodes: List[LoopNode]):
    for n in nodes:
        yield n
        yield from _walk(n.children)


# -- separating nests that are treated differently -----------------------------------------------

def _separate(schedule: Schedule, labels: Dict[Tuple[int, Tuple[int, ...]], Tuple]) -> Tuple[Schedule, Dict]:
    """Give loops at the same dimension but with different roles their own dimensions.

    Statements share a copy of dimension k iff their loops there have the same role (a statement
    with no loop node at k counts as serial).  Order is preserved: statements in different copies
    differ at a scalar dimension before k.  Returns the schedule and (dim, role) -> new index.
    """
    values = _scalar_values(schedule)
    assert values is not None
    columns: List[Tuple[int, Optional[Tuple]]] = []
    new_dims: List[Dim] = []
    from .rewrite import fresh_name, kernel_names
    used = set(d.name for d in schedule.dims if d.name) | kernel_names(schedule.model.program)
    index: Dict[Tuple[int, Tuple], int] = {}

    def label(name: str, k: int) -> Tuple:
        return labels.get((k, _loop_key(values[name], k)), ("serial",))

    for k, d in enumerate(schedule.dims):
        if not d.is_loop:
            columns.append((k, None))
            new_dims.append(d)
            continue
        seen: List[Tuple] = []
        for name, _ in schedule.maps:
            lab = label(name, k)
            if lab not in seen:
                seen.append(lab)
        for n, lab in enumerate(seen):
            dname = fresh_name(d.name, used) if n else d.name     # d.name, d.name_1, ...
            index[(k, lab)] = len(new_dims)
            columns.append((k, lab if len(seen) > 1 else None))
            new_dims.append(replace(d, name=dname))
    if len(new_dims) == len(schedule.dims):
        return schedule, index
    olds = ", ".join(f"t{k}" for k in range(len(schedule.dims)))
    maps = []
    for name, smap in schedule.maps:
        exprs = [f"t{k}" if lab is None or lab == label(name, k) else "0" for k, lab in columns]
        m = smap
        change = isl.Map(f"{{ [{olds}] -> [{', '.join(exprs)}] }}").align_params(m.get_space())
        maps.append((name, str(m.apply_range(change))))
    return (replace(schedule, maps=tuple(maps), dims=tuple(new_dims),
                    history=schedule.history + ("separate_nests()",)), index)


# -- tiling for the grid ------------------------------------------------------------------------

def _tile_band(schedule: Schedule, band: Sequence[int], sizes: Sequence[int]) -> Tuple[Schedule, List[str], List[str]]:
    """Tile the perfectly nested parallel loop dims `band` (outermost first) by `sizes`.

    The tile loops come first (in band order), then the point loops; point loops count from 0
    (`t mod size`), so a thread index is the point-loop value itself.
    """
    dims = list(schedule.dims)
    n = len(dims)
    outer_names, inner_names = [], []
    from .rewrite import fresh_name, kernel_names
    used = set(d.name for d in dims if d.name) | kernel_names(schedule.model.program)

    def fresh(stem: str) -> str:
        return fresh_name(stem, used)

    for k in band:
        outer_names.append(fresh(f"{dims[k].name}_outer"))
        inner_names.append(fresh(f"{dims[k].name}_inner"))
    out_exprs: List[str] = []
    new_dims: List[Dim] = []
    for k in range(n):
        if k == band[0]:
            for j, b in enumerate(band):
                out_exprs.append(f"floor(t{b} / {sizes[j]})")
                new_dims.append(Dim(outer_names[j], origin=dims[b].origin or dims[b].name))
        if k in band:
            j = list(band).index(k)
            out_exprs.append(f"t{k} mod {sizes[j]}")
            new_dims.append(Dim(inner_names[j], origin=dims[k].origin or dims[k].name))
        else:
            out_exprs.append(f"t{k}")
            new_dims.append(dims[k])
    olds = ", ".join(f"t{k}" for k in range(n))
    change = isl.Map(f"{{ [{olds}] -> [{', '.join(out_exprs)}] }}")
    maps = []
    for name, smap in schedule.maps:
        m = smap
        maps.append((name, str(m.apply_range(change.align_params(m.get_space())))))
    note = f"gpu_tile({', '.join(f'{dims[b].name}={s}' for b, s in zip(band, sizes))})"
    out = replace(schedule, maps=tuple(maps), dims=tuple(new_dims),
                  history=schedule.history + (note,))
    return out, outer_names, inner_names


def fuse_rows(schedule: Schedule, deps: Dependences) -> Optional[Schedule]:
    """Fuse the outermost loops of all top-level nests into one (a "row" loop), when legal.

    For programs like softmax or layernorm (several nests over the same rows, some reducing along
    the row), one block per row can then run every statement of its row, with tree reductions,
    instead of one launch and one pass over memory per statement.  Applied to source-order
    schedules only, and only when some statement reduces along an inner loop.
    """
    from .legality import violations
    program = schedule.model.program
    if schedule.history or len(schedule.dims) < 3 or schedule.dims[0].is_loop or not schedule.dims[1].is_loop:
        return None
    sts = program.statements
    if len(sts) < 2 or any(not st.iterators for st in sts) or len({st.order[0] for st in sts}) < 2:
        return None
    # Rows and columns only: every statement is over (row) or (row, column), and some statement
    # reduces along the column.  Deeper nests (convolutions, pooling) keep their own 2-D mappings.
    if any(len(st.iterators) > 2 for st in sts) or not any(
            st.update and len(st.iterators) == 2 and st.reduction == (st.iterators[-1],) for st in sts):
        return None
    n = len(schedule.dims)
    olds = ", ".join(f"t{k}" for k in range(n))
    news = ", ".join(["t1", "t0"] + [f"t{k}" for k in range(2, n)])
    maps = []
    for name, smap in schedule.maps:
        m = smap
        maps.append((name, str(m.apply_range(isl.Map(f"{{ [{olds}] -> [{news}] }}").align_params(m.get_space())))))
    dims = (schedule.dims[1], schedule.dims[0]) + schedule.dims[2:]
    fused = replace(schedule, maps=tuple(maps), dims=dims,
                    history=schedule.history + ("fuse_rows()",))
    with isl_budget(f"checking that fusing the row loops of {program.name} is legal"):
        if violations(fused, deps):
            return None
    return fused


def _init_update_pairs(schedule: Schedule, skip: AbstractSet[str]) -> List[Tuple[str, str]]:
    """(init, update) statement pairs of a source-order program: `T[..] = const` over a box, right
    before `T[..] op= ...` whose non-reduction loops are exactly the init's (what `op=!` makes)."""
    program = schedule.model.program
    sts = program.statements
    pairs = []
    for init, upd in zip(sts, sts[1:]):
        if init.name in skip or upd.name in skip or init.update is not None or upd.update is None:
            continue
        if not isinstance(init.value, Const) or init.target != upd.target or not upd.reduction:
            continue
        if tuple(v for v in upd.iterators if v not in upd.reduction) != init.iterators:
            continue
        pairs.append((init.name, upd.name))
    return pairs


def fuse_inits(schedule: Schedule, skip: AbstractSet[str] = frozenset()) -> Schedule:
    """Each reduction's `= const` start fused into the reduction's nest (`Schedule.fuse`, proven
    legal like any fusion), so one thread writes its element's start value and then accumulates
    into it: the element is written once instead of zero-filled by a launch of its own and read
    back.  Source-order schedules only; pairs the fusion cannot make legal keep their nests."""
    from .primitives.fuse import fuse     # the primitives build on this module
    if schedule.history:
        return schedule
    out = schedule
    for init, upd in _init_update_pairs(schedule, skip):
        try:
            out = fuse(out, init, upd)
        except PolycError:
            continue
    return out


def default_gpu_mapping(schedule: Schedule, row_fusion: bool = True, keep: AbstractSet[str] = frozenset(),
                        reassociate: bool = True) -> Schedule:
    """An automatic CUDA mapping of `schedule` (used for "auto" and for unmapped schedules).

    Per loop nest: outermost parallel loops -> blocks, the next ones (after tiling into thread
    blocks of 256 threads) -> threads; serial loops stay inside a thread, or on the host when they
    enclose parallel nests; a loop that only carries a reduction of one statement is spread over
    the threads of a block and tree-reduced (this reassociates `+` and `*` reductions, so float
    sums differ from the serial order by rounding).  With `row_fusion`, the outer loops of a
    source-order program with row reductions are fused first (`fuse_rows`); otherwise each
    reduction's start value is fused into its nest (`fuse_inits`; statements in `keep` keep their
    nests).  `reassociate=False` tree-reduces nothing: every reduction runs in its written order
    inside one thread.  A schedule that already maps some loop is returned unchanged.
    """
    if is_mapped(schedule):
        return schedule
    deps = dependences_of(schedule)
    rows = fuse_rows(schedule, deps) if row_fusion else None
    schedule = rows or fuse_inits(schedule, keep)
    if schedule.history:
        deps = dependences_of(schedule)
    roots = loop_tree(schedule, deps, reassociate)
    if roots is None:
        return schedule
    for r in roots:
        _plan(r)
    labels = {(n.dim, n.key): n.role for n in _walk(roots)}
    sched, index = _separate(schedule, labels)
    names = {key: sched.dims[k].name for key, k in index.items()}
    bands = []
    for (k, role), name in names.items():
        if role == ("block",):
            sched = with_proven_mark(sched, name, LoopKind.GPU_BLOCK, f"map_to_blocks({name!r})", deps)
        elif role == ("thread",):
            sched = with_proven_mark(sched, name, LoopKind.GPU_THREAD, f"map_to_threads({name!r})", deps)
        elif role == ("reduce",):
            # one proof of both: a thread loop that tree-reduces may carry its reduction
            sched = sched.with_mark(name, LoopKind.GPU_THREAD, f"map_to_threads({name!r})")
            sched = with_proven_mark(sched, name, LoopKind.PARALLEL, "tree_reduce()", deps, reduction=True)
        elif role == ("tile1",):
            bands.append(([name], [TILE_1D]))
        elif role[0] == "tile2" and role[2] == 0:
            partner = names[(role[1], ("tile2", k, 1))]
            bands.append(([name, partner], list(TILE_2D)))
    for band, sizes in bands:
        sched, outer, inner = _tile_band(sched, [sched.dim_index(b) for b in band], sizes)
        for o in outer:
            sched = with_proven_mark(sched, o, LoopKind.GPU_BLOCK, f"map_to_blocks({o!r})", deps)
        for i in inner:
            sched = with_proven_mark(sched, i, LoopKind.GPU_THREAD, f"map_to_threads({i!r})", deps)
    return sched
