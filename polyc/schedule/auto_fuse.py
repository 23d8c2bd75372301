"""Fusion of sibling loop nests where it saves memory traffic (memory-bound nests only).

isl's scheduler runs with maximal distribution (see `auto.py`), which is right for compute-bound
nests (each is tiled on its own) but loses the reuse of loops like atax's or bicg's, where two
statements stream the same matrix row by row.  Two adjacent children of a sequence are fused on
their outermost loop when

- both are bands of at most two members whose first member is the same user index (`i`),
- they read or write one array with identical subscripts that use that index (so each fused
  iteration touches the same row twice while it is in cache), or one of them computes only
  per-row scalars over that index, or the user wrote them in the same loop over that index
  (keeping the locality the source had), and
- fusing is legal: no dependence from the first to the second goes backwards along that index
  (checked with isl on the dependences themselves; the final schedule is proven again anyway).

Rows are fused to a fixed point (`fuse_memory_bound`).
"""
from __future__ import annotations

from typing import Dict, List, Optional

import islpy as isl

from ..poly.dependences import Dependences
from ..poly.model import PolyModel
from .auto_tree import Band, Node, Sequence, equals_iterator, is_constant


def _member_index(band: Band, k: int, model: PolyModel) -> Optional[str]:
    names = set()
    for s, pa in band.members[k].items():
        if is_constant(pa):
            return None
        names.add(equals_iterator(pa, model, s))
    if len(names) == 1 and None not in names:
        return names.pop()
    return None


def _leading(band: Band, model: PolyModel, as_written: bool = False) -> Dict[str, int]:
    """User index -> member that can run outermost (any member of a permutable band; with
    `as_written`, only the one whose loop the user wrote outermost among the band's loops, so
    fusing never turns a row-wise traversal into a column-wise one)."""
    out: Dict[str, int] = {}
    names = [_member_index(band, k, model) for k in range(len(band.members))]
    for k in (range(len(band.members)) if band.permutable else [0]):
        name = names[k]
        if name is None or name in out:
            continue
        if as_written:
            others = [x for x in names if x is not None]
            if any(model.program.statement(s).iterators.index(x) < model.program.statement(s).iterators.index(name)
                   for s in band.statements for x in others
                   if x in model.program.statement(s).iterators and name in model.program.statement(s).iterators):
                continue
        out[name] = k
    return out


def _lead_with(band: Band, k: int) -> Band:
    """The permutable `band` with member `k` moved first."""
    order = [k] + [j for j in range(len(band.members)) if j != k]
    return Band(band.statements, [band.members[j] for j in order], [band.coincident[j] for j in order],
                band.permutable, band.child)


def _row_accesses(band: Band, model: PolyModel, index: str) -> set:
    out = set()
    for s in band.statements:
        st = model.program.statement(s)
        for acc in (st.target,) + tuple(st.reads()):
            if len(acc.indices) >= 2 and any(e.coeff(index) for e in acc.indices):
                out.add((acc.tensor, tuple(str(e) for e in acc.indices)))
    return out


def _per_row(band: Band, model: PolyModel, index: str) -> bool:
    """Whether `band` is one loop over `index` of per-row scalars computed from other arrays
    (`mean[i] = sum[i] / N`): it costs nothing inside a row nest, and left between two row nests
    it keeps them apart (each feeds it or is fed by it), so layernorm written with a separate
    mean and reciprocal deviation streamed its rows three times (3.5 -> 1.0 ms at 4096 x 1024).
    Initialisations (`y[i] = 0`) stay where they are: a row loop holding nothing but reduction
    chains is what `jam_reductions` jams (matvec)."""
    return len(band.members) == 1 and all(model.program.statement(s).iterators == (index,)
                                          and model.program.statement(s).value.accesses()
                                          for s in band.statements)


def _walks_rows(band: Band, model: PolyModel, index: str, member: int) -> bool:
    """Whether `band` already runs `index` outermost (its `member` 0) over arrays whose rows it
    selects (`index` in the first subscript only, `X[i, j]`): a per-row scalar fused into it
    changes neither its order nor its walk (a column walk such as gemver's `A[j, i]` is turned
    into a row walk later, which a fused statement would prevent)."""
    if member != 0:
        return False
    for s in band.statements:
        st = model.program.statement(s)
        for acc in (st.target,) + tuple(st.reads()):
            if len(acc.indices) >= 2 and acc.indices[0].coeff(index) \
                    and not any(e.coeff(index) for e in acc.indices[1:]):
                return True
    return False


def _source_path(model: PolyModel, name: str, index: str):
    """The enclosing source loops of `name` down to the loop over `index` (None if it has none)."""
    st = model.program.statement(name)
    if index not in st.iterators:
        return None
    depth = st.iterators.index(index)
    return tuple((st.order[k], st.iterators[k]) for k in range(depth + 1))


def _fused_in_source(a: Band, b: Band, model: PolyModel, index: str) -> bool:
    """All statements of `a` and `b` sit in the same source loop over `index`."""
    paths = {_source_path(model, s, index) for s in a.statements + b.statements}
    return len(paths) == 1 and None not in paths


def _backwards(deps: Dependences, a: Band, b: Band, pos: int = 0, relation: str = "lt") -> bool:
    """Some dependence from `a`'s statements to `b`'s goes backwards (or, with relation "ne",
    changes) along member `pos`."""
    rel = isl.Map("{ [x] -> [y] : y < x }" if relation == "lt" else "{ [x] -> [y] : y != x }")
    for d in deps:
        if d.source in a.statements and d.sink in b.statements:
            src = isl.Map.from_pw_aff(a.members[pos][d.source])
            snk = isl.Map.from_pw_aff(b.members[pos][d.sink])
            r = rel.align_params(src.get_space())
            through = src.apply_range(r).apply_range(snk.reverse())
            if not d.relation.intersect(through.align_params(d.relation.get_space())).is_empty():
                return True
    return False


def _rest(band: Band) -> Node:
    if len(band.members) == 1:
        return band.child
    return Band(band.statements, band.members[1:], band.coincident[1:], band.permutable, band.child)


def _fusable(a: Node, b: Node, model: PolyModel, deps: Dependences, why: str):
    """(a', b') reordered to lead with the shared index when fusing them pays and is legal."""
    if not (isinstance(a, Band) and isinstance(b, Band)):
        return None
    if len(a.members) > 2 or len(b.members) > 2:
        return None
    la, lb = _leading(a, model, why == "rows"), _leading(b, model, why == "rows")
    for index in sorted(set(la) & set(lb), key=lambda x: la[x]):
        if why == "source" and not _fused_in_source(a, b, model, index):
            continue
        if why == "rows" and not (_row_accesses(a, model, index) & _row_accesses(b, model, index)) \
                and not (_per_row(a, model, index) and _walks_rows(b, model, index, lb[index])) \
                and not (_per_row(b, model, index) and _walks_rows(a, model, index, la[index])):
            continue
        a2, b2 = _lead_with(a, la[index]), _lead_with(b, lb[index])
        if not _backwards(deps, a2, b2):
            return a2, b2
    return None


def _fuse(a: Band, b: Band, model: PolyModel, deps: Dependences, why: str) -> Band:
    member: Dict[str, isl.PwAff] = dict(a.members[0])
    member.update(b.members[0])
    coincident = a.coincident[0] and b.coincident[0] and not _backwards(deps, a, b, relation="ne")
    kids: List[Node] = []
    for part in (_rest(a), _rest(b)):
        kids.extend(part.children if isinstance(part, Sequence) else [part])
    inner = _fuse_pass(Sequence(a.statements + b.statements, kids), model, deps, why)
    return Band(a.statements + b.statements, [member], [coincident], True, inner)


def fuse_memory_bound(node: Node, model: PolyModel, deps: Dependences) -> Node:
    """`node` with sibling memory-bound bands fused where it pays (module docstring): first the
    loops the user wrote fused, then loops that share rows of an array.  The second is repeated
    until nothing more fuses: a nest that shares rows only with a nest fused after it (layernorm's
    backward: `beta_grad[j] +=! Y_grad[i, j]` beside the row nest that later takes in `gamma_grad`'s
    `Y_grad[i, j] * ...`) would otherwise stream its array through memory once more on its own."""
    node = _fuse_pass(node, model, deps, "source")
    for _ in range(len(node.statements)):     # each pass that changes the tree fuses two nests
        fused = _fuse_pass(node, model, deps, "rows")
        if _outline(fused) == _outline(node):
            break
        node = fused
    return node


def _outline(node: Node):
    """The shape of the tree `node`: its bands (with their depth), sequences and statements."""
    if isinstance(node, Band):
        return ("band", len(node.members), node.statements, _outline(node.child))
    if isinstance(node, Sequence):
        return ("sequence", tuple(_outline(c) for c in node.children))
    return getattr(node, "statements", None)


def _fuse_pass(node: Node, model: PolyModel, deps: Dependences, why: str) -> Node:
    if isinstance(node, Band):
        return Band(node.statements, node.members, node.coincident, node.permutable,
                    _fuse_pass(node.child, model, deps, why))
    if not isinstance(node, Sequence):
        return node
    kids = [_fuse_pass(c, model, deps, why) for c in node.children]
    out: List[Node] = []
    for c in kids:
        # Fuse with an earlier sibling that pays, if one of the two may move next to the other:
        # `c` up (nothing in between feeds `c`) or the sibling down (it feeds nothing in between).
        fused = False
        for j in range(len(out) - 1, -1, -1):
            between = {s for o in out[j + 1:] for s in o.statements}
            up = not any(d.source in between and d.sink in c.statements for d in deps)
            down = not any(d.source in out[j].statements and d.sink in between for d in deps)
            if not (up or down):
                continue
            pair = _fusable(out[j], c, model, deps, why)
            if pair is None:
                continue
            merged = _fuse(pair[0], pair[1], model, deps, why)
            if up:
                out[j] = merged
            else:
                del out[j]
                out.append(merged)
            fused = True
            break
        if not fused:
            out.append(c)
    if len(out) == 1:
        return out[0]
    return Sequence(node.statements, out)
