"""Concrete points of iteration domains and dependences, enumerated by isl for pictures.

The plots draw *instances*: lattice points of a statement's domain once the sizes are fixed, and
dependence pairs between such points.  All of it is asked of isl (fix parameters, fix the
iterators outside the picture, `foreach_point`); nothing here re-derives a set by hand.  A hard
cap on the number of points keeps a picture of a large size from hanging a notebook.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import islpy as isl

from ..errors import PolycError
from ..poly.islutil import isl_name
from ..poly.model import PolyModel

#: Most points enumerated for one picture (checked on the bounding box, before enumerating).
MAX_POINTS = 20000
#: The same for dependence pairs, whose bounding box (source box x sink box) is much looser.
MAX_PAIR_BOX = 5_000_000

Point = Tuple[int, ...]


@dataclass(frozen=True)
class Slice:
    """A 2-D (or 1-D) window on some statements' domains.

    `dims`: the iterator names drawn on the axes; `fixed`: every other iterator's value (per
    iterator name, shared by all statements); `sizes`: the parameter values.
    """

    model: PolyModel
    statements: Tuple[str, ...]
    dims: Tuple[str, ...]
    fixed: Tuple[Tuple[str, int], ...]
    sizes: Tuple[Tuple[str, int], ...]

    def domain(self, statement: str) -> isl.Set:
        """The statement's domain with sizes fixed and off-axis iterators fixed (params kept, fixed)."""
        dom = fix_sizes(self.model.domains[statement], dict(self.sizes))
        st = self.model.program.statement(statement)
        fixed = dict(self.fixed)
        for k, it in enumerate(st.iterators):
            if it in fixed and it not in self.dims:
                dom = dom.fix_val(isl.dim_type.set, k, fixed[it])
        return dom

    def axis_positions(self, statement: str) -> Tuple[int, ...]:
        """Index of each axis iterator among the statement's iterators."""
        its = self.model.program.statement(statement).iterators
        return tuple(its.index(d) for d in self.dims)


def model_of(kernel_or_model) -> PolyModel:
    """A PolyModel from a Kernel, a Schedule or a PolyModel."""
    if isinstance(kernel_or_model, PolyModel):
        return kernel_or_model
    model = getattr(kernel_or_model, "model", None)
    if isinstance(model, PolyModel):
        return model
    raise PolycError(f"expected a kernel, a schedule or a PolyModel, not {type(kernel_or_model).__name__}")


def fix_sizes(obj, sizes: Mapping[str, int]):
    """`obj` (isl Set or Map) with every parameter fixed to its value in `sizes`.

    Raises PolycError naming the sizes that are missing.
    """
    space = obj.get_space()
    n = space.dim(isl.dim_type.param)
    names = [space.get_dim_name(isl.dim_type.param, k) for k in range(n)]
    by_isl = {isl_name(k): int(v) for k, v in sizes.items()}
    missing = [p for p in names if p not in by_isl]
    if missing:
        raise PolycError(f"give a value for every size to draw a picture: missing {', '.join(missing)} "
                         f"(e.g. sizes={{{', '.join(repr(m) + ': 8' for m in missing)}}})")
    for k, p in enumerate(names):
        obj = obj.fix_val(isl.dim_type.param, k, by_isl[p])
    return obj


def enumerate_points(s: isl.Set, limit: int = MAX_POINTS) -> List[Point]:
    """All integer points of a bounded set (parameters must be fixed), in lexicographic order."""
    if s.is_empty():
        return []
    s = s.project_out(isl.dim_type.param, 0, s.dim(isl.dim_type.param))
    if not s.is_bounded():
        raise PolycError("the set to draw is unbounded; fix more sizes or iterators")
    n = s.dim(isl.dim_type.set)
    # The bounding box bounds the number of points cheaply, before enumerating anything.
    box = 1
    for k in range(n):
        box *= int(s.dim_max_val(k).to_python()) - int(s.dim_min_val(k).to_python()) + 1
    if box > limit:
        raise PolycError(f"the picture could have up to {box} points (more than {limit}); use smaller "
                         f"sizes or fix more iterators")
    out: List[Point] = []

    def visit(p: isl.Point) -> None:
        out.append(tuple(int(p.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(n)))

    s.foreach_point(visit)
    return sorted(out)


def enumerate_pairs(rel: isl.Map, limit: int = MAX_PAIR_BOX) -> List[Tuple[Point, Point]]:
    """All (source, sink) pairs of a bounded relation with fixed parameters."""
    n_in = rel.dim(isl.dim_type.in_)
    pts = enumerate_points(rel.wrap(), limit)
    return [(p[:n_in], p[n_in:]) for p in pts]


def make_slice(model: PolyModel, statement: Optional[str], sizes: Mapping[str, int],
               dims: Optional[Sequence[str]], fix: Optional[Mapping[str, int]]) -> Slice:
    """Choose statements, axes and fixed iterators for a picture.

    - `statement=None`: every statement whose iterators include all of `dims`;
    - `dims=None`: the first two iterators of the first statement with at least two (else one);
    - iterators that are neither on an axis nor in `fix` are fixed to their smallest value.
    """
    program = model.program
    statements = program.statements
    if statement is not None:
        chosen = [program.statement(statement)] if statement in {s.name for s in statements} else None
        if chosen is None:
            raise PolycError(f"no statement named {statement!r}; the statements are "
                             f"{', '.join(s.name for s in statements)}")
    else:
        chosen = list(statements)
    if dims is None:
        first = next((s for s in chosen if len(s.iterators) >= 2), None) or \
            next((s for s in chosen if s.iterators), None)
        if first is None:
            raise PolycError("no statement with a loop to draw")
        dims = tuple(first.iterators[:2])
    dims = tuple(dims)
    if not 1 <= len(dims) <= 2:
        raise PolycError(f"draw one or two iterators, not {len(dims)}: {dims}")
    drawn = [s for s in chosen if all(d in s.iterators for d in dims)]
    if not drawn:
        raise PolycError(f"no statement iterates over {', '.join(dims)}")
    fixed: Dict[str, int] = {k: int(v) for k, v in (fix or {}).items()}
    for st in drawn:
        for k, it in enumerate(st.iterators):
            if it in dims or it in fixed:
                continue
            # Smallest value of the off-axis iterator over the domain with the sizes fixed.
            dom = fix_sizes(model.domains[st.name], sizes)
            for other, v in fixed.items():
                if other in st.iterators and other not in dims:
                    dom = dom.fix_val(isl.dim_type.set, st.iterators.index(other), v)
            if dom.is_empty():
                continue
            fixed[it] = int(dom.dim_min_val(k).to_python())
    return Slice(model, tuple(s.name for s in drawn), dims, tuple(sorted(fixed.items())),
                 tuple(sorted((k, int(v)) for k, v in sizes.items())))


def slice_points(sl: Slice) -> Dict[str, List[Point]]:
    """Per statement: the axis coordinates of every point of its slice."""
    out: Dict[str, List[Point]] = {}
    for name in sl.statements:
        pos = sl.axis_positions(name)
        pts = enumerate_points(sl.domain(name))
        out[name] = [tuple(p[k] for k in pos) for p in pts]
    return out


def slice_dependences(sl: Slice, deps, kinds: Sequence[str] = ("flow",)
                      ) -> List[Tuple[str, str, str, str, Point, Point]]:
    """Dependence pairs with both ends inside the slice: (kind, source, sink, array, from, to).

    `from`/`to` are axis coordinates.
    """
    out = []
    sizes = dict(sl.sizes)
    for d in deps:
        if d.kind not in kinds or d.source not in sl.statements or d.sink not in sl.statements:
            continue
        rel = fix_sizes(d.relation, sizes)
        rel = rel.intersect_domain(sl.domain(d.source)).intersect_range(sl.domain(d.sink))
        ps, pk = sl.axis_positions(d.source), sl.axis_positions(d.sink)
        for a, b in enumerate_pairs(rel):
            out.append((d.kind, d.source, d.sink, d.array, tuple(a[k] for k in ps), tuple(b[k] for k in pk)))
    return out


def schedule_times(schedule, sl: Slice, statement: str) -> Dict[Point, Tuple[int, ...]]:
    """For each axis point of `statement`'s slice: its time vector under `schedule`."""
    smap = fix_sizes(schedule.statement_map(statement), dict(sl.sizes))
    smap = smap.intersect_domain(sl.domain(statement))
    pos = sl.axis_positions(statement)
    out: Dict[Point, Tuple[int, ...]] = {}
    for a, t in enumerate_pairs(smap):
        out[tuple(a[k] for k in pos)] = t
    return out
