"""Array expansion: a kernel that overwrites its arrays, rewritten so that no value is ever lost.

Reverse mode needs every value as it was read.  An in-place time loop (`for t: B[i] = f(A[i-1..i+1]);
A[i] = g(B[..])`) overwrites them, so `pc.grad` refuses it unless asked to *store* them
(`checkpoint="store"`).  Then each statement `S` writing `X` gets an array of its own, `X_S`, indexed
by S's loop iterators (shifted to start at 0), so every instance of every statement writes a
different element (single assignment; Feautrier's array expansion).  Each read is redirected to the
instance that wrote the value it reads, by isl's exact dataflow analysis (the last write before the
read): a read may get its value from different statements, or from the array passed in, in
different parts of its domain, so a statement is split into pieces, one per combination of sources.
Updates (`X[i] += e`) become definitions that read the value they update (`X_S[..] = X_src + e`),
except a sum accumulated in place, alone in its innermost loops (`a[i] += W[i, j] * h[j]`): it keeps
one running value per instance of its outer loops, started by a copy of the value it adds to.
What the kernel returns is gathered at the end from the last write of each element
(`X_final[e] = X_W[..]`), or from the array passed in where nothing writes it.

The memory is that of every value the kernel computes (for a stencil, T copies of the grid): this
is the "store" strategy.  The expanded program keeps the kernel's loops and order; its adjoint is
built by `polyc.grad.reverse`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import islpy as isl

from ..errors import GradError, IslBudgetError
from ..ir import Access, Affine, Binary, Call, Program, Select, Statement, TensorDecl, rebuild
from ..poly.islutil import (aff_to_affine, affine_str, basic_set_constraints, isl_budget, isl_name,
                            pw_aff_to_affine, set_dnf)
from ..poly.model import PolyModel, tuple_str
from ..ir.guards import dnf_condition
from .analysis import describe
from .derivative import ZERO
from .exprs import within
from .gather import fresh_name

#: A statement split into more pieces than this (combinations of the sources of its reads) is refused.
MAX_PIECES = 64
#: The tuple name of the virtual statement that reads every element at the end.
_FINAL = "polyc_final"


@dataclass(frozen=True)
class Expanded:
    """The single-assignment program and, for each array the kernel returns (outputs and arrays
    updated in place), the tensor holding its final values in it."""

    program: Program
    final: Tuple[Tuple[str, str], ...]

    def final_name(self, tensor: str) -> str:
        return dict(self.final)[tensor]


def _bounds(model: PolyModel, st: Statement, depth: int) -> Tuple[Tuple[Affine, Affine], ...]:
    """(lowest value, extent) of the first `depth` iterators of `st` as affine functions of the sizes."""
    dom = model.domains[st.name].intersect_params(model.context)
    out = []
    for k, it in enumerate(st.iterators[:depth]):
        lo = pw_aff_to_affine(dom.dim_min(k), model.context)
        hi = pw_aff_to_affine(dom.dim_max(k), model.context)
        if lo is None or hi is None or set(lo.variables) - set(model.program.sizes) \
                or set(hi.variables) - set(model.program.sizes):
            raise GradError(f"{describe(st)}: checkpoint='store' keeps one value per iteration, but the range of "
                            f"loop {it!r} is not one affine interval of the sizes; write the loop bounds without "
                            f"min/max")
        out.append((lo, hi - lo + 1))
    return tuple(out)


def _as_update_value(st: Statement, old: Access):
    """`st`'s value as a definition reading `old` for the element it updates."""
    if st.update is None:
        return st.value
    if st.update in ("+", "*"):
        return Binary(st.update, old, st.value)
    return Call(st.update, (old, st.value))


def _replace_access(e, old: Access, new: Access):
    return rebuild(e, lambda x: new if x == old else None)


class _Expander:
    def __init__(self, program: Program):
        self.program = program
        self.model = PolyModel(program)
        self.writers: Dict[str, List[Statement]] = {}
        for st in program.statements:
            self.writers.setdefault(st.target.tensor, []).append(st)
        taken = {t.name for t in program.tensors} | set(program.sizes) | {s.name for s in program.scalars}
        self.taken = taken
        self.name: Dict[str, str] = {st.name: fresh_name(f"{st.target.tensor}_{st.name}", taken)
                                     for st in program.statements}
        #: statement -> how many of its (outer) loops index its array: all of them, or for a sum
        #: accumulated in place (`_sum_depth`) the loops outside the summed ones.
        self.depth = {st.name: _sum_depth(program, st) or len(st.iterators) for st in program.statements}
        self.bounds = {st.name: _bounds(self.model, st, self.depth[st.name]) for st in program.statements}

    def element(self, writer: Statement, instance: Sequence[Affine]) -> Access:
        """The element of `writer`'s own array holding the value its instance `instance` wrote (a
        sum's running value lives in one element for all its summed iterations)."""
        return Access(self.name[writer.name], tuple(v - lo for v, (lo, _) in zip(instance, self.bounds[writer.name])))

    def sources(self, what: str, sink: isl.Map, acc: Access, domain: isl.Set,
                schedule: isl.UnionMap) -> List[Tuple[isl.Set, Access]]:
        """Pieces of `domain` (the reading instances of `sink`, a map to the elements read) with the
        access that reads the value `acc` reads there: the element of the statement that wrote it
        last before (in `schedule`), or `acc` itself where the value is the one passed in."""
        m = self.model
        writes = None
        for w in self.writers[acc.tensor]:
            wm = isl.UnionMap.from_map(m.access_map(w, w.target).intersect_domain(m.domains[w.name]))
            writes = wm if writes is None else writes.union(wm)
        flow = (isl.UnionAccessInfo.from_sink(isl.UnionMap.from_map(sink.intersect_domain(domain)))
                .set_must_source(writes).set_schedule_map(schedule).compute_flow())
        out: List[Tuple[isl.Set, Access]] = []
        covered = None
        for dep in _maps(flow.get_must_dependence()):
            writer = m.statement_by_isl_name(dep.get_tuple_name(isl.dim_type.in_))
            for piece, ma in _pieces(dep.reverse().intersect_params(m.context).as_pw_multi_aff()):
                piece = piece.intersect(domain).coalesce()
                if piece.is_empty():
                    continue
                instance = [aff_to_affine(ma.get_aff(k)) for k in range(ma.dim(isl.dim_type.out))]
                if any(v is None for v in instance):
                    raise GradError(f"{what} reads {acc.tensor} written by {describe(writer)} at an instance "
                                    f"that is not affine in the reader's loops; checkpoint='store' cannot index it")
                out.append((piece, self.element(writer, instance)))
                covered = piece if covered is None else covered.union(piece)
        rest = domain if covered is None else domain.subtract(covered)
        rest = rest.intersect_params(m.context).coalesce()
        if not rest.is_empty():
            out.append((rest, acc))
        return out

    def statement(self, st: Statement) -> List[Statement]:
        """`st` as the definition of its own array, each read of a written array replaced by the
        value's source, chosen by an affine condition where it depends on the instance.  A sum
        accumulated in place (`_sum_depth`) stays an update of one element per instance of its outer
        loops, started by a copy of the value it adds to (a statement of its own, just before)."""
        written = set(self.writers)
        depth = self.depth[st.name]
        summed = depth < len(st.iterators)
        value = st.value if summed else _as_update_value(st, st.target)
        domain = self.model.domains[st.name].intersect_params(self.model.context)
        for acc in sorted({a for a in value.accesses() if a.tensor in written}, key=str):
            pieces = self.sources(describe(st), self.model.access_map(st, acc), acc, domain, self.model.schedule_map)
            value = _replace_access(value, acc, _chosen(pieces, domain, describe(st)))
        target = self.element(st, [Affine.var(i) for i in st.iterators])
        if not summed:
            return [st.with_(target=target, value=value, update=None)]
        return [self._start(st, target, domain), st.with_(target=target, value=value, reduction=())]

    def _start(self, st: Statement, target: Access, domain: isl.Set) -> Statement:
        """`X_S[outer] = <the value X[e] held before the sum's first update>`, over the instances of
        the sum's outer loops; the sources come from the dataflow of the updates' own read of `e`
        (those not reading the sum's running value are its first updates)."""
        depth = self.depth[st.name]
        n = len(st.iterators)
        pieces = self.sources(describe(st), self.model.access_map(st, st.target), st.target, domain,
                              self.model.schedule_map)
        outer = domain.project_out(isl.dim_type.set, depth, n - depth)
        starts = []
        for piece, src in pieces:
            if src.tensor == target.tensor:
                continue                       # the running sum itself
            if any(set(e.variables) & set(st.iterators[depth:]) for e in src.indices):
                raise GradError(f"{describe(st)}: the value a sum starts from depends on the summed loops; "
                                f"checkpoint='store' does not support this kernel")
            starts.append((piece.project_out(isl.dim_type.set, depth, n - depth).coalesce(), src))
        if not starts:
            raise GradError(f"{describe(st)}: no value found for the sum to start from")
        conj = set_dnf(outer)
        if not conj:
            raise GradError(f"{describe(st)}: the loops around the sum are not described without integer divisions; "
                            f"checkpoint='store' does not support this kernel")
        return Statement(name=f"{st.name}_start", iterators=st.iterators[:depth], domain=conj, target=target,
                         value=_chosen(starts, outer, describe(st)), order=st.order[:depth] + (-1,),
                         location=st.location, text=st.text)

    def finals(self, tensor: TensorDecl, order0: int) -> Tuple[List[Statement], str]:
        """`X_final[e] = <last value of X[e]>` for every element of `tensor`, after everything."""
        m = self.model
        shape = tensor.shape or ()
        its = [f"e{k}" for k in range(len(shape))]
        rng = " and ".join(f"0 <= {isl_name(i)} < {affine_str(e)}" for i, e in zip(its, shape)) or "true"
        space = tuple_str(_FINAL, its)
        domain = isl.Set(f"{m.pstr} -> {{ {space} : {rng} }}").intersect_params(m.context)
        n_out = 2 * m.depth + 1
        when = isl.Map(f"{m.pstr} -> {{ {space} -> [{', '.join([str(order0)] + ['0'] * (n_out - 1))}] }}")
        schedule = m.schedule_map.union(isl.UnionMap.from_map(when.intersect_domain(domain)))
        sink = isl.Map(f"{m.pstr} -> {{ {space} -> {tuple_str(tensor.name, its)} }}")
        pieces = self.sources("the end of the kernel", sink, Access(tensor.name, tuple(Affine.var(i) for i in its)),
                              domain, schedule)
        final = fresh_name(f"{tensor.name}_final", self.taken)
        if tensor.role != "inout":
            # never written: an output keeps its zeros
            pieces = [(p, a) for p, a in pieces if a.tensor != tensor.name] + [(domain, ZERO)]
        value = _chosen(pieces, domain, f"the last writes of {tensor.name}")
        rng_dnf = (within([Affine.var(i) for i in its], shape),)
        return Statement(name="F", iterators=tuple(its), domain=rng_dnf,
                         target=Access(final, tuple(Affine.var(i) for i in its)), value=value,
                         order=(order0,) + (0,) * len(its)), final


def _condition(piece: isl.Set, domain: isl.Set, what: str):
    """The affine condition selecting `piece` within `domain`, as an expression."""
    simple = piece.gist(domain).coalesce()
    conjs = []
    for b in simple.get_basic_sets():
        conj = basic_set_constraints(b)
        if conj is None:
            raise GradError(f"{what}: the instances reading each source are not described without integer "
                            f"divisions; checkpoint='store' does not support this kernel")
        conjs.append(tuple(conj))
    if any(not conj for conj in conjs):
        return None      # the piece is all of the domain
    return dnf_condition(tuple(conjs))


def _chosen(pieces, domain: isl.Set, what: str):
    """One expression reading each piece's source where its condition holds (the last one elsewhere)."""
    if len(pieces) > MAX_PIECES:
        raise GradError(f"{what}: a read gets its values from over {MAX_PIECES} places; checkpoint='store' "
                        f"does not support this kernel")
    expr = pieces[-1][1]
    for piece, src in reversed(pieces[:-1]):
        cond = _condition(piece, domain, what)
        expr = src if cond is None else Select(cond, src, expr)
    return expr


def _sum_depth(program: Program, st: Statement) -> int:
    """For a sum accumulated in place, `X[e] += v` with `e` and `v`'s reads of X free of its innermost
    loops, alone in those loops: the number of loops outside them (its array then keeps one running
    value per instance of those, not one per summed iteration: a matrix-vector product inside a
    time loop stores T * N values, not T * N * N).  0 for any other statement."""
    if st.update != "+" or st.divisions or st.target.tensor in {a.tensor for a in st.value.accesses()}:
        return 0
    used = {v for e in st.target.indices for v in e.variables}
    depth = len(st.iterators)
    while depth > 0 and st.iterators[depth - 1] not in used:
        depth -= 1
    if depth == len(st.iterators) or any(set(e.variables) & set(st.iterators[depth:]) for e in st.target.indices):
        return 0
    prefix = st.order[:depth + 1]
    if any(o is not st and o.order[:depth + 1] == prefix and len(o.iterators) > depth for o in program.statements):
        return 0        # another statement shares the summed loops: its reads would see partial sums
    return depth


def _next_position(start: Statement, statements: Sequence[Statement]) -> int:
    """The position at its loop depth of the sum `start` starts (the statement after it)."""
    k = statements.index(start)
    return statements[k + 1].order[len(start.iterators)]


def _pieces(pma: isl.PwMultiAff) -> List[Tuple[isl.Set, isl.MultiAff]]:
    out: List[Tuple[isl.Set, isl.MultiAff]] = []
    pma.foreach_piece(lambda s, ma: out.append((s, ma)))
    return out


def _maps(umap: isl.UnionMap) -> List[isl.Map]:
    out: List[isl.Map] = []
    umap.foreach_map(out.append)
    return out


def expand(program: Program) -> Expanded:
    """The single-assignment form of (shape-inferred) `program` (see the module docstring)."""
    for st in program.statements:
        if st.divisions:
            raise GradError(f"{describe(st)} uses a floor division or min/max in a subscript; checkpoint='store' "
                            f"does not support those yet")
    try:
        with isl_budget("expanding the kernel's arrays (checkpoint='store')"):
            ex = _Expander(program)
            statements: List[Statement] = [x for st in program.statements for x in ex.statement(st)]
            last = 1 + max(st.order[0] for st in program.statements)
            finals: List[Tuple[str, str]] = []
            for t in program.tensors:
                if t.name in ex.writers and t.role in ("output", "inout"):
                    st, name = ex.finals(t, last + len(finals))
                    statements.append(st)
                    finals.append((t.name, name))
    except IslBudgetError as e:
        raise GradError(f"checkpoint='store': {e}") from None
    tensors: List[TensorDecl] = []
    read = {a.tensor for st in statements for a in st.value.accesses()}
    for t in program.tensors:
        if t.name not in ex.writers:
            tensors.append(t)
        elif t.name in read:
            tensors.append(TensorDecl(t.name, t.dtype, t.shape, "input", declared=True))
    for st in program.statements:
        ext = tuple(n for _, n in ex.bounds[st.name])
        tensors.append(TensorDecl(ex.name[st.name], program.tensor(st.target.tensor).dtype, ext, "temp"))
    for t, final in finals:
        decl = program.tensor(t)
        tensors.append(TensorDecl(final, decl.dtype, decl.shape, "output", declared=True))
    # A sum's start runs just before its loop: positions are doubled to make room (`order` -1 above).
    statements = [st.with_(name=f"S{k}", order=tuple(2 * c for c in st.order[:-1]) +
                           ((2 * st.order[-1]) if st.order[-1] >= 0 else
                            (2 * _next_position(st, statements) - 1),))
                  for k, st in enumerate(statements)]
    out = program.with_(tensors=tuple(tensors), statements=tuple(statements), frontend="python")
    return Expanded(out, tuple(finals))
