"""`Schedule`: when each statement instance runs, as one isl map per statement into a shared,
named schedule space, plus marks (parallel, vector, unroll) on named loop dimensions.

Design choice: the schedule is kept as per-statement affine maps into an n-dimensional time
space whose dimensions have names (`i`, `i_outer`, ...), rather than as an isl schedule tree.
Every primitive (tile, interchange, skew, fuse, ...) is then one quasi-affine map applied to
that space or to some statements, legality is one isl question over all dependences, and code
generation is `AstBuild.node_from_schedule_map` with the dimension names as loop iterators, so
a mark on a name lands on exactly the loop the user named.  `tree` gives the nested-outline view.

Dimensions are either *loops* (named, they become `for` loops) or *scalar* dimensions
(name `None`, constant per statement: they encode textual order, fusion and distribution).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict, FrozenSet, Mapping, Optional, Tuple

import islpy as isl

from ..poly.islutil import isl_name
from ..poly.model import PolyModel

#: Marks a loop dimension may carry.
MARKS = ("parallel", "vector", "unroll", "reduction_parallel", "block", "thread")


@dataclass(frozen=True)
class Dim:
    """One schedule dimension: `name` is None for a scalar (ordering) dimension."""

    name: Optional[str]
    marks: FrozenSet[str] = frozenset()
    unroll: int = 0             # 0: none; -1: full; n>1: by factor n
    origin: Optional[str] = None  # the user index this loop iterates (for tile/split results)

    @property
    def is_loop(self) -> bool:
        return self.name is not None


def _fresh(base: str, taken: set) -> str:
    """`base`, or `base_1`, `base_2`, ... : a loop name no tensor, scalar, size or index uses."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


@dataclass(frozen=True)
class Schedule:
    """An immutable schedule of a kernel's statements.  Every primitive returns a new Schedule."""

    model: PolyModel
    maps: Tuple[Tuple[str, str], ...]     # (statement name, isl map text) in statement order
    dims: Tuple[Dim, ...]
    history: Tuple[str, ...] = ()
    options: Tuple[Tuple[str, object], ...] = ()

    # -- construction --------------------------------------------------------------------------
    @staticmethod
    def source_order(model: PolyModel) -> "Schedule":
        """The schedule that runs statements as written: the 2d+1 source order."""
        depth = model.depth
        program = model.program
        taken = {t.name for t in program.tensors} | {x.name for x in program.scalars} | set(program.sizes) \
            | {i for st in program.statements for i in st.iterators}
        dims = []
        for k in range(2 * depth + 1):
            if k % 2 == 0:
                dims.append(Dim(None))
            else:
                names = {st.iterators[k // 2] for st in model.program.statements if len(st.iterators) > k // 2}
                name = names.pop() if len(names) == 1 else _fresh(f"c{k // 2}", taken)
                dims.append(Dim(name, origin=name))
        maps = tuple((st.name, str(model.statement_schedule(st))) for st in model.program.statements)
        return Schedule(model, maps, tuple(dims))

    # -- isl views -----------------------------------------------------------------------------
    def statement_map(self, name: str) -> isl.Map:
        return isl.Map(dict(self.maps)[name])

    @property
    def schedule_map(self) -> isl.UnionMap:
        """The union of statement schedules restricted to their domains."""
        out = isl.UnionMap.empty(isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
        for name, text in self.maps:
            out = out.union(isl.UnionMap.from_map(isl.Map(text).intersect_domain(self.model.domains[name])))
        return out

    # -- names ---------------------------------------------------------------------------------
    @property
    def loop_names(self) -> Tuple[str, ...]:
        return tuple(d.name for d in self.dims if d.name is not None)

    def dim_index(self, loop: str) -> int:
        for k, d in enumerate(self.dims):
            if d.name == loop:
                return k
        known = ", ".join(self.loop_names)
        from ..errors import PolycError
        raise PolycError(f"no loop named {loop!r} in this schedule; its loops are: {known}")

    def iterator_names(self) -> Tuple[str, ...]:
        """C names for every dimension (scalar dimensions get placeholders isl never prints)."""
        return tuple(isl_name(d.name) if d.name else f"_s{k}" for k, d in enumerate(self.dims))

    # -- marks ---------------------------------------------------------------------------------
    def with_dims(self, dims: Tuple[Dim, ...], note: str) -> "Schedule":
        return replace(self, dims=dims, history=self.history + (note,))

    def with_mark(self, loop: str, mark: str, note: str, **dim_changes) -> "Schedule":
        k = self.dim_index(loop)
        dims = list(self.dims)
        dims[k] = replace(dims[k], marks=dims[k].marks | {mark}, **dim_changes)
        return self.with_dims(tuple(dims), note)

    def option(self, key: str, default=None):
        return dict(self.options).get(key, default)

    def __repr__(self) -> str:
        steps = ".".join(self.history) if self.history else "source order"
        return f"<Schedule of {self.model.program.name}: {steps}; loops {', '.join(self.loop_names)}>"
