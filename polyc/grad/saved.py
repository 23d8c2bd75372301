"""Forward values a gradient kernel takes instead of recomputing them: `pc.grad(..., saved=[...])`.

By default a gradient kernel recomputes every forward value its adjoint reads (softmax's row maxima,
exponentials and sums), so it needs nothing but the forward's inputs.  Autograd instead saves what
the backward reads during the forward.  `saved` names forward tensors (outputs or intermediates)
whose values the caller passes to the gradient kernel as the forward computed them; the gradient
then recomputes neither them nor what only they needed.  `pc.returning(kernel, ...)` gives the
forward kernel that also returns its intermediates.

One more value comes back without recomputing it: a saved tensor defined by a division,
`V[...] = T[...] / W`, gives back its numerator, `T = V * W`, when the gradient needs `T`, `W`
can be had without `T`, and `V`'s statement reads every element of `T` (isl compares the two
sets).  Softmax `Y = e / s` saved with its row sums `s` gives `e = Y * s`, so its backward
computes no `exp`; PyTorch's softmax backward reads its saved output the same way.  `T` so
recovered differs from `T` recomputed by the rounding of one division and one product (a few
ulps relative); where `W` is 0 the forward's `V` was already infinite or NaN.  Only division:
`V = T * W` loses `T` where `W` is 0, and `V = T + W` loses its low digits to cancellation.
"""
from __future__ import annotations

from typing import AbstractSet, Dict, Mapping, Optional, Sequence, Set, Tuple

from ..errors import GradError
from ..ir import Access, Binary, Program, Statement
from ..poly.islutil import isl_budget
from ..poly.model import PolyModel
from .analysis import Writes
from .exprs import tensors_read


def check_saved(program: Program, saved: Sequence[str]) -> Tuple[str, ...]:
    """`saved` as a tuple, or `GradError` unless it names distinct tensors the kernel writes (outputs
    or intermediates, not arrays updated in place: their final contents are not what was read)."""
    saved = (saved,) if isinstance(saved, str) else tuple(saved)
    if not all(isinstance(t, str) for t in saved):
        raise GradError(f"saved must be tensor names, not {saved!r}")
    if len(set(saved)) != len(saved):
        raise GradError(f"saved names a tensor twice: {list(saved)}")
    tensors = program.tensor_map
    written = sorted({st.target.tensor for st in program.statements if tensors[st.target.tensor].role != "inout"})
    for t in saved:
        if t not in tensors or t not in written:
            what = "is not a tensor of the kernel" if t not in tensors else (
                "is updated in place, so the gradient cannot take its final contents for the values read"
                if tensors[t].role == "inout" else "is an input, which the gradient reads anyway")
            raise GradError(f"saved names {t!r}, which {what}; saved tensors are values the forward computes "
                            f"(computed here: {', '.join(written)})")
    return saved


def _writes_all_of(model: PolyModel, definer: Statement, reader: Statement, acc: Access) -> bool:
    """Whether `reader`'s read `acc` covers every element `definer` writes."""
    with isl_budget(f"checking which elements of {acc.tensor} a saved tensor gives back"):
        written = model.access_map(definer, definer.target).intersect_domain(
            model.statement_domain(definer)).range()
        read = model.access_map(reader, acc).intersect_domain(model.statement_domain(reader)).range()
        return written.intersect_params(model.context).is_subset(read.intersect_params(model.context))


def recoveries(program: Program, model: PolyModel, writes: Mapping[str, Writes],
               saved: Sequence[str]) -> Dict[str, Tuple[Statement, Statement]]:
    """tensor T -> (the statement computing T from a saved division `V = T / W`, V's statement,
    after which it runs), for every T the saved tensors give back (see the module docstring)."""
    out: Dict[str, Tuple[Statement, Statement]] = {}
    taken = set(saved)
    for v in saved:
        w = writes.get(v)
        if w is None or w.kind != "define" or len(w.updates) != 1:
            continue
        st = program.statement(w.updates[0])
        value = st.value
        if not (isinstance(value, Binary) and value.op == "/" and isinstance(value.lhs, Access)):
            continue
        num, den = value.lhs, value.rhs
        t = num.tensor
        tw = writes.get(t)
        if t in taken or t in out or tw is None or tw.kind != "define" or len(tw.updates) != 1 \
                or num.indices != st.target.indices:
            continue
        if t in recomputed(program, tensors_read(den), taken, {}):
            continue                      # W needs T: no way round
        definer = program.statement(tw.updates[0])
        if not _writes_all_of(model, definer, st, num):
            continue
        recovered = st.with_(target=num, value=Binary("*", Access(v, st.target.indices), den), reduction=())
        out[t] = (recovered, st)
    return out


def recomputed(program: Program, needed: Set[str], saved: AbstractSet[str],
               recovered: Mapping[str, Tuple[Statement, Statement]]) -> Set[str]:
    """The tensors the gradient computes (recovered ones included), starting from the forward
    tensors its adjoint statements read: each computed one needs what its forward statements read,
    or, when a saved tensor gives it back, what that recovery reads; saved ones are taken as they are."""
    computed: Set[str] = set()
    writers = {st.target.tensor for st in program.statements}
    queue = list(needed)
    seen: Set[str] = set(needed)
    while queue:
        t = queue.pop()
        if t in saved or t not in writers:
            continue
        computed.add(t)
        if t in recovered:
            reads = tensors_read(recovered[t][0].value)
        else:
            reads = set().union(*(tensors_read(st.value) for st in program.statements if st.target.tensor == t))
        for r in reads - seen:
            seen.add(r)
            queue.append(r)
    return computed


def recovery_after(recovered: Mapping[str, Tuple[Statement, Statement]], computed: Set[str],
                   st: Statement) -> Optional[Statement]:
    """The recovery statement to emit right after forward statement `st` (where its saved tensor was
    defined: everything its divisor reads is computed by then), if any is used."""
    for t, (rec, anchor) in recovered.items():
        if anchor is st and t in computed:
            return rec
    return None
