"""Exact dependences between statement instances, computed by isl's dataflow analysis.

- flow (read after write) is value-based: each read depends on the *last* write of its value;
- anti (write after read) and output (write after write) are memory-based.
Together these are exactly what a reordering must preserve (the arrays are not renamed).

On a tensor updated by commutative updates (integer `max`/`min`, `poly.commutative`) every flow
dependence is memory-based too, and those joining two such updates of one element are marked
`reorderable`: a schedule may swap them, but not run them at the same time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, List, Optional, Tuple

import islpy as isl

from . import commutative
from .islutil import budget_exhausted
from .islutil import isl_budget, sample_point_values, union_map_pieces as _maps, user_name

if TYPE_CHECKING:   # the model computes its dependences (`PolyModel.dependences`), not the reverse
    from .model import PolyModel


@dataclass(frozen=True)
class Dependence:
    """Instances of `sink` that must run after instances of `source`, because of `array`.

    `relation` maps source instances to sink instances (isl Map, with parameters = sizes).
    """

    kind: str          # "flow", "anti" or "output"
    source: str
    sink: str
    array: str
    relation: isl.Map
    _model: Optional[PolyModel] = field(default=None, repr=False, compare=False)
    #: Only joins two commutative updates of one element (`poly.commutative`): a schedule may
    #: run them in either order, never at the same time.
    reorderable: bool = False

    @cached_property
    def distances(self) -> Tuple[Tuple[int, ...], ...]:
        """Constant distance vectors (sink - source), one per pair of references that is uniform.

        Only for dependences of a statement on itself.  Computed per pair of references (the
        source's access and the sink's access to the same element), where stencil dependences are
        uniform even when the whole relation, a union over references, is not.
        """
        if self.source != self.sink or self._model is None:
            return ()
        st = self._model.program.statement(self.source)
        accesses = [a for a in (st.target,) + st.reads() if a.tensor == self.array]
        found = []
        for a in accesses:
            for b in accesses:
                same = self._model.access_map(st, a).apply_range(self._model.access_map(st, b).reverse())
                pairs = self.relation.intersect(same)
                if pairs.is_empty():
                    continue
                d = _uniform_delta(pairs.deltas())
                if d is not None and d not in found:
                    found.append(d)
        return tuple(sorted(found))

    @property
    def distance(self) -> Optional[Tuple[int, ...]]:
        """The distance vector when there is exactly one (see `distances`), else None."""
        ds = self.distances
        return ds[0] if len(ds) == 1 else None

    def example(self, context: Optional[isl.Set] = None):
        """One concrete pair: (size values, source instance, sink instance)."""
        rel = self.relation if context is None else self.relation.intersect_params(context)
        wrapped = rel.wrap()
        params, coords = sample_point_values(wrapped)
        n_in = rel.dim(isl.dim_type.in_)
        return params, coords[:n_in], coords[n_in:]

    def __str__(self) -> str:
        text = f"{self.relation} on {self.array} ({self.kind}{', either order' if self.reorderable else ''})"
        ds = self.distances
        if ds:
            word = "distance" if len(ds) == 1 else "distances"
            text += f", {word} " + ", ".join(f"({', '.join(map(str, d))})" for d in ds)
        return text


def _uniform_delta(deltas: isl.Set) -> Optional[Tuple[int, ...]]:
    """The single point of `deltas` if it holds the same point for all sizes, else None."""
    if deltas.is_empty():
        return None
    _, point = sample_point_values(deltas)
    name = deltas.get_tuple_name() or ""
    cond = " and ".join(f"d{k} = {v}" for k, v in enumerate(point)) or "true"
    only = isl.Set(f"{{ {name}[{', '.join(f'd{k}' for k in range(len(point)))}] : {cond} }}")
    return tuple(point) if deltas.is_subset(only.align_params(deltas.get_space())) else None


def compute_flow(sink: isl.UnionMap, source: isl.UnionMap, schedule_map: isl.UnionMap,
                 must: bool) -> isl.UnionMap:
    """Source instance -> sink instance dependences, by isl's dataflow analysis: with `must`, the
    last source before each sink instance (sources kill earlier ones), else every earlier source.

    Some inputs make `isl_union_access_info_compute_flow` fail with an internal error ("affine
    expression involves some of the domain dimensions", seen with a triangular loop under a strided
    one); the same relation is then computed from its definition with isl set operations.
    """
    info = isl.UnionAccessInfo.from_sink(sink)
    info = info.set_must_source(source) if must else info.set_may_source(source)
    try:
        flow = info.set_schedule_map(schedule_map).compute_flow()
    except isl.Error as e:
        if "operations" in str(e) or budget_exhausted(isl.DEFAULT_CONTEXT):
            raise
        return dependences_by_definition(sink, source, schedule_map, must)
    return flow.get_must_dependence() if must else flow.get_may_dependence()


def dependences_by_definition(sink: isl.UnionMap, source: isl.UnionMap, schedule_map: isl.UnionMap,
                              last_only: bool) -> isl.UnionMap:
    """What `compute_flow` computes, from the definition: pairs of instances touching one element,
    the source strictly earlier in `schedule_map` (injective); with `last_only` only the latest
    such source for each element a sink instance accesses (`A[i - 1]` and `A[i + 1]` each have
    their own last writer), so the analysis runs on wrapped (sink instance -> element) pairs."""
    instance = sink.domain_map()                                  # [r -> e] -> r
    pairs = sink.range_map().apply_range(source.reverse())        # [r -> e] -> w, w accesses e
    pairs = pairs.intersect(instance.apply_range(schedule_map.lex_gt_union_map(schedule_map)))
    if last_only:
        pairs = pairs.apply_range(schedule_map).lexmax().apply_range(schedule_map.reverse())
    return pairs.reverse().apply_range(instance)


class Dependences:
    """All dependences of a program; iterable, printable, and filterable by kind."""

    def __init__(self, model: PolyModel):
        self.model = model
        self.items: List[Dependence] = self._compute()

    def _compute(self) -> List[Dependence]:
        m = self.model
        out: List[Dependence] = []
        for t in m.program.tensors:
            space = m.tensor_space_set(t.name, len(t.shape or ()))
            reads = m.reads.intersect_range(space)
            writes = m.writes.intersect_range(space)
            if writes.is_empty():
                continue
            with isl_budget(f"computing the dependences on {t.name}"):
                if commutative.groups(m.program, t.name):
                    found = commutative.tensor_dependences(m, t.name, compute_flow)
                else:
                    # only the statements touching `t` (isl's analysis grows with the schedule it
                    # is given: the whole one made a kernel of many independent statements quadratic)
                    sched = m.schedule_map.intersect_domain(reads.domain().union(writes.domain()))
                    found = [("flow", compute_flow(reads, writes, sched, must=True), False),
                             ("anti", compute_flow(writes, reads, sched, must=False), False),
                             ("output", compute_flow(writes, writes, sched, must=False), False)]
            for kind, umap, reorderable in found:
                for rel in _maps(umap.coalesce()):
                    if rel.is_empty():
                        continue
                    out.append(Dependence(kind, user_name(rel.get_tuple_name(isl.dim_type.in_)),
                                          user_name(rel.get_tuple_name(isl.dim_type.out)), t.name, rel, m,
                                          reorderable))
        return out

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def of_kind(self, kind: str) -> List[Dependence]:
        return [d for d in self.items if d.kind == kind]

    def union_map(self) -> isl.UnionMap:
        out = isl.UnionMap.empty(isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
        for d in self.items:
            out = out.union(isl.UnionMap.from_map(d.relation))
        return out

    def __str__(self) -> str:
        return "\n".join(str(d) for d in self.items) or "(no dependences)"

    def _repr_html_(self) -> str:
        from ..display import html_of
        return html_of("dependences", self)

    __repr__ = __str__
