"""A small immutable loop AST built from isl's AST, shared by the C and CUDA emitters.

Expressions stay as isl `AstExpr`s converted once into `LExpr` trees, which print to C (and to
Python, for the CUDA emulator) without isl's macros.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import islpy as isl

from ..errors import PolycError
from ..poly.islutil import user_name
from ..schedule.schedule import Dim, Schedule
from .loop_nodes import Block, Call, Guard, LExpr, Loop, Node  # noqa: F401  (re-exported)

# -- expressions -------------------------------------------------------------------------------

_BINARY = {isl.ast_expr_op_type.add: "+", isl.ast_expr_op_type.sub: "-", isl.ast_expr_op_type.mul: "*",
           isl.ast_expr_op_type.and_: "&&", isl.ast_expr_op_type.or_: "||",
           isl.ast_expr_op_type.and_then: "&&", isl.ast_expr_op_type.or_else: "||",
           isl.ast_expr_op_type.eq: "==", isl.ast_expr_op_type.le: "<=", isl.ast_expr_op_type.lt: "<",
           isl.ast_expr_op_type.ge: ">=", isl.ast_expr_op_type.gt: ">"}
_NAMED = {isl.ast_expr_op_type.min: "min", isl.ast_expr_op_type.max: "max",
          isl.ast_expr_op_type.fdiv_q: "floord", isl.ast_expr_op_type.pdiv_q: "/",
          isl.ast_expr_op_type.div: "/", isl.ast_expr_op_type.pdiv_r: "%", isl.ast_expr_op_type.zdiv_r: "%",
          isl.ast_expr_op_type.minus: "neg", isl.ast_expr_op_type.select: "?",
          isl.ast_expr_op_type.cond: "?"}


def lexpr(e: isl.AstExpr) -> LExpr:
    t = e.get_type()
    if t == isl.ast_expr_type.int:
        return LExpr("int", value=int(e.get_val().to_python()))
    if t == isl.ast_expr_type.id:
        return LExpr("id", value=e.get_id().get_name())
    op = e.get_op_type()
    args = tuple(lexpr(e.get_op_arg(k)) for k in range(e.get_op_n_arg()))
    if op in _BINARY:
        out = LExpr(_BINARY[op], args[:2])
        for extra in args[2:]:
            out = LExpr(_BINARY[op], (out, extra))
        return out
    if op in _NAMED:
        name = _NAMED[op]
        if name in ("min", "max") and len(args) > 2:
            out = LExpr(name, args[:2])
            for extra in args[2:]:
                out = LExpr(name, (out, extra))
            return out
        return LExpr(name, args)
    raise PolycError(f"unsupported isl AST expression: {e.to_C_str()}")


def c_text(e: LExpr, name: Optional[Callable[[str], str]] = None) -> str:
    """C spelling; `floord`, `min`, `max` are helpers defined in the generated preamble.  `name` turns
    an id (isl's name of a loop or size) into its C identifier (`polyc.codegen.names.CNames.id`)."""
    if e.op == "int":
        return str(e.value)
    if e.op == "id":
        return name(str(e.value)) if name is not None else str(e.value)
    a = [c_text(x, name) for x in e.args]
    if e.op == "neg":
        return f"(-{a[0]})"
    if e.op in ("min", "max", "floord"):
        return f"pc_{e.op}({a[0]}, {a[1]})"
    if e.op == "?":
        return f"({a[0]} ? {a[1]} : {a[2]})"
    return f"({a[0]} {e.op} {a[1]})"


def strip_parens(s: str) -> str:
    if s.startswith("(") and s.endswith(")"):
        depth = 0
        for k, ch in enumerate(s):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and k < len(s) - 1:
                return s
        return s[1:-1]
    return s


def operand(s: str) -> str:
    """`s` (C text) safe as an operand of a larger expression: parenthesized unless it is one
    token or already parenthesized as a whole (`c ? a : b` + 1 would add to `b` alone)."""
    if any(ch in s for ch in " +-*/%?<>=&|!") and strip_parens(s) == s:
        return f"({s})"
    return s

# -- statements --------------------------------------------------------------------------------

def ids(e: LExpr) -> Set[str]:
    """The ids (iterators, sizes) a loop-AST expression mentions."""
    if e.op == "id":
        return {str(e.value)}
    out: Set[str] = set()
    for a in e.args:
        out |= ids(a)
    return out


def flat_block(n: Node) -> Tuple[Node, ...]:
    """The children of `n` with nested blocks opened (isl groups statements of one loop body into
    blocks; for the emitter a body is its sequence of nodes)."""
    if not isinstance(n, Block):
        return (n,)
    return tuple(x for ch in n.children for x in flat_block(ch))


def walk(n: Node) -> Iterator[Node]:
    """`n` and every node below it, parents first, in program order."""
    yield n
    if isinstance(n, Loop):
        yield from walk(n.body)
    elif isinstance(n, Block):
        for ch in n.children:
            yield from walk(ch)
    elif isinstance(n, Guard):
        yield from walk(n.then)
        if n.orelse is not None:
            yield from walk(n.orelse)


def _convert(node: isl.AstNode, dims_by_name: Dict[str, Dim]) -> Node:
    t = node.get_type()
    if t == isl.ast_node_type.for_:
        it = node.for_get_iterator().get_id().get_name()
        inc = lexpr(node.for_get_inc())
        if inc.op != "int":
            raise PolycError("non-constant loop increment in generated code")
        return Loop(it, lexpr(node.for_get_init()), lexpr(node.for_get_cond()), int(inc.value),  # type: ignore[arg-type]
                    _convert(node.for_get_body(), dims_by_name), dims_by_name.get(it))
    if t == isl.ast_node_type.if_:
        orelse = _convert(node.if_get_else_node(), dims_by_name) if node.if_has_else_node() else None
        return Guard(lexpr(node.if_get_cond()), _convert(node.if_get_then_node(), dims_by_name), orelse)
    if t == isl.ast_node_type.block:
        kids = node.block_get_children()
        return Block(tuple(_convert(kids.get_at(k), dims_by_name) for k in range(kids.n_ast_node())))
    if t == isl.ast_node_type.user:
        call = node.user_get_expr()
        name = user_name(call.get_op_arg(0).get_id().get_name())     # the statement's own name
        return Call(name, tuple(lexpr(call.get_op_arg(k)) for k in range(1, call.get_op_n_arg())))
    if t == isl.ast_node_type.mark:
        return _convert(node.mark_get_node(), dims_by_name)
    raise PolycError(f"unsupported isl AST node type {t}")


def ast_build_options(schedule: Schedule, atomic: bool = False,
                      keep: Optional[Sequence[int]] = None) -> Optional[isl.UnionMap]:
    """The isl AST build options for `schedule`, derived from its dims (the one rule every code
    generator uses): `unroll` for each fully unrolled loop (isl writes out its iterations:
    `unroll(loop)`, `unroll_and_jam`, register-blocking lanes) and, with `atomic`, `atomic` for
    every other dimension (one loop per dimension, no splitting: the retry path).  `keep` (the
    indices of the dims the schedule map given to isl still has, see `drop_constant_dims`)
    renumbers the options to that map; None keeps every dim."""
    dims = [schedule.dims[k] for k in keep] if keep is not None else list(schedule.dims)
    n = len(dims)
    ts = ", ".join(f"t{k}" for k in range(n))
    parts = [f"[{ts}] -> unroll[{k}]" for k, d in enumerate(dims) if d.is_loop and d.unroll.is_full]
    if atomic:
        parts += [f"[{ts}] -> atomic[{k}]" for k, d in enumerate(dims) if not (d.is_loop and d.unroll.is_full)]
    return isl.UnionMap("{ " + "; ".join(parts) + " }") if parts else None


def drop_constant_dims(smap: isl.UnionMap, n: int) -> Tuple[isl.UnionMap, List[int]]:
    """`smap` with every run of consecutive schedule dimensions that each statement fixes to
    constants replaced by one dimension (the rank of the statement's tuple of constants), runs
    whose tuple is the same for every statement dropped, and the indices of the dims kept (a
    collapsed run keeps its first dim's index).

    Within such a run statements compare by their constant tuples alone, so the rank orders them
    exactly as the run did: the execution order is unchanged.  But isl's AST generator pays for
    every dimension of every statement (a packed, register-blocked gradient has ~100 dims, most
    of them per-statement constants), so the shorter map makes loop generation several times
    faster.  Only a value isl reads off the map without computation (`plain_get_val_if_fixed`)
    counts as fixed, so the analysis itself costs no isl work."""
    maps: List[isl.Map] = []
    smap.foreach_map(maps.append)
    if not maps:
        return smap, list(range(n))

    def fixed(m: isl.Map, k: int) -> Optional[int]:
        v = m.plain_get_val_if_fixed(isl.dim_type.out, k)
        return None if v.is_nan() else v.to_python()

    values = [[fixed(m, k) for k in range(n)] for m in maps]
    all_fixed = [all(row[k] is not None for row in values) for k in range(n)]
    runs: List[Tuple[int, int]] = []  # [start, stop) of each run of all-fixed dims
    k = 0
    while k < n:
        if all_fixed[k]:
            start = k
            while k < n and all_fixed[k]:
                k += 1
            runs.append((start, k))
        else:
            k += 1
    plan: List[Tuple[int, int, Optional[List[int]]]] = []  # (start, stop, rank per map or None: drop)
    for start, stop in runs:
        tuples = [tuple(row[start:stop]) for row in values]
        order = sorted(set(tuples))
        if len(order) == 1:
            plan.append((start, stop, None))
        elif stop - start > 1:
            plan.append((start, stop, [order.index(t) for t in tuples]))
    if not plan:
        return smap, list(range(n))
    reduced: Optional[isl.UnionMap] = None
    for i, m in enumerate(maps):
        for start, stop, ranks in reversed(plan):
            m = m.project_out(isl.dim_type.out, start, stop - start)
            if ranks is not None:
                m = m.insert_dims(isl.dim_type.out, start, 1).fix_val(
                    isl.dim_type.out, start, isl.Val.int_from_si(m.get_ctx(), ranks[i]))
        um = isl.UnionMap.from_map(m)
        reduced = um if reduced is None else reduced.union(um)
    assert reduced is not None
    removed = {k for start, stop, ranks in plan for k in range(start + (ranks is not None), stop)}
    return reduced, [k for k in range(n) if k not in removed]


def build_loop_ast(schedule: Schedule, fixed_sizes: Optional[Dict[str, int]] = None) -> Node:
    """Generate loops for `schedule` with isl and convert them to the loop AST.  `fixed_sizes`
    (size name -> value) specialises the loops to those sizes: isl drops the bounds and guards
    they decide."""
    from ..poly.islutil import isl_budget

    model = schedule.model
    names = schedule.iterator_names()
    dims_by_name = {n: d for n, d in zip(names, schedule.dims) if d.name is not None}
    with isl_budget(f"generating loops for {model.program.name}"):
        smap = schedule.schedule_map
        context = model.codegen_context
        if fixed_sizes:
            from ..poly.islutil import isl_name
            fixed = " and ".join(f"{isl_name(k)} = {v}" for k, v in sorted(fixed_sizes.items()))
            context = context.intersect(isl.Set(f"{model.pstr} -> {{ : {fixed} }}"))
        build = isl.AstBuild.from_context(context)
        loops = _generate(smap, schedule, names, build, dims_by_name, atomic=False)
    problem = _check_loops(loops, schedule, smap, context)
    if problem is None:
        return loops
    # isl's AST generator mis-handled this schedule (see ast_check).  Generating every loop
    # "atomic" (one loop per dimension, no splitting) takes another path through isl; it is kept
    # only if it passes the same check.
    with isl_budget(f"generating loops for {model.program.name} again"):
        retry = _generate(smap, schedule, names, build, dims_by_name, atomic=True)
    if _check_loops(retry, schedule, smap, context) is None:
        return retry
    from ..errors import LoopGenerationError
    raise LoopGenerationError(f"isl generated wrong loops for this schedule of {model.program.name} ({problem}); polyc "
                     f"refuses to compile them.  This is a defect of isl's code generation for this "
                     f"combination of primitives: a different tiling, split or skew usually avoids it.")


def _generate(smap: isl.UnionMap, schedule: Schedule, names: Sequence[str], build: isl.AstBuild,
              dims_by_name: Dict[str, Dim], atomic: bool) -> Node:
    """Loops for `smap` (some statements of `schedule`), generated by isl one top-level group at a
    time.

    isl sees the map without the dims that order nothing (`drop_constant_dims`).  When the first
    dim it would see is then a constant of every statement (a sequence of separate nests, as
    packing and distribution make), the statements run group by group in the order of that
    constant: each group is generated on its own, with only the dims that vary inside it.  This is
    what a schedule tree's sequence node gives isl; on a flat map isl instead carries every
    statement's dims through every other statement's nest, which made a chain of 15 packed
    contractions take ~40 s to generate instead of under a second."""
    gen_map, keep = drop_constant_dims(smap, len(names))
    groups = _leading_groups(gen_map, smap)
    if groups is not None:
        return Block(tuple(_generate(g, schedule, names, build, dims_by_name, atomic) for g in groups))
    ids = isl.IdList.alloc(isl.DEFAULT_CONTEXT, len(keep))
    for k in keep:
        ids = ids.add(isl.Id(names[k]))
    options = ast_build_options(schedule, atomic=atomic, keep=keep)
    group_build = build.set_iterators(ids)
    if options is not None:
        group_build = group_build.set_options(options)
    return _convert(group_build.node_from_schedule_map(gen_map), dims_by_name)


def _leading_groups(gen_map: isl.UnionMap, smap: isl.UnionMap) -> Optional[List[isl.UnionMap]]:
    """The parts of `smap`, in execution order, when the first dim of `gen_map` (its reduced form)
    is a constant of every statement and not the same for all; None otherwise."""
    reduced: List[isl.Map] = []
    gen_map.foreach_map(reduced.append)
    if not reduced or reduced[0].dim(isl.dim_type.out) == 0:
        return None
    first: Dict[str, int] = {}
    for m in reduced:
        v = m.plain_get_val_if_fixed(isl.dim_type.out, 0)
        if v.is_nan():
            return None
        first[m.get_tuple_name(isl.dim_type.in_)] = v.to_python()
    if len(set(first.values())) < 2:
        return None
    parts: Dict[int, isl.UnionMap] = {}
    originals: List[isl.Map] = []
    smap.foreach_map(originals.append)
    for m in originals:
        key = first[m.get_tuple_name(isl.dim_type.in_)]
        um = isl.UnionMap.from_map(m)
        parts[key] = parts[key].union(um) if key in parts else um
    return [parts[key] for key in sorted(parts)]


def _strided(domain: isl.UnionSet) -> bool:
    """Whether some statement's iteration domain has a stride or a quotient (an existentially
    quantified variable: `i mod 2 = 0`, `q = floor(i / 3)`)."""
    found = []
    domain.foreach_set(lambda s: found.extend(b.dim(isl.dim_type.div) > 0 for b in s.get_basic_sets()))
    return any(found)


def _check_loops(loops: Node, schedule: Schedule, smap: isl.UnionMap, context: isl.Set) -> Optional[str]:
    """Why `loops` do not run every instance of `smap`'s domain exactly once, or None.  A check
    that cannot be completed (an unspellable expression, the isl budget) is not a finding.

    Only iteration domains with strides (`range(0, N, 2)`, quotient iterators of `//` and `%`)
    are checked: every defect of isl's loop generation found so far (by the kernel fuzzer, 10,000
    cases) needs one, and checking every tiled stencil would cost more than generating it."""
    from ..errors import IslBudgetError
    from ..poly.islutil import isl_budget
    from .ast_check import loops_run_domain_once
    # The statements' own domains, not the schedule's pieces: `unroll_and_jam(separate=True)` and
    # `peel` cut a domain at multiples of a factor, which are divisions too, but not strides isl
    # mis-generates (and checking covariance's jammed rows took 12 s before isl's budget stopped it).
    if not (_strided(schedule.model.domain) or any(st.divisions for st in schedule.model.program.statements)):
        return None
    try:
        with isl_budget(f"checking the generated loops of {schedule.model.program.name}"):
            problem = loops_run_domain_once(loops, schedule.model.pstr, smap.domain(), context)
    except IslBudgetError:
        return None
    return None if problem == "unverifiable" else problem
