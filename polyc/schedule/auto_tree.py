"""isl schedule trees <-> polyc's flat `Schedule`, for the automatic scheduler.

isl's scheduler answers with a schedule *tree* (bands of affine members, sequences, filters).
polyc keeps schedules flat (one map per statement into a named time space, see `schedule.py`), so
the automatic scheduler works on a small tree of its own:

- `Band`: an isl band as it came (members per statement, permutable and coincident flags);
- `Nest`: a band after the automatic scheduler has decided its loops (tile loops, point loops,
  scalar ordering dimensions), as a list of `Loop`s;
- `Sequence`: children that run one after the other (isl sequences and sets alike);
- `Leaf`: the end of a branch.

`flatten` turns a tree of `Nest`/`Sequence`/`Leaf` into a `Schedule`.  Each child of a sequence
reuses the dimension positions of earlier children while their loops agree (same name, role and
unrolling), so the time space stays small and a loop keeps the user's index name wherever it can.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence as Seq, Tuple, Union

import islpy as isl

from ..poly.model import PolyModel
from .rewrite import fresh_name
from .schedule import Dim, Schedule, Unroll


class UnsupportedTree(Exception):
    """An isl schedule tree shape the converter does not handle (the caller falls back)."""


# -- the automatic scheduler's own tree ----------------------------------------------------------

Expr = Union[isl.PwAff, int]


@dataclass
class Loop:
    """One schedule dimension of a nest: `exprs` gives its value per statement.

    `name` is None for a scalar (ordering) dimension whose expressions are ints.  `role` says what
    the loop is for ("loop", "tile", "wave", "point", "strip", "register", "source", "scalar");
    `unroll=-1` marks a loop isl unrolls completely (a register-blocking lane).
    """

    exprs: Dict[str, Expr]
    name: Optional[str]
    role: str = "loop"
    origin: Optional[str] = None
    unroll: int = 0
    coincident: bool = False

    def key(self) -> tuple:
        return (self.name, self.role, self.origin, self.unroll)


@dataclass
class Leaf:
    statements: Tuple[str, ...]


@dataclass
class Band:
    statements: Tuple[str, ...]
    members: List[Dict[str, isl.PwAff]]
    coincident: List[bool]
    permutable: bool
    child: "Node"


@dataclass
class Nest:
    statements: Tuple[str, ...]
    loops: List[Loop]
    child: "Node"


@dataclass
class Sequence:
    statements: Tuple[str, ...]
    children: List["Node"]


Node = Union[Leaf, Band, Nest, Sequence]


# -- isl tree -> Band/Sequence/Leaf ----------------------------------------------------------------

def _filter_statements(filt: isl.UnionSet, model: PolyModel, among: Seq[str]) -> Tuple[str, ...]:
    """The statements a filter keeps; refuses filters that keep only part of a statement."""
    names = []
    for name in among:
        dom = model.domains[name].intersect_params(model.context)
        kept = filt.intersect(isl.UnionSet.from_set(dom))
        if kept.is_empty():
            continue
        if not isl.UnionSet.from_set(dom).is_subset(kept):
            raise UnsupportedTree(f"a filter keeps only part of statement {name}")
        names.append(name)
    return tuple(names)


def band_members(node: isl.ScheduleNode, model: PolyModel, statements: Seq[str]) -> List[Dict[str, isl.PwAff]]:
    """Per member, the member's expression on each statement (a PwAff on its domain space)."""
    n = node.band_n_member()
    umap = node.band_get_partial_schedule_union_map()
    members: List[Dict[str, isl.PwAff]] = [dict() for _ in range(n)]
    for name in statements:
        dom = model.domains[name]
        space = dom.get_space().from_domain().add_dims(isl.dim_type.out, n)
        m = umap.extract_map(space).intersect_domain(dom.intersect_params(model.context))
        pma = isl.PwMultiAff.from_map(m)
        for k in range(n):
            members[k][name] = pma.get_pw_aff(k).coalesce()
    return members


def tree_from_isl(schedule: isl.Schedule, model: PolyModel) -> Node:
    """Convert isl's answer into the scheduler's tree (bands kept as isl gave them)."""
    everything = tuple(st.name for st in model.program.statements)

    def walk(node: isl.ScheduleNode, statements: Tuple[str, ...]) -> Node:
        t = node.get_type()
        T = isl.schedule_node_type
        if t == T.domain:
            return walk(node.child(0), statements)
        if t == T.leaf:
            return Leaf(statements)
        if t == T.band:
            n = node.band_n_member()
            child = walk(node.child(0), statements)
            if n == 0:
                return child
            return Band(statements, band_members(node, model, statements),
                        [bool(node.band_member_get_coincident(k)) for k in range(n)],
                        bool(node.band_get_permutable()), child)
        if t in (T.sequence, T.set):
            kids = []
            for k in range(node.n_children()):
                filt_node = node.child(k)
                if filt_node.get_type() != T.filter:
                    raise UnsupportedTree("a sequence child that is not a filter")
                names = _filter_statements(filt_node.filter_get_filter(), model, statements)
                if names:
                    kids.append(walk(filt_node.child(0), names))
            if t == T.set:
                # A set's children may run in any order: run them in source order.
                order = {name: k for k, name in enumerate(everything)}
                kids.sort(key=lambda c: min(order[s] for s in c.statements))
            return Sequence(statements, kids)
        if t == T.filter:
            return walk(node.child(0), _filter_statements(node.filter_get_filter(), model, statements))
        raise UnsupportedTree(f"isl schedule node of type {t}")

    return walk(schedule.get_root(), everything)


# -- expressions ---------------------------------------------------------------------------------

def single_aff(pa: Expr) -> Optional[isl.Aff]:
    """The one affine piece of `pa` (None when piecewise)."""
    if isinstance(pa, int):
        return None
    pieces = pa.get_pieces()
    if len(pieces) != 1:
        affs = {str(a): a for _, a in pieces}
        if len(affs) != 1:
            # Pieces may differ in form only: on a piece where `i == k` (after `index_split`) isl
            # may write the column `i` as `k`.  One piece's expression that equals `pa` on its
            # whole domain is the function.
            domain = pa.domain()
            for aff in affs.values():
                if isl.PwAff.from_aff(aff).intersect_domain(domain).is_equal(pa):
                    return aff
            return None
    return pieces[0][1]


def aff_coefficients(pa: Expr, n_in: int) -> Optional[Tuple[List[int], bool]]:
    """Integer coefficients of the statement iterators in `pa`, and whether it is otherwise
    constant in them (no divisions); None when `pa` is not a plain affine function."""
    if isinstance(pa, int):
        return [0] * n_in, True
    aff = single_aff(pa)
    if aff is None or aff.dim(isl.dim_type.div) > 0 or aff.get_denominator_val().to_python() != 1:
        return None
    return [int(aff.get_coefficient_val(isl.dim_type.in_, k).to_python()) for k in range(n_in)], True


def expr_text(pa: Expr) -> Optional[str]:
    """An expression's text in the statement's iterator names (None when piecewise)."""
    if isinstance(pa, int):
        return str(pa)
    aff = single_aff(pa)
    if aff is None:
        return None
    text = str(aff)
    head, sep, tail = text.partition("-> [")
    if not sep:
        return None
    body = tail.rsplit("]", 1)[0].strip()
    return body


def is_constant(pa: Expr) -> bool:
    if isinstance(pa, int):
        return True
    n = pa.dim(isl.dim_type.in_)
    return not any(aff.involves_dims(isl.dim_type.in_, 0, n) for _, aff in pa.get_pieces())


def equals_iterator(pa: Expr, model: PolyModel, statement: str) -> Optional[str]:
    """The user index `pa` is equal to on `statement` (`i` for the member `i`), else None."""
    coeffs = aff_coefficients(pa, len(model.program.statement(statement).iterators))
    if coeffs is None:
        return None
    aff = single_aff(pa)
    if aff is None:
        return None
    cs = coeffs[0]
    nz = [k for k, c in enumerate(cs) if c]
    if len(nz) != 1 or cs[nz[0]] != 1:
        return None
    if not aff.get_constant_val().is_zero():
        return None
    for k in range(aff.dim(isl.dim_type.param)):
        if not aff.get_coefficient_val(isl.dim_type.param, k).is_zero():
            return None
    return model.program.statement(statement).iterators[nz[0]]


# -- Nest/Sequence/Leaf -> Schedule --------------------------------------------------------------

@dataclass
class _Flat:
    loops: List[Loop] = field(default_factory=list)          # templates (exprs unused here)
    cols: Dict[str, Dict[int, Expr]] = field(default_factory=dict)  # statement -> position -> expr


def _flatten(node: Node) -> _Flat:
    if isinstance(node, Leaf):
        return _Flat([], {s: {} for s in node.statements})
    if isinstance(node, Nest):
        inner = _flatten(node.child)
        n = len(node.loops)
        out = _Flat(list(node.loops) + inner.loops, {})
        for s in node.statements:
            col = {k: lp.exprs[s] for k, lp in enumerate(node.loops) if s in lp.exprs}
            for pos, e in inner.cols.get(s, {}).items():
                col[pos + n] = e
            out.cols[s] = col
        return out
    if isinstance(node, Sequence):
        out = _Flat([Loop({}, None, role="scalar")], {})
        for index, child in enumerate(node.children):
            flat = _flatten(child)
            mapping: List[int] = []
            pos, broken = 1, False
            for lp in flat.loops:
                if not broken and pos < len(out.loops) and out.loops[pos].key() == lp.key():
                    mapping.append(pos)
                    pos += 1
                else:
                    broken = True
                    mapping.append(len(out.loops))
                    out.loops.append(lp)
            for s in child.statements:
                col: Dict[int, Expr] = {0: index}
                for p, e in flat.cols.get(s, {}).items():
                    col[mapping[p]] = e
                out.cols[s] = col
        return out
    raise TypeError(f"flatten needs Nest/Sequence/Leaf nodes, not {type(node).__name__}")


def flatten(model: PolyModel, node: Node, history: Tuple[str, ...] = ()) -> Schedule:
    """The `Schedule` for a decided tree."""
    flat = _flatten(node)
    program = model.program
    # Loops keep the index names they iterate (`i`); made-up names (`t0`) avoid tensors, scalars, sizes.
    taken = {t.name for t in program.tensors} | {x.name for x in program.scalars} | set(program.sizes)
    dims: List[Dim] = []
    for lp in flat.loops:
        if lp.name is None:
            dims.append(Dim(None))
        else:
            dims.append(Dim(fresh_name(lp.name, taken), unroll=Unroll.from_legacy(lp.unroll), origin=lp.origin))
    n = len(dims)
    maps = []
    for st in program.statements:
        col = flat.cols.get(st.name, {})
        texts, pieces = [], []
        for p in range(n):
            e = col.get(p, 0)
            pieces.append(e)
            texts.append(expr_text(e))
        maps.append((st.name, _map_text(model, st.name, pieces, texts)))
    return Schedule(model, tuple(maps), tuple(dims), history)


def _map_text(model: PolyModel, name: str, pieces: List[Expr], texts: List[Optional[str]]) -> str:
    st = model.program.statement(name)
    from ..poly.model import tuple_str
    if all(t is not None for t in texts):
        body = ", ".join(texts)  # type: ignore[arg-type]
        return f"{model.pstr} -> {{ {tuple_str(name, st.iterators)} -> [{body}] }}"
    # Piecewise expressions: build the map in isl and print it.
    space = model.domains[name].get_space()
    out: Optional[isl.Map] = None
    for e in pieces:
        if isinstance(e, int):
            m = isl.Map(f"{model.pstr} -> {{ {tuple_str(name, st.iterators)} -> [{e}] }}")
        else:
            m = isl.Map.from_pw_aff(e)
        m = m.align_params(space)
        out = m if out is None else out.flat_range_product(m)
    if out is None:
        return f"{model.pstr} -> {{ {tuple_str(name, st.iterators)} -> [] }}"
    return str(out)
