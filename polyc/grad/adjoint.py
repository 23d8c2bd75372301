"""The reverse-mode transformation: a forward `Program` -> the `Program` of its vector-Jacobian product.

Given the forward program, the tensor `of` whose adjoint is supplied and the tensors `wrt`, the
gradient program

1. recomputes the forward values the adjoint reads (pruned to those), each statement top level, in
   data-flow order, except those the caller saved (`saved=`, `polyc.grad.saved`); a `max=!`/`min=!`
   reduction also counts its ties (`<T>_ties`), so the adjoint is split evenly among equal maxima;
2. zeroes the adjoint of every active tensor (on a path from `wrt` to `of`);
3. walks the forward statements in reverse data-flow order and, for each read of an active tensor,
   emits a *gather* (`polyc.grad.gather`) adding `seed * d value / d read` into the read tensor's
   adjoint, where `seed` is the adjoint of the statement's target.  Reductions and broadcasts
   exchange roles: the indices a reduction sums over become the broadcast of the seed; a broadcast
   read becomes a sum over the indices it ignored.

Names: the adjoint supplied for `of` is the input `<of>_grad`; the gradient of each `wrt` tensor
`X` is the output `X_grad`.  When a name is taken (a tensor, size, scalar or index of the kernel
already called `X_grad`), a digit is appended: `X_grad2`, `X_grad3`, ...  `GradNames` records them.
The result is an ordinary program, so bounds, initialisation, schedules, `"auto"` and every target
apply to it unchanged.  The transformation is a pure function of its arguments.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Set, Tuple

from ..errors import GradError
from ..ir import Access, Affine, Binary, Const, Program, ScalarRef, Statement, TensorDecl
from ..poly.model import PolyModel
from .analysis import (active_tensors, as_updates, check_no_overwrite, check_scales_first, classify_writes,
                       dataflow_order, describe, scale_factors_inactive)
from .derivative import ONE, ZERO, div, local_adjoints, select, with_reciprocals
from .exprs import fill_statement, tensors_read, used_names
from .domains import simplify_domain, split_interior
from .padding import pad_gather
from .saved import check_saved, recomputed, recoveries, recovery_after
from .factor import factor_sums
from .fold import fold_pointwise
from .inline import inline_pointwise_temps
from .gather import check_exact, fresh_name, gather_iterators, gather_value, invert_access


@dataclass(frozen=True)
class GradNames:
    """The names a gradient kernel uses: `seed` is the input holding `of`'s adjoint; `wrt` maps each
    differentiated tensor to the output holding its gradient; `saved` the forward tensors it takes
    as inputs (under their own names) instead of recomputing them."""

    of: str
    seed: str
    wrt: Tuple[Tuple[str, str], ...]
    saved: Tuple[str, ...] = ()

    def __getitem__(self, tensor: str) -> str:
        return dict(self.wrt)[tensor]


def check_request(program: Program, of: str, wrt: Sequence[str], inputs: Tuple[str, ...] = ("input",)) -> None:
    """`GradError` unless `of` is a tensor the kernel writes and `wrt` distinct float tensors whose
    role is one of `inputs` (arrays the kernel only reads, by default)."""
    tensors = program.tensor_map
    written = {st.target.tensor for st in program.statements}
    if of not in tensors or of not in written:
        what = "is not a tensor of the kernel" if of not in tensors else "is never written by the kernel"
        raise GradError(f"of={of!r} {what}; name the output whose adjoint you supply "
                        f"(written: {', '.join(sorted(written))})")
    if not wrt:
        raise GradError("wrt names no tensor; pass the inputs to differentiate with respect to, e.g. wrt=['X']")
    if len(set(wrt)) != len(wrt):
        raise GradError(f"wrt names a tensor twice: {list(wrt)}")
    scalars = {s.name for s in program.scalars}
    for x in wrt:
        if x in scalars:
            raise GradError(f"{x!r} is a scalar parameter; pc.grad differentiates with respect to tensors "
                            f"(declare it as a rank-0 tensor to get its gradient)")
        if x not in tensors:
            raise GradError(f"wrt names {x!r}, which is not a tensor of the kernel "
                            f"(tensors: {', '.join(t.name for t in program.tensors)})")
        t = tensors[x]
        if t.role not in inputs:
            hint = (": pass checkpoint='store' to differentiate with respect to the values passed in"
                    if t.role == "inout" and "inout" not in inputs else "")
            raise GradError(f"wrt names {x!r}, which the kernel writes ({t.role}); pc.grad differentiates with "
                            f"respect to inputs that the kernel only reads{hint}")
        if t.dtype is not None and not t.dtype.is_float:
            raise GradError(f"{x!r} has the integer type {t.dtype!r}, which has no gradient")
    if tensors[of].dtype is not None and not tensors[of].dtype.is_float:
        raise GradError(f"{of!r} has the integer type {tensors[of].dtype!r}, which has no gradient")


class _Builder:
    """Accumulates the statements and tensors of the gradient program (used once, then dropped)."""

    def __init__(self, program: Program):
        self.fwd = program
        self.used = used_names(program)
        self.statements: List[Statement] = []
        self.tensors: Dict[str, TensorDecl] = {}

    def add(self, st: Statement) -> None:
        k = len(self.statements)
        self.statements.append(st.with_(name=f"S{k}", order=(k,) + (0,) * len(st.iterators), inferred=()))

    def fill(self, name: str, shape: Tuple[Affine, ...], source: Statement, value=ZERO,
             like: Tuple[str, ...] = ()) -> Statement:
        """`name[...] = value` over `shape` (value a constant, or an array read elementwise); its loops
        are named `like` (the first gather's loops into the same tensor, so a schedule names them as
        one loop nest), else i0, i1, ..."""
        return fill_statement(name, shape, source, self.used, value, like)


def adjoint_program(program: Program, of: str, wrt: Sequence[str], *, pad_borders: bool = True,
                    saved: Sequence[str] = ()) -> Tuple[Program, GradNames]:
    """The gradient program of the (shape-inferred) forward `program`, and the names it uses.
    `pad_borders`: gathers whose reads leave an adjoint near its border read a zero-padded copy
    (`polyc.grad.padding`) rather than splitting the border off (`domains.split_interior`).
    `saved`: forward tensors the gradient takes as inputs rather than recomputing (`polyc.grad.saved`)."""
    wrt = tuple(wrt)
    check_request(program, of, wrt)
    saved = check_saved(program, saved)
    program = as_updates(program)
    model = PolyModel(program)
    writes = classify_writes(program, model)
    check_no_overwrite(model)
    check_scales_first(model, writes)
    order = dataflow_order(program)
    active = active_tensors(program, of, wrt)
    scale_factors_inactive(program, writes, active)
    b = _Builder(program)
    fwd_tensors = program.tensor_map

    names: Dict[str, str] = {}
    seed = fresh_name(f"{of}_grad", b.used)
    for x in wrt:
        names[x] = fresh_name(f"{x}_grad", b.used)
    read_of = any(of in tensors_read(st.value) for st in program.statements)
    adj: Dict[str, str] = dict(names)
    adj[of] = fresh_name(f"{of}_grad_total", b.used) if read_of else seed
    for t in sorted(active - set(adj)):
        adj[t] = fresh_name(f"{t}_grad", b.used)

    # 3. contributions, built first so that we know which forward values they read.  When the
    # kernel itself reads `of`, its adjoint starts as a copy of the one supplied.
    contributions: List[Statement] = []
    if read_of:
        contributions.append(b.fill(adj[of], fwd_tensors[of].shape, program.statements[-1], value=seed).with_(
            update="+"))
    ties: Dict[str, Tuple[str, Statement]] = {}
    # Adjoints a gather may read through a zero-padded copy, and the statements making each copy,
    # which run just before their gather (wherever `fold_pointwise` moves it).
    adj_decls = dict(fwd_tensors)
    adj_decls.update({a: TensorDecl(a, fwd_tensors[t].dtype, fwd_tensors[t].shape, "temp") for t, a in adj.items()})
    preludes: List[Tuple[Statement, Tuple[Statement, ...]]] = []
    for st in reversed(order):
        t = st.target.tensor
        w = writes[t]
        if t not in adj or st.name == w.scale or w.kind == "scale":
            continue
        seed_expr = Access(adj[t], st.target.indices)
        if st.name == w.init and isinstance(st.value, Const):
            continue                      # a reduction's identity: nothing flows back
        if w.op in ("max", "min"):
            count = fresh_name(f"{t}_ties", b.used)
            ties[t] = (count, st)
            chosen = Binary("==", st.value, st.target)
            # A NaN maximum matches no element: as torch.amax's (g * mask / count, 0 / 0), every
            # element of its row gets NaN, rather than a silent zero.
            lost = Binary("!=", st.target, st.target)
            seed_expr = select(chosen, div(seed_expr, Access(count, st.target.indices)),
                               select(lost, Const(float("nan")), ZERO))
        where = describe(st)
        # The target holds this value only if nothing updates it afterwards (not a reduction's start).
        stored = st.target if w.kind == "define" else None
        for acc, coeff in local_adjoints(st.value, seed_expr, stored):
            if acc.tensor not in adj or acc.tensor not in active:
                continue
            shape = fwd_tensors[acc.tensor].shape
            coords, free, sigma, domain = invert_access(st, acc, shape, b.used, where)
            check_exact(st, acc, shape, coords, free, sigma, domain, program.sizes, program.assumptions, where)
            target = Access(adj[acc.tensor], tuple(Affine.var(c) for c in coords))
            gather = simplify_domain(Statement(
                name="", iterators=gather_iterators(st, acc, coords, free, sigma), domain=domain, target=target,
                value=gather_value(coeff, sigma), update="+", reduction=tuple(free),
                location=st.location, text=st.text, divisions=tuple(d for d in st.divisions if d in free)),
                program.sizes, program.assumptions)
            padded = pad_gather(gather, adj_decls, set(adj.values()), program.sizes, program.assumptions,
                                b.used) if pad_borders else None
            if padded is None:
                contributions.extend(split_interior(gather, program.sizes, program.assumptions))
                continue
            b.tensors[padded.decl.name] = padded.decl
            preludes.append((padded.gather, (padded.zero, padded.copy)))
            contributions.append(padded.gather)

    # 1. forward recomputation of what the adjoint reads (and what that needs), except the tensors
    # the caller saved, and those a saved division gives back (`polyc.grad.saved`).
    needed: Set[str] = set()
    for c in contributions:
        needed |= tensors_read(c.value)
    needed |= set(ties)
    needed -= set(adj.values())
    recovered = recoveries(program, model, writes, saved) if saved else {}
    computed = recomputed(program, needed, set(saved), recovered)
    for t in sorted(computed):
        if fwd_tensors[t].role == "inout":
            raise GradError(f"the gradient needs the values of {t}, which the kernel updates in place; pc.grad "
                            f"would have to recompute them from the contents passed in: write them to a new array")
    for st in order:
        t = st.target.tensor
        if t in computed and t not in recovered:
            b.add(st)
        rec = recovery_after(recovered, computed, st)
        if rec is not None:
            b.add(rec)
        if t in ties and st is ties[t][1]:
            count, upd = ties[t]
            b.add(b.fill(count, fwd_tensors[t].shape, upd, value=Const(0.0)))
            b.add(upd.with_(target=Access(count, upd.target.indices), update="+",
                            value=select(Binary("==", upd.value, upd.target), ONE, ZERO)))
            b.tensors[count] = TensorDecl(count, fwd_tensors[t].dtype, fwd_tensors[t].shape, "temp")

    # 2. zero the adjoints that no covering pointwise contribution defines, then 3. the rest.
    ordered, zeroed = fold_pointwise(contributions, {adj[t]: fwd_tensors[t].shape for t in adj},
                                     program.sizes, program.assumptions)
    defined = {c.target.tensor for c in contributions} - zeroed
    for t, a in adj.items():
        if a == seed or a in defined:
            continue
        like = next((tuple(str(i) for i in c.target.indices) for c in contributions if c.target.tensor == a), ())
        b.add(b.fill(a, fwd_tensors[t].shape, program.statements[0], value=Const(0.0), like=like))
    for c in ordered:
        for pre in next((p for g, p in preludes if g is c), ()):
            b.add(pre)
        b.add(c)

    tensors: List[TensorDecl] = []
    reads = {a.tensor for st in b.statements for a in st.value.accesses()}
    for t in program.tensors:
        if t.name in saved:
            tensors.append(TensorDecl(t.name, t.dtype, t.shape, "input", declared=True))
        elif t.name in computed:
            tensors.append(TensorDecl(t.name, t.dtype, t.shape, "temp"))
        elif t.name in reads:
            tensors.append(TensorDecl(t.name, t.dtype, t.shape, "input", declared=True))
    o = fwd_tensors[of]
    tensors.append(TensorDecl(seed, o.dtype, o.shape, "input", declared=True))
    # A gradient's shape may use a size no array read by the gradient has (`t +=! A[i, i]` gives
    # `A_grad[i, j] = t_grad` where i == j): the forward's input of that shape is then taken as
    # well, only for its shape, so a call passes the same arrays as the forward call.
    bound = {v for t in tensors if t.role == "input" for e in (t.shape or ()) for v in e.variables}
    for x in wrt:
        t = fwd_tensors[x]
        free = {v for e in (t.shape or ()) for v in e.variables} - bound
        if free and all(x != d.name for d in tensors):
            tensors.append(TensorDecl(t.name, t.dtype, t.shape, "input", declared=True))
            bound |= free
    for t, a in adj.items():
        if a == seed:
            continue
        role = "output" if t in names else "temp"
        tensors.append(TensorDecl(a, fwd_tensors[t].dtype, fwd_tensors[t].shape, role, declared=role == "output"))
    tensors += list(b.tensors.values())
    scalars_read = set()
    for st in b.statements:
        scalars_read |= {e.name for e in st.value.walk() if isinstance(e, ScalarRef)}
    out = Program(
        name=f"{program.name}_grad", tensors=tuple(tensors), statements=tuple(b.statements), sizes=program.sizes,
        scalars=tuple(s for s in program.scalars if s.name in scalars_read), source=program.source,
        frontend="einsum", assumptions=program.assumptions, int_params=program.int_params,
        derived_sizes=program.derived_sizes)
    factored, sums = factor_sums(inline_pointwise_temps(out), set(adj.values()))
    return (with_reciprocals(factored, set(adj.values()) | sums),
            GradNames(of=of, seed=seed, wrt=tuple((x, names[x]) for x in wrt), saved=saved))
