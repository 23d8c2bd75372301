"""The adjoint of a single-assignment program with loops shared across statements (a time loop):
the forward loops run once forward, storing every value, then once backward.

`polyc.grad.adjoint` builds the gradient of kernels whose statements can be ordered by data flow,
each adjoint a loop nest of its own (gathers, no scatter).  A time loop cannot be ordered that
way: the steps read each other's results, so their adjoints must run interleaved, latest step
first.  For the array-expanded form of such a kernel (`polyc.grad.expansion`: every value has its
own element, nothing is overwritten), this module emits

1. the forward statements, in their own loops and order (every value stored);
2. zeroed adjoint arrays;
3. the *reverse sweep*: for every forward statement instance, in exactly the reverse order of the
   forward run (every loop counting down, statements within a loop body in reverse), an update
   `read_grad[element] += seed * d value / d read` for each value it read, where `seed` is the
   adjoint of the element it wrote.  All readers of a value run after its writer, so in reverse its
   adjoint is complete before the writer's instance uses it.  Updates of one element from several
   instances (a stencil's neighbours) are sums in a fixed order; loop kernels keep it unless a
   schedule reassociates.

The result is an ordinary program: bounds are checked, `"auto"` may reschedule it (its exact
dependences keep the reverse order where it matters), every target runs it.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..errors import GradError
from ..ir import Access, Program, ScalarRef, Statement, TensorDecl
from ..ir.guards import DNF, conjoin, guarded_accesses
from .adjoint import GradNames, _Builder
from .analysis import active_tensors
from .derivative import local_adjoints, with_reciprocals
from .expansion import Expanded
from .exprs import tensors_read
from .gather import fresh_name


def _guards(value) -> Dict[Access, Optional[DNF]]:
    """For each access in `value`, the affine condition under which some occurrence of it is
    evaluated (None: always)."""
    out: Dict[Access, Optional[DNF]] = {}
    for acc, guard in guarded_accesses(value):
        if acc in out and (out[acc] is None or guard is None):
            out[acc] = None
        else:
            out[acc] = guard if acc not in out else out[acc] + guard
    return out


def reverse_program(expanded: Expanded, of: str, wrt: Sequence[str], name: str) -> Tuple[Program, GradNames]:
    """The gradient program of `expanded` (the store form of a kernel): adjoint of the kernel's
    array `of` in (as `<of>_grad`), gradients of its arrays `wrt` (their values passed in) out."""
    prog = expanded.program
    finals = dict(expanded.final)
    if of not in finals:
        raise GradError(f"of={of!r} is not an array the kernel returns or updates in place "
                        f"({', '.join(finals) or 'none'})")
    of_t = finals[of]
    decls = prog.tensor_map
    for x in wrt:
        if x not in decls or decls[x].role != "input":
            raise GradError(f"wrt names {x!r}, whose values passed in the kernel never reads; nothing depends "
                            f"on them")
    taken = {t.name for t in prog.tensors} | set(prog.sizes) | {s.name for s in prog.scalars}
    seed = fresh_name(f"{of}_grad", taken)
    names = {x: fresh_name(f"{x}_grad", taken) for x in wrt}
    active = active_tensors(prog, of_t, wrt)
    adj: Dict[str, str] = dict(names)
    adj[of_t] = seed
    for t in sorted(active - set(adj)):
        adj[t] = fresh_name(f"{t}_grad", taken)

    forward = [st for st in prog.statements if st.target.tensor not in finals.values() or st.target.tensor == of_t]
    contributions: List[List[Statement]] = []
    for st in forward:
        t = st.target.tensor
        own: List[Statement] = []
        if t in adj:
            seed_expr = Access(adj[t], st.target.indices)
            # The element holds this statement's value only for a definition (a sum's holds the total).
            stored = st.target if t != of_t and st.update is None else None
            guards = _guards(st.value)
            for acc, coeff in local_adjoints(st.value, seed_expr, stored):
                if acc.tensor in adj and acc.tensor in active:
                    # Only where the read happens (a `select` branch): elsewhere its element may not exist.
                    domain = st.domain if guards[acc] is None else conjoin(st.domain, guards[acc])
                    own.append(st.with_(name="", target=Access(adj[acc.tensor], acc.indices), value=coeff,
                                        update="+", reduction=(), domain=domain))
        contributions.append(own)

    needed: Set[str] = set()
    for own in contributions:
        for c in own:
            needed |= tensors_read(c.value)
    queue = list(needed)
    while queue:
        t = queue.pop()
        for st in forward:
            if st.target.tensor == t and t != of_t:
                for r in tensors_read(st.value) - needed:
                    needed.add(r)
                    queue.append(r)

    top = 1 + max(c for st in prog.statements for c in st.order)
    spread = 1 + max((len(own) for own in contributions), default=0)
    statements: List[Statement] = []
    for st in forward:
        if st.target.tensor in needed and st.target.tensor != of_t:
            statements.append(st.with_(order=tuple(spread * c for c in st.order)))
    fills = [t for t in sorted(adj) if adj[t] != seed]
    zeroes = _Builder(prog)
    for k, t in enumerate(fills):
        zero = zeroes.fill(adj[t], decls[t].shape or (), prog.statements[0])
        statements.append(zero.with_(order=(spread * top + k,) + (0,) * len(zero.iterators)))
    base = spread * top + len(fills)
    for st, own in reversed(list(zip(forward, contributions))):
        flipped = tuple(i for i in st.iterators if i not in st.descending)
        for r, c in enumerate(own):
            order = [spread * (top - x) for x in st.order]
            order[0] += base
            order[-1] += r
            statements.append(c.with_(order=tuple(order), descending=flipped))
    statements = [st.with_(name=f"S{k}", inferred=()) for k, st in enumerate(statements)]

    tensors: List[TensorDecl] = []
    reads = {a.tensor for st in statements for a in st.value.accesses()}
    for t in prog.tensors:
        if t.role == "input" and (t.name in reads or t.name in names):
            tensors.append(TensorDecl(t.name, t.dtype, t.shape, "input", declared=True))
        elif t.name in needed and t.role != "input":
            tensors.append(TensorDecl(t.name, t.dtype, t.shape, "temp"))
    o = decls[of_t]
    tensors.append(TensorDecl(seed, o.dtype, o.shape, "input", declared=True))
    for t, a in adj.items():
        if a != seed:
            role = "output" if t in names else "temp"
            tensors.append(TensorDecl(a, decls[t].dtype, decls[t].shape, role, declared=role == "output"))
    scalars_read = {e.name for st in statements for e in st.value.walk() if isinstance(e, ScalarRef)}
    out = prog.with_(name=name, tensors=tuple(tensors), statements=tuple(statements),
                     scalars=tuple(s for s in prog.scalars if s.name in scalars_read))
    return (with_reciprocals(out, set(adj.values())),
            GradNames(of=of, seed=seed, wrt=tuple((x, names[x]) for x in wrt)))
