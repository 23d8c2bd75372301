"""Definition-time safety checks: out-of-bounds accesses and reads of uninitialised intermediates.

Both are exact questions put to isl; when the answer is "it can happen", isl also gives a concrete
witness (sizes and a statement instance), which the error message shows.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

import islpy as isl

from ..errors import OutOfBoundsError, UninitializedReadError
from ..ir import Access, Affine, Constraint, Statement
from ..ir.text import with_floors
from .islutil import (isl_budget, isl_name, params_set_to_constraints, sample_point_values,
                      union_map_pieces as _maps, user_name)
from .model import PolyModel


def describe_instance(st: Statement, coords: Sequence[int]) -> str:
    if not st.iterators:
        return f"{st.name}[]"
    # Floor-division quotients are not loops the user wrote: leave them out.
    return ", ".join(f"{i} = {v}" for i, v in zip(st.iterators, coords) if i not in st.divisions)


def access_text(st: Statement, acc: Access, derived: Sequence[Tuple[str, Affine, int]] = ()) -> str:
    """`acc` as the user wrote it: each quotient iterator shown as `floor((num) / d)`, and so is
    each size derived from others (`(N + 1) // 2` is the internal size `_size0`)."""
    text = with_floors(str(acc), derived)
    for q in reversed(st.divisions):   # outer definitions first: their text names inner ones
        if q in st.extremes:   # a min/max iterator: `c == a` and then `a - b >= 0`
            text = _extreme_text(st, q, text)
            continue
        for conj in st.domain:
            c = next((c for c in conj if c.kind == "ge" and c.expr.coeff(q) < 0), None)
            if c is not None:  # num - d*q >= 0
                d = -c.expr.coeff(q)
                num = c.expr + Affine.var(q).scale(d)
                text = re.sub(rf"(-?\d*\*?){re.escape(q)}\b",
                              lambda m: f"{m.group(1)}floor(({num}) / {d})", text)
                break
    return text


def _extreme_text(st: Statement, q: str, text: str) -> str:
    """`text` with the min/max iterator `q` shown as `max(a, b)` (see `pyloops_exprs.Extremes`)."""
    conj = st.domain[0]
    k = next((k for k, c in enumerate(conj) if c.kind == "eq" and c.expr.coeff(q) == 1), None)
    if k is None or k + 1 >= len(conj):
        return text
    a = Affine.var(q) - conj[k].expr
    g = conj[k + 1].expr
    fn = q[1:4]
    b = a - g if fn == "max" else a + g
    return re.sub(rf"(-?\d*\*?){re.escape(q)}\b", lambda m: f"{m.group(1)}{fn}({a}, {b})", text)


def _sizes_text(params: Dict[str, int], derived: Sequence[Tuple[str, Affine, int]] = ()) -> str:
    """The sizes of a witness, without those derived from others (shown as their floors)."""
    shown = {k: v for k, v in params.items() if k not in {name for name, _, _ in derived if name.startswith("_")}}
    return ", ".join(f"{k} = {v}" for k, v in shown.items()) if shown else "any sizes"


def _where(st: Statement) -> str:
    loc = f" (line {st.location.line})" if st.location else ""
    return f"statement `{st.text or st.name}`{loc}"


def derived_size_constraints(derived: Sequence[Tuple[str, Affine, int]]) -> Tuple[Constraint, ...]:
    """`d*D <= num <= d*D + d - 1` for every derived size `D = floor(num / d)`: isl reasons with it."""
    out: List[Constraint] = []
    for name, num, d in derived:
        q = Affine.var(name).scale(d)
        out += [Constraint("ge", num - q), Constraint("ge", q + (d - 1) - num)]
    return tuple(out)


def _per_call_sizes(program) -> bool:
    """A loop kernel with `int` parameters no array shape binds (loopy's `n`, `m`): sizes only
    each call knows, like Einstein notation's integer parameters."""
    shaped = {v for t in program.tensors if t.shape for e in t.shape for v in e.variables}
    derived = {n for n, _, _ in program.derived_sizes}
    return program.frontend == "python" and any(s not in shaped and s not in derived for s in program.sizes)


def _call_time_requirement(model: PolyModel, st: Statement, acc, guard, bad: isl.Set,
                           new_derived: Optional[List[Tuple[str, Affine, int]]] = None
                           ) -> Optional[Tuple[Constraint, ...]]:
    """The sizes for which `acc` stays in bounds, as constraints to check at call time, or None.

    Only for what the definition cannot know: the shape of an undeclared input (its extents are
    whatever the caller passes) and integer parameters (a shift given per call).  A read that is
    out of bounds for every size, or whose safe sizes are no single conjunction, stays an error.
    """
    t = model.program.tensor(acc.tensor)
    per_call = _per_call_sizes(model.program)
    if not (t.role == "input" and not t.declared) and not model.program.int_params and not per_call:
        return None
    good = model.context.subtract(bad.params())
    if good.is_empty():
        return None
    derived = tuple(model.program.derived_sizes) + tuple(new_derived or ())
    # A floor of per-call sizes (A >= 256 * floor((n - 1) / 256) + m) becomes a size computed per call.
    scratch: Optional[List[Tuple[str, Affine, int]]] = [] if per_call and new_derived is not None else None
    found = params_set_to_constraints(good.gist(model.context), derived, scratch)
    if found is None:
        # Often the safe sizes are "big enough, or the statement runs no instance at all": state
        # the first part only (G with G and D == good and D, D = sizes where it runs); it may also
        # refuse a call that would run nothing, never accept an unsafe one.
        runs = model.guarded_domain(st, guard).params().intersect(model.context)
        scratch = [] if scratch is not None else None
        found = params_set_to_constraints(good.gist(runs), derived, scratch)
    if found is not None and scratch:
        new_derived.extend(scratch)  # type: ignore[union-attr]
    return found


def check_bounds(model: PolyModel, new_derived: Optional[List[Tuple[str, Affine, int]]] = None
                 ) -> Tuple[Constraint, ...]:
    """Raise OutOfBoundsError if some access can leave its tensor for some valid sizes.

    Returns the call-time requirements on sizes under which the remaining accesses stay in bounds
    (see `_call_time_requirement`); the caller adds them to the program's assumptions.  Given a
    list `new_derived`, a requirement may use floors of per-call sizes: each is appended to it as a
    derived size `(name, numerator, divisor)` that the caller adds to the program.
    """
    program = model.program
    requirements: List[Constraint] = []
    for k, info in enumerate(model.accesses):
        st, acc = info.statement, info.access
        shape = program.tensor(acc.tensor).shape or ()
        if not acc.indices:
            continue
        with isl_budget(f"checking the bounds of {acc}"):
            bad = model.outside_instances(k).intersect_params(model.context)
            if bad.is_empty():
                continue
            needed = _call_time_requirement(model, st, acc, info.guard, bad, new_derived)
            if needed is not None:
                requirements.extend(c for c in needed if c not in requirements)
                continue
            params, coords = sample_point_values(bad)
        env = dict(params)
        env.update(zip(st.iterators, coords))
        element = ", ".join(str(e.evaluate(env)) for e in acc.indices)
        shape_text = ", ".join(str(n.evaluate(params)) for n in shape)
        verb = "writes" if info.is_write else "reads"
        t = program.tensor(acc.tensor)
        if t.role == "input" and not t.declared:
            raise OutOfBoundsError(
                f"{_where(st)} {verb} {access_text(st, acc, program.derived_sizes)}, and the sizes of undeclared input {acc.tensor} that keep it in "
                f"bounds are not one set of affine conditions polyc can check per call (e.g. with "
                f"{_sizes_text(params, program.derived_sizes)} it {verb} {acc.tensor}[{element}]); declare {acc.tensor}'s shape, "
                f"e.g. {acc.tensor}=pc.f32[...]")
        raise OutOfBoundsError(
            f"{_where(st)} {verb} {access_text(st, acc, program.derived_sizes)} outside tensor {acc.tensor} of shape "
            f"({', '.join(map(str, shape))}): e.g. with {_sizes_text(params, program.derived_sizes)}, at "
            f"{describe_instance(st, coords)} it {verb} {acc.tensor}[{element}] but the shape is ({shape_text}). "
            f"Restrict the index range (a 'where' clause or a loop bound) or declare a larger shape.")
    return tuple(requirements)


def empty_size_requirements(model: PolyModel) -> Tuple[Constraint, ...]:
    """`N >= 1` for every size `N` whose being 0 would let some access leave its tensor.

    Bounds are proven for sizes of at least 1 (`PolyModel.context`).  A call may still pass an
    empty array (size 0), which is fine for loops over it (they run no iteration), but not for an
    access that does not depend on it: `B[0] = 5.0` writes outside an empty `B`.  Such accesses are
    found with sizes >= 0 (isl, exactly); each size that is 0 somewhere they are out of bounds must
    be at least 1, a requirement checked per call (`ArgumentError`), never a write out of bounds."""
    program = model.program
    relaxed = model.codegen_context
    # the sizes a call passes first; a size computed from them (`KW // 2`) may well be 0 itself
    derived = {name for name, _, _ in program.derived_sizes}
    sizes = sorted((p for p in model.params if p not in program.int_params), key=lambda p: p in derived)
    needed: List[str] = []
    for k, info in enumerate(model.accesses):
        acc = info.access
        if not acc.indices or len(needed) == len(sizes):
            continue
        with isl_budget(f"checking the bounds of {acc} for empty tensors"):
            bad = model.outside_instances(k).intersect_params(relaxed).params()
            for p in needed:
                bad = _at_least_one(bad, p)
            # Greedily, in that order: a size that is 0 at some bad point must be at least 1; the
            # bad points left after each requirement decide the next (the fewest requirements).
            for p in sizes:
                if bad.is_empty():
                    break
                d = bad.find_dim_by_name(isl.dim_type.param, isl_name(p))
                if p not in needed and d >= 0 and \
                        not bad.fix_val(isl.dim_type.param, d, isl.Val.zero(bad.get_ctx())).is_empty():
                    needed.append(p)
                    bad = _at_least_one(bad, p)
    return tuple(Constraint("ge", Affine.var(p) - Affine.const(1)) for p in needed)


def _at_least_one(params: isl.Set, p: str) -> isl.Set:
    """`params` where size `p` is at least 1."""
    d = params.find_dim_by_name(isl.dim_type.param, isl_name(p))
    return params if d < 0 else params.lower_bound_val(isl.dim_type.param, d, isl.Val.one(params.get_ctx()))


def check_initialized(model: PolyModel) -> None:
    """Raise UninitializedReadError if a statement reads an intermediate element never written before."""
    program = model.program
    temps = [t for t in program.tensors if t.role in ("temp", "output")]
    if not temps:
        return
    for t in temps:
        missing = model.reads_before_writes(t.name, len(t.shape or ()))
        if missing.is_empty():
            continue
        for m in _maps(missing):
            st = program.statement(user_name(m.get_tuple_name(isl.dim_type.in_)))
            params, coords = sample_point_values(m.domain())
            env = dict(params)
            env.update(zip(st.iterators, coords))
            acc = next(a for a in st.reads() if a.tensor == t.name)
            element = ", ".join(str(e.evaluate(env)) for e in acc.indices)
            raise UninitializedReadError(
                f"{_where(st)} reads {t.name}[{element}] (from {access_text(st, acc, program.derived_sizes)}), which no earlier "
                f"statement writes: "
                f"e.g. with {_sizes_text(params, program.derived_sizes)} at {describe_instance(st, coords)}. "
                f"Write every element of intermediate {t.name} before it is read, or pass it in.")
