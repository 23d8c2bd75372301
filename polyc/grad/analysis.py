"""What a kernel must satisfy to be differentiated, and the facts the adjoint construction needs.

Reverse mode needs, for every value a statement reads, the value *as it was read*.  polyc
recomputes the forward kernel inside the gradient kernel and reads the tensors' final contents, so
the kernel must never overwrite a value after it was read (in-place time loops do: `GradError`
naming the array, the statement and its line).  Each tensor must be written in one of three shapes:

- *defined*: one `=` statement, each element written once (`Y[i] = ...`);
- *reduced*: an identity initialisation followed by updates with one operator (`+=!`, `max=!`,
  `min=!`, or loop kernels' `s = 0; for k: s += ...`), or `+` updates of an array passed in;
- *scaled in place*: a `*=` update of an array passed in, by a factor that depends on no
  differentiated value (PolyBench's `C *= beta` before `C += A @ B`), which must be its first write.

A statement that reads the tensor it writes (a recurrence, `B[i] = B[i-1] + A[i]`) is refused: its
adjoint is a reverse recurrence, which polyc does not build yet.  isl proves the no-overwrite rule.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..errors import GradError
from ..ir import Binary, Const, Program, Statement, Unary
from ..ir.expr import REDUCTION_IDENTITY
from ..poly.model import PolyModel
from ..poly.islutil import isl_budget
from .exprs import tensors_differentiated, tensors_read



def describe(st: Statement) -> str:
    """`statement S3 (line 4: 'e[i, j] = exp(X[i, j] - m[i])')` for messages."""
    where = f"line {st.location.line}" if st.location is not None else "no source line"
    text = f": {st.text.strip()!r}" if st.text.strip() else ""
    return f"statement {st.name} ({where}{text})"


@dataclass(frozen=True)
class Writes:
    """How one tensor is written: `kind` is "define", "reduce" or "scale"; `op` the update operator;
    `init` the identity-initialising statement (reductions with `!`), `updates` the others."""

    kind: str
    op: str
    init: str
    updates: Tuple[str, ...]
    #: A `*=` update of an array passed in that runs before the `+` updates (PolyBench's `C *= beta`).
    scale: str = ""


def as_updates(program: Program) -> Program:
    """Loop kernels' `x[i] = x[i] + e` (and `x[i] - e`) as the `+` updates they are (`x[i] += e`)."""
    out = []
    for st in program.statements:
        v = st.value
        if st.update is None and isinstance(v, Binary) and v.op in ("+", "-"):
            if v.lhs == st.target and st.target not in v.rhs.accesses():
                st = st.with_(update="+", value=v.rhs if v.op == "+" else Unary("-", v.rhs))
            elif v.op == "+" and v.rhs == st.target and st.target not in v.lhs.accesses():
                st = st.with_(update="+", value=v.lhs)
        out.append(st)
    return program.with_(statements=tuple(out))


def _disjoint_writes(model: PolyModel, sts: Sequence[Statement]) -> bool:
    """No two of `sts` write one element (isl, for every size): a piecewise definition
    (`if i < 2: Y[i] = a else: Y[i] = b`), each element defined once."""
    with isl_budget("checking that a tensor's definitions write disjoint elements"):
        written = [model.access_map(st, st.target).range() for st in sts]
        return all(written[a].intersect(written[b]).intersect_params(model.context).is_empty()
                   for a in range(len(sts)) for b in range(a + 1, len(sts)))


def classify_writes(program: Program, model: Optional[PolyModel] = None) -> Dict[str, Writes]:
    """The write shape of every written tensor, or `GradError` for anything else.  With `model`,
    several plain statements writing disjoint elements of a tensor define it piecewise."""
    by_tensor: Dict[str, List[Statement]] = {}
    for st in program.statements:
        if st.target.tensor in tensors_read(st.value):
            way_out = ("; or pass checkpoint='store', which keeps every value it overwrites"
                       if program.frontend == "python" else "")
            raise GradError(f"{describe(st)} reads {st.target.tensor}, the value it writes (a recurrence); "
                            f"pc.grad differentiates kernels whose statements read only other values: write "
                            f"the values to a new tensor{way_out}")
        by_tensor.setdefault(st.target.tensor, []).append(st)
    roles = {t.name: t.role for t in program.tensors}
    out: Dict[str, Writes] = {}
    for name, sts in by_tensor.items():
        plain = [s for s in sts if s.update is None]
        ups = [s for s in sts if s.update is not None]
        if not ups and (len(plain) == 1 or (model is not None and _disjoint_writes(model, plain))):
            out[name] = Writes("define", "", "", tuple(s.name for s in plain))
            continue
        ops = {s.update for s in ups}
        if ups and ups[0].update == "*" and ops == {"*", "+"} and not plain and roles.get(name) == "inout" \
                and sum(s.update == "*" for s in ups) == 1:
            out[name] = Writes("reduce", "+", "", tuple(s.name for s in ups[1:]), scale=ups[0].name)
            continue
        if len(ops) == 1 and len(plain) <= 1:
            op = ops.pop()
            if op == "*":
                if plain and roles.get(name) != "inout":
                    raise GradError(f"{describe(ups[0])} is a product reduction ({name} *=! ...); pc.grad does not "
                                    f"differentiate products (each factor's adjoint needs the product of the "
                                    f"others, which division cannot give where a factor is 0): use exp of a sum "
                                    f"of logs where the factors are positive")
                if plain or len(ups) != 1:
                    raise GradError(f"{describe(ups[0])} multiplies {name} in place after other writes; pc.grad "
                                    f"supports a `*=` update only as the first write of an array passed in")
                out[name] = Writes("scale", op, "", (ups[0].name,))
                continue
            init = plain[0] if plain else None
            # A sum may start from any value (`T = A; T += B`: both receive T's adjoint); a max or a
            # min must start from its identity, or the tie rule would have to weigh the start value.
            identity = isinstance(init.value, Const) and init.value.value == REDUCTION_IDENTITY[op] if init else True
            if init is not None and not ((identity or op == "+")
                                         and program.statements.index(init) < program.statements.index(ups[0])):
                raise GradError(f"{describe(init)} sets {name} before {describe(ups[0])} updates it with {op!r}; "
                                f"pc.grad needs the update's identity there ({REDUCTION_IDENTITY[op]}), as `{op}=!` writes")
            if init is None and (op != "+" or roles.get(name) == "temp"):
                raise GradError(f"{describe(ups[0])} updates {name} with {op!r} without initialising it; write "
                                f"`{op}=!` so the reduction starts from its identity")
            if op in ("max", "min") and len(ups) != 1:
                raise GradError(f"{name} is reduced with {op!r} by several statements; pc.grad routes the "
                                f"adjoint of one {op}-reduction per tensor: combine them into one")
            out[name] = Writes("reduce", op, init.name if init else "", tuple(s.name for s in ups))
            continue
        raise GradError(f"{name} is written by {describe(sts[0])} and again by {describe(sts[1])}; pc.grad "
                        f"needs each tensor defined once (`=`), or initialised and then reduced with one operator")
    return out


def _before(model: PolyModel, first: Statement, acc, second: Statement) -> bool:
    """Whether some instance of `first` accessing `acc` runs before an instance of `second` writing
    the same element (for some valid sizes)."""
    with isl_budget(f"checking the order of the accesses to {acc.tensor}"):
        same = model.access_map(first, acc).apply_range(model.access_map(second, second.target).reverse())
        later = model.statement_schedule(first).lex_lt_map(model.statement_schedule(second))
        return not same.intersect(later).intersect_params(model.context).is_empty()


def check_scales_first(model: PolyModel, writes: Mapping[str, Writes]) -> None:
    """A reduction's initialisation, or a `*=` scaling of an array passed in, must be done on each
    element before any update of that element (isl checks every pair of instances)."""
    for name, w in writes.items():
        for first in (w.scale, w.init):
            if not first:
                continue
            start = model.program.statement(first)
            for u in w.updates:
                st = model.program.statement(u)
                if _before(model, st, st.target, start):
                    raise GradError(f"{describe(start)} writes {name} after {describe(st)} updated it; pc.grad "
                                    f"needs the initial value written first")


def check_no_overwrite(model: PolyModel) -> None:
    """isl's proof that no statement writes an element after another statement instance read it.

    (The update of a reduction reading its own target is not a read of the kernel's values.)"""
    program = model.program
    writers: Dict[str, List[Statement]] = {}
    for st in program.statements:
        writers.setdefault(st.target.tensor, []).append(st)
    for reader in program.statements:
        reads = {a for a in reader.value.accesses() if a.tensor in writers}
        for acc in sorted(reads, key=str):
            for writer in writers[acc.tensor]:
                if _before(model, reader, acc, writer):
                    raise GradError(f"{describe(writer)} overwrites {acc.tensor} after {describe(reader)} read it "
                                    f"({acc}); the gradient needs the values as they were read: pass "
                                    f"checkpoint='store' to keep every value (one copy per step), or write each "
                                    f"step to a new array (or a new time plane, e.g. {acc.tensor}[t + 1, i] from "
                                    f"{acc.tensor}[t, i])")


def dataflow_order(program: Program) -> Tuple[Statement, ...]:
    """Statements ordered so each runs after every statement writing a tensor it reads (a stable
    topological sort; Einstein kernels are already in this order).  `GradError` on a cycle."""
    sts = list(program.statements)
    writers: Dict[str, List[int]] = {}
    for k, st in enumerate(sts):
        writers.setdefault(st.target.tensor, []).append(k)
    preds: Dict[int, Set[int]] = {k: set() for k in range(len(sts))}
    for k, st in enumerate(sts):
        for t in tensors_read(st.value):
            preds[k] |= {w for w in writers.get(t, []) if w != k}
        preds[k] |= {w for w in writers[st.target.tensor] if w < k}
    done: List[int] = []
    placed: Set[int] = set()
    while len(done) < len(sts):
        ready = [k for k in range(len(sts)) if k not in placed and preds[k] <= placed]
        if not ready:
            stuck = [sts[k] for k in range(len(sts)) if k not in placed]
            raise GradError(f"{describe(stuck[0])} and {describe(stuck[1])} read each other's results inside "
                            f"shared loops (a recurrence through arrays); pc.grad cannot order their adjoints")
        done.append(ready[0])
        placed.add(ready[0])
    return tuple(sts[k] for k in done)


def active_tensors(program: Program, of: str, wrt: Sequence[str]) -> Set[str]:
    """Tensors on a path from a `wrt` tensor to `of`: the ones that need an adjoint.  A read inside
    `stop_gradient(...)` is no path."""
    depends = set(wrt)
    changed = True
    while changed:
        changed = False
        for st in program.statements:
            if st.target.tensor not in depends and tensors_differentiated(st.value) & depends:
                depends.add(st.target.tensor)
                changed = True
    influences = {of}
    changed = True
    while changed:
        changed = False
        for st in program.statements:
            if st.target.tensor in influences:
                new = tensors_differentiated(st.value) - influences
                if new:
                    influences |= new
                    changed = True
    return (depends & influences) | set(wrt)


def scale_factors_inactive(program: Program, writes: Mapping[str, Writes], active: Set[str]) -> None:
    """A `*=` update's factor must not depend on a differentiated value (its adjoint would need
    the array's contents before the update, which the update destroys)."""
    for name, w in writes.items():
        if w.kind != "scale" and not w.scale:
            continue
        st = program.statement(w.scale or w.updates[0])
        hit = tensors_read(st.value) & active
        if hit:
            raise GradError(f"{describe(st)} scales {name} in place by a value depending on "
                            f"{', '.join(sorted(hit))}; pc.grad cannot recover the values before the update")
