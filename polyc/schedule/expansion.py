"""Array expansion for `schedule="auto"`: a temporary that every iteration of some outer loops reuses,
given one copy per iteration when that turns a statement into a contraction the scheduler packs.

PolyBench's doitgen sums into `total[p]` for every `(r, q)`, then copies the sums back into
`A[r, q, p]`.  As written, `total[p] += A[r, q, s] * C4[s, p]` is not a contraction (loops `r` and
`q` index one factor only) and the loops over `(r, q)` carry anti and output dependences on
`total`: little can be done.  With `total` expanded to `total_x[r, q, p]` (one row per `(r, q)`),
the statement is a matrix product of `(r, q)` rows by `C4`, which `"auto"` packs like BLAS; the
run goes from ~400 ms to ~40 ms at PolyBench's LARGE size.

A tensor `T` is expanded along the loops around every statement that touches it when isl proves:

- every value-based flow dependence on `T` stays inside one iteration of those loops (no value
  crosses iterations), and every read of `T` has a source there (none reads what was passed in);
- for an array the caller sees (`inout`, `output`), every element the loops write is written in
  their last iteration, whose values are copied back after the loops (so the result is the same);

and when, after expansion, a statement updating `T` is a contraction it was not before.  The
expanded array is a temporary with the loops' extents in front of `T`'s shape; to keep memory in
bounds it must have exactly the shape of an array the kernel already takes.  The kernel keeps its
parameters; `pc.compile(k, "auto")` compiles the expanded kernel (`f.kernel`) and says so in a note.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import islpy as isl

from ..errors import IslBudgetError, PolycError
from ..ir import Access, Affine, Program, Statement, TensorDecl, rebuild
from ..poly.contraction import contraction_form
from ..poly.islutil import affine_str, isl_budget, isl_name, pw_aff_to_affine, set_dnf
from ..poly.model import PolyModel, tuple_str
from .rewrite import fresh_name


def _common_depth(statements: Sequence[Statement]) -> int:
    """How many loops all `statements` share (same positions in the source order, each loop there)."""
    depth = min(len(st.iterators) for st in statements)
    for k in range(depth):
        if len({st.order[:k + 1] for st in statements}) != 1 or len({st.iterators[k] for st in statements}) != 1:
            return k
    return depth


def _flows_stay_inside(model: PolyModel, tensor: str, depth: int) -> bool:
    """Every flow dependence on `tensor` joins instances with equal values of the first `depth` loops."""
    for dep in model.dependences:
        if dep.array != tensor or dep.kind != "flow":
            continue
        rel = dep.relation.intersect_params(model.context)
        for k in range(depth):
            for op in ("<", ">"):
                src = ", ".join(f"s{j}" for j in range(rel.dim(isl.dim_type.in_)))
                dst = ", ".join(f"d{j}" for j in range(rel.dim(isl.dim_type.out)))
                apart = isl.Map(f"{model.pstr} -> {{ [{src}] -> [{dst}] : s{k} {op} d{k} }}")
                apart = apart.set_tuple_id(isl.dim_type.in_, rel.get_tuple_id(isl.dim_type.in_))
                apart = apart.set_tuple_id(isl.dim_type.out, rel.get_tuple_id(isl.dim_type.out))
                if not rel.intersect(apart.align_params(rel.get_space())).is_empty():
                    return False
    return True


def _reads_have_sources(model: PolyModel, tensor: str) -> bool:
    """Every read of `tensor` reads a value the kernel wrote (none what was passed in)."""
    space = model.tensor_space_set(tensor, len(model.program.tensor(tensor).shape or ()))
    reads = model.reads.intersect_range(space)
    if reads.is_empty():
        return True
    writes = model.writes.intersect_range(space)
    flow = (isl.UnionAccessInfo.from_sink(reads).set_must_source(writes)
            .set_schedule_map(model.schedule_map).compute_flow())
    return flow.get_may_no_source().intersect_params(model.context).is_empty()


def _prefix(model: PolyModel, st: Statement, depth: int) -> isl.Set:
    """The values of `st`'s first `depth` loops, over an anonymous tuple (comparable across the
    statements sharing those loops, whose iterators carry the same names)."""
    dom = model.domains[st.name].intersect_params(model.context)
    return dom.project_out(isl.dim_type.set, depth, len(st.iterators) - depth).reset_tuple_id()


class _Candidate:
    """One tensor's expansion, worked out (or `reason` why not)."""

    def __init__(self, program: Program, model: PolyModel, tensor: TensorDecl):
        self.program, self.model, self.tensor = program, model, tensor
        self.touching = [st for st in program.statements
                         if st.target.tensor == tensor.name or tensor.name in {a.tensor for a in st.value.accesses()}]
        self.depth = _common_depth(self.touching) if self.touching else 0

    def expanded(self, name: str) -> Optional[Program]:
        """The program with `tensor` expanded as `name`, or None when it may not or need not be."""
        t, depth, model = self.tensor, self.depth, self.model
        if depth == 0 or any(st.divisions for st in self.touching) or not t.shape:
            return None
        if not _flows_stay_inside(model, t.name, depth) or not _reads_have_sources(model, t.name):
            return None
        prefixes = None
        for st in self.touching:
            p = _prefix(model, st, depth)
            prefixes = p if prefixes is None else prefixes.union(p)
        bounds: List[Tuple[Affine, Affine]] = []
        for k in range(depth):
            lo = pw_aff_to_affine(prefixes.dim_min(k), model.context)
            hi = pw_aff_to_affine(prefixes.dim_max(k), model.context)
            if lo is None or hi is None:
                return None
            bounds.append((lo, hi - lo + 1))
        shape = tuple(e for _, e in bounds) + tuple(t.shape)
        if not any(tuple(x.shape or ()) == shape for x in self.program.tensors if x.role != "temp"):
            return None            # memory: no larger than an array the kernel already takes
        its = self.touching[0].iterators[:depth]

        def widen(acc: Access) -> Access:
            return Access(name, tuple(Affine.var(i) - lo for i, (lo, _) in zip(its, bounds)) + acc.indices)

        def rewrite(e):
            return rebuild(e, lambda x: widen(x) if isinstance(x, Access) and x.tensor == t.name else None)
        statements = []
        for st in self.program.statements:
            if st in self.touching:
                target = widen(st.target) if st.target.tensor == t.name else st.target
                st = st.with_(target=target, value=rewrite(st.value))
            statements.append(st.with_(order=(2 * st.order[0],) + st.order[1:]))
        tensors = [x for x in self.program.tensors if x.name != t.name or t.role != "temp"]
        tensors.append(TensorDecl(name, t.dtype, shape, "temp"))
        if t.role != "temp":
            copy = self._copy_back(name, bounds, prefixes, 2 * self.touching[0].order[0] + 1)
            if copy is None:
                return None
            statements.append(copy)
        out = self.program.with_(tensors=tuple(tensors), statements=tuple(statements))
        before = {st.name: contraction_form(self.program, st.name) for st in self.touching
                  if st.target.tensor == t.name and st.update}
        gained = [n for n, c in before.items() if isinstance(c, str) and not isinstance(contraction_form(out, n), str)]
        return out if gained else None

    def _copy_back(self, name: str, bounds, prefixes: isl.Set, position: int) -> Optional[Statement]:
        """`T[e] = T_x[last, e]` over the elements written, when the last iteration writes them all."""
        model, t = self.model, self.tensor
        last = prefixes.lexmax()
        point = []
        for k in range(self.depth):
            v = pw_aff_to_affine(last.dim_max(k), model.context)
            if v is None:
                return None
            point.append(v)
        written_all, written_last = None, None
        for st in self.touching:
            if st.target.tensor != t.name:
                continue
            amap = model.access_map(st, st.target).intersect_domain(model.domains[st.name])
            at_last = " and ".join(f"{isl_name(st.iterators[k])} = {affine_str(v)}" for k, v in enumerate(point))
            fix = isl.Set(f"{model.pstr} -> {{ {tuple_str(st.name, st.iterators)} : {at_last} }}")
            w_all = amap.range()
            w_last = amap.intersect_domain(fix).range()
            written_all = w_all if written_all is None else written_all.union(w_all)
            written_last = w_last if written_last is None else written_last.union(w_last)
        if written_all is None:
            return None
        if not written_all.intersect_params(model.context).is_subset(written_last):
            return None
        elems = [f"e{k}" for k in range(len(t.shape))]
        region = written_last.intersect_params(model.context).coalesce()
        region = region.reset_space(isl.Set(f"{model.pstr} -> {{ [{', '.join(isl_name(e) for e in elems)}] }}")
                                    .align_params(region.get_space()).get_space())
        dnf = set_dnf(region)
        if not dnf:
            return None
        index = tuple(v - lo for v, (lo, _) in zip(point, bounds)) + tuple(Affine.var(e) for e in elems)
        taken = {st.name for st in self.program.statements}
        return Statement(name=fresh_name(f"S{len(taken)}", taken), iterators=tuple(elems), domain=dnf,
                         target=Access(t.name, tuple(Affine.var(e) for e in elems)), value=Access(name, index),
                         order=(position,) + (0,) * len(elems))


def expand_for_contraction(program: Program) -> Tuple[Program, Tuple[str, ...]]:
    """`program` with every temporary expanded that `"auto"` gains a contraction from (see the
    module docstring), and one note per expansion; unchanged (and no notes) when none applies.
    Loop kernels only (Einstein kernels define each element once)."""
    if program.frontend != "python":
        return program, ()
    notes: List[str] = []
    taken = {t.name for t in program.tensors} | set(program.sizes) | {s.name for s in program.scalars}
    for t in [x for x in program.tensors if x.role != "input"]:
        try:
            with isl_budget(f"deciding whether to expand {t.name}"):
                model = PolyModel(program)
                name = fresh_name(f"{t.name}_x", taken)
                out = _Candidate(program, model, t).expanded(name)
        except (IslBudgetError, PolycError, isl.Error):
            out = None
        if out is not None:
            program = out
            notes.append(f"{t.name} expanded to {name} (one copy per iteration of the loops around it), "
                         f"so a statement updating it runs as a packed contraction")
    return program, tuple(notes)

