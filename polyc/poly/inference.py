"""Index-range and tensor-shape inference for Einstein-notation programs (Tensor Comprehensions' rules).

For every index without a `where` clause, in this order:
1. it is a bare subscript of the left-hand tensor whose shape is already known (declared, passed
   in for `+=`, or defined by an earlier statement): its range is that whole dimension;
2. otherwise its range is the largest one for which every read that uses it stays in bounds, for
   every value of the statement's other indices (a "for all" question isl answers exactly), and
   where it is a bare subscript of an undeclared input, that input's dimension *is* the range.

Undeclared inputs get one size symbol per dimension; dimensions indexed by the same bare index are
the same size (checked at call time).  Symbols are named after the index (`i` -> `I`).  Undeclared
outputs and intermediates get the shape their index ranges cover.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import islpy as isl

from ..errors import PolycError, ShapeInferenceError
from ..ir import (Access, Affine, Constraint, Program, Statement, TensorDecl, lower_bound, rebuild,
                  upper_bound_exclusive)
from ..ir.guards import ALWAYS, guarded_accesses
from .islutil import (conjunction_str, constraint_str, disjunction_str, isl_budget, isl_name, params_str,
                      affine_str, pw_aff_to_affine, pw_aff_to_floor_form)
from .size_classes import SizeClasses, fresh_size_name, kernel_names_in, placeholder


def _through_divisions(st: Statement, variables, ranges: Dict[str, Tuple[Constraint, ...]]) -> Set[str]:
    """`variables` plus, for each floor-division quotient among them, what its definition uses."""
    out = set(variables)
    frontier = [v for v in out if v in st.divisions]
    while frontier:
        q = frontier.pop()
        for c in ranges.get(q, ()):
            for w in c.expr.variables:
                if w not in out:
                    out.add(w)
                    if w in st.divisions:
                        frontier.append(w)
    return out


class _Inference:
    def __init__(self, program: Program, call_shaped_inout: bool = False):
        self.p = program
        self.classes = SizeClasses()
        self.shapes: Dict[str, Optional[Tuple[Affine, ...]]] = {}
        written = {s.target.tensor for s in program.statements}
        ranks: Dict[str, int] = {}
        for s in program.statements:
            for a in (s.target,) + s.value.accesses() + s.exists:
                ranks[a.tensor] = len(a.indices)
        for t in program.tensors:
            if t.shape is not None:
                self.shapes[t.name] = t.shape
            elif t.name not in written or (call_shaped_inout and t.role == "inout"):
                dims = []
                for d in range(ranks.get(t.name, 0)):
                    ph = placeholder(t.name, d)
                    self.classes.add(ph)
                    dims.append(Affine.var(ph))
                self.shapes[t.name] = tuple(dims)
            else:
                self.shapes[t.name] = None
        self.context_params: List[str] = list(program.sizes) + list(self.classes.parent)
        #: First element written, per dimension, of tensors whose shape inference derived from
        #: their writes (a stencil's intermediate starts at its halo, not at 0).
        self.lows: Dict[str, Tuple[Affine, ...]] = {}
        #: Intermediates their readers need from below 0 (Halide's blur of a clamped image reads
        #: `gray[x - 3]` from x = 0): dimension -> the constant their storage is shifted by.
        #: intermediates whose reads start below 0: tensor -> dimension -> how far its storage is shifted
        self.shifts: Dict[str, Dict[int, Affine]] = {}
        #: Sizes defined as `floor(numerator / divisor)` (strided extents like `(H - K) // 2 + 1`).
        self.derived: List[Tuple[str, Affine, int]] = []
        #: The elements each write covers, by (statement, dimension, parameters, its ranges).
        self._written_parts: Dict[Tuple[str, int, str, str], isl.Set] = {}

    def canon(self, a: Affine) -> Affine:
        """`a` with each placeholder replaced by its class's binding or representative."""
        mapping = {}
        for v in a.variables:
            if v in self.classes.parent:
                r = self.classes.find(v)
                mapping[v] = self.classes.binding.get(r, Affine.var(r))
        return a.substitute(mapping) if mapping else a

    # -- isl helpers ---------------------------------------------------------------------------
    def _context(self) -> isl.Set:
        ps = self.context_params
        conds = [f"{isl_name(p)} >= 1" for p in ps if p not in self.p.int_params]
        conds += [constraint_str(c) for c in self.p.assumptions + tuple(self._derived_constraints())]
        return isl.Set(f"{params_str(ps)} -> {{ : {' and '.join(conds) or 'true'} }}")

    def _derived_constraints(self) -> List[Constraint]:
        out = []
        for name, num, d in self.derived:
            q = Affine.var(name).scale(d)
            out += [Constraint("ge", self.canon(num) - q), Constraint("ge", q + (d - 1) - self.canon(num))]
        return out

    def _extent(self, pa: isl.PwAff, ctx: isl.Set, hint: str) -> Optional[Affine]:
        """`pa` as an Affine of sizes; a floor division becomes a new derived size (named after
        `hint`), computed at call time; None if neither works."""
        a = pw_aff_to_affine(pa, ctx)
        if a is not None:
            return a
        return self._floor_extent(pa, ctx, hint)

    def _floor_extent(self, pa: isl.PwAff, ctx: isl.Set, hint: str) -> Optional[Affine]:
        """`pa` = `rest + c * floor(num / d)` as `rest + c * S`, `S` a derived size (one per
        floor, named after `hint`); None for anything else."""
        form = pw_aff_to_floor_form(pa, ctx)
        if form is None:
            return None
        rest, c, num, d = form
        for name, n, dd in self.derived:
            if n == num and dd == d:
                return rest + Affine.var(name).scale(c)
        taken = set(self.context_params) | {t.name for t in self.p.tensors} | {sc.name for sc in self.p.scalars}
        name = hint.upper()
        while name in taken or not name.isidentifier():
            name += "_"
        self.derived.append((name, num, d))
        self.context_params.append(name)
        return rest + Affine.var(name).scale(c)

    def _range_from_reads(self, st: Statement, x: str, ranges: Dict[str, Tuple[Constraint, ...]],
                          base: Optional[Affine]) -> Optional[Tuple[Affine, Affine]]:
        """The largest [lo, hi) of `x` keeping every read using `x` in bounds, via isl; None if unknown."""
        uses = []
        reads = guarded_accesses(st.value) + (((st.target, None),) if st.update else ()) + \
            tuple((a, None) for a in st.exists)
        for acc, guard in reads:
            shape = self.shapes.get(acc.tensor)
            if shape is None:
                continue
            guard_vars = {v for conj in guard or () for c in conj for v in c.expr.variables}
            if any(v in st.iterators and v not in ranges and v != x for v in guard_vars):
                guard = None  # it names an index still without range: ignore it (over-approximate)
            lows = self.lows.get(acc.tensor, (Affine.const(0),) * len(shape))
            for e, extent, low in zip(acc.indices, shape, lows):
                seen = _through_divisions(st, e.variables, ranges)
                if x in seen and not any(v in st.iterators and v not in ranges and v != x for v in seen):
                    uses.append((e, self.canon(extent), self.canon(low), guard))
        # Quantify only over the indices these subscripts involve (and those their ranges depend
        # on): an unrelated index with a possibly empty range would make every x vacuously good.
        others: List[str] = []
        frontier = [v for e, _, _, g in uses
                    for v in e.variables + tuple(w for conj in g or () for c in conj for w in c.expr.variables)
                    if v in ranges and v != x]
        while frontier:
            v = frontier.pop()
            if v in others:
                continue
            others.append(v)
            frontier.extend(w for c in ranges[v] for w in c.expr.variables if w in ranges and w != x)
        dims = [x] + others
        bound_cs = [c for i in others for c in ranges[i]]
        # A read under a `select` happens only where its affine condition holds.
        bads = [f"({conjunction_str(bound_cs)}) and ({disjunction_str(g or ALWAYS)}) and "
                f"({affine_str(e)} < {affine_str(low)} or {affine_str(e)} >= {affine_str(extent)})"
                for e, extent, low, g in uses]
        usable = bool(uses)
        if not usable and base is None:
            return None
        ps = params_str(self.context_params)
        tup = "[" + ", ".join(isl_name(d) for d in dims) + "]"
        with isl_budget(f"inferring the range of index {x!r}"):
            # Inferred ranges start at 0 or above (as in Tensor Comprehensions): negative
            # positions are never implied by shapes.
            good = isl.Set(f"{ps} -> {{ [{isl_name(x)}] : {isl_name(x)} >= 0 }}")
            if base is not None:
                base = self.canon(base)
                good = isl.Set(f"{ps} -> {{ [{isl_name(x)}] : 0 <= {isl_name(x)} < {affine_str(base)} }}")
            for bad in bads:
                bad_set = isl.Set(f"{ps} -> {{ {tup} : {bad} }}").project_out(isl.dim_type.set, 1, len(others))
                good = good.subtract(bad_set)
            ctx = self._context()
            good = good.intersect_params(ctx).coalesce()
            if good.is_empty():
                return None
            lo = pw_aff_to_affine(good.dim_min(0), ctx)
            # Reads that bound nothing from above (guarded, or shifted by a parameter that may be
            # negative) leave the range open: no extent, the error below asks for one.
            bounded = good.is_bounded()
            hi = self._extent(good.dim_max(0), ctx, x) if bounded else None
        if (lo is None or hi is None) and base is not None:
            declared = self._declared_bare_extents(st, x)
            if len(declared) > 1 and self.shapes.get(st.target.tensor) is None \
                    and any(x in e.variables for e in st.target.indices):
                listing = " and ".join(f"{t} (extent {e})" for t, e in declared)
                raise ShapeInferenceError(
                    f"index {x!r} indexes {listing} alone; Tensor Comprehensions ranges it over the smaller "
                    f"extent, and {st.target.tensor}'s extent would be that minimum, by which polyc cannot size "
                    f"a tensor (sizes are affine): if the extents are equal, give them one name; otherwise "
                    f"say which bounds {x} ('where {x} in 0:{declared[0][1]}') and declare the other tensors "
                    f"no smaller", st.location)
            # The reads' bounds depend on an integer parameter or on which size is smaller: the
            # bare subscript's dimension is the range, and the other reads become call-time
            # requirements (undeclared inputs, parameters) or errors, checked after inference.
            return Affine.const(0), base
        if lo is None or hi is None:
            why = ("the bounds would depend on which size is smaller, or need a division" if bounded else
                   "no read bounds it from above: its reads are guarded, or shifted by a parameter that may "
                   "be negative")
            raise ShapeInferenceError(
                f"cannot infer one affine range for index {x!r} from the tensor shapes ({why}); state it "
                f"with 'where {x} in lo:hi' or declare the tensor shapes",
                st.location)
        return lo, hi + 1

    # -- per statement -------------------------------------------------------------------------
    def _infer_statement(self, st: Statement, known: Dict[str, Tuple[Constraint, ...]]) -> Dict[str, Tuple[Constraint, ...]]:
        ranges: Dict[str, Tuple[Constraint, ...]] = {**_stated_ranges(st), **known}
        pending = [i for i in st.iterators if i not in ranges]
        target_shape = self.shapes.get(st.target.tensor)
        for x in list(pending):
            if target_shape is None:
                break
            for e, extent in zip(st.target.indices, target_shape):
                if e.as_single_var() == x:
                    ranges[x] = (lower_bound(x, Affine.const(0)), upper_bound_exclusive(x, extent))
                    self._bind_bare_uses(st, x, extent)
                    pending.remove(x)
                    break
        progress = True
        while pending and progress:
            progress = False
            for x in list(pending):
                shared = self._intersected_extents(st, x)
                if shared is not None:
                    ranges[x] = (lower_bound(x, Affine.const(0)),) + tuple(upper_bound_exclusive(x, e) for e in shared)
                    pending.remove(x)
                    progress = True
                    continue
                base = self._bare_base(st, x)
                found = self._range_from_reads(st, x, ranges, base)
                if found is None:
                    continue
                lo, hi = found
                ranges[x] = (lower_bound(x, lo), upper_bound_exclusive(x, hi))
                pending.remove(x)
                progress = True
        if pending:
            x = pending[0]
            raise ShapeInferenceError(
                f"cannot infer the range of index {x!r}: no tensor of known shape is indexed by it alone; "
                f"add 'where {x} in lo:hi' or declare the tensor's shape", st.location)
        return ranges

    def _intersected_extents(self, st: Statement, x: str) -> Optional[List[Affine]]:
        """Tensor Comprehensions' range of a reduction index that several tensors of known but
        different extents index alone (`Out[c] +=! I[c, h] * O[h]`, `I` of `H` columns, `O` of
        `R - KH + 1` rows): the intersection, every one of their bounds.  None when the index is
        also a subscript of the target (its extent is a shape), or some extent is not known yet."""
        if any(x in e.variables for e in st.target.indices):
            return None
        extents: List[Affine] = []
        for tensor, d in self._bare_uses(st, x):
            shape = self.shapes.get(tensor)
            if placeholder(tensor, d) in self.classes.parent or shape is None:
                return None
            if all(str(shape[d]) != str(e) for e in extents):
                extents.append(shape[d])
        return extents if len(extents) > 1 else None

    def _bare_uses(self, st: Statement, x: str) -> List[Tuple[str, int]]:
        uses = []
        for acc in st.value.accesses() + st.exists:
            for d, e in enumerate(acc.indices):
                if e.as_single_var() == x:
                    uses.append((acc.tensor, d))
        return uses

    def _declared_bare_extents(self, st: Statement, x: str) -> List[Tuple[str, Affine]]:
        """(tensor, extent) of the reads indexed by `x` alone whose extent is known (declared, not
        a placeholder still to bind), one per distinct extent."""
        out: List[Tuple[str, Affine]] = []
        for tensor, d in self._bare_uses(st, x):
            shape = self.shapes.get(tensor)
            if shape is None or placeholder(tensor, d) in self.classes.parent:
                continue
            if all(str(shape[d]) != str(e) for _, e in out):
                out.append((tensor, shape[d]))
        return out

    def _bind_bare_uses(self, st: Statement, x: str, extent: Affine) -> None:
        for tensor, d in self._bare_uses(st, x):
            ph = placeholder(tensor, d)
            if ph in self.classes.parent:
                self.classes.bind(ph, extent)
                self.classes.hint.setdefault(self.classes.find(ph), x)

    def _bare_base(self, st: Statement, x: str) -> Optional[Affine]:
        """Unify the undeclared dimensions `x` indexes alone; the extent they share, if any."""
        placeholders, known = [], []
        for tensor, d in self._bare_uses(st, x):
            ph = placeholder(tensor, d)
            if ph in self.classes.parent:
                placeholders.append(ph)
            elif self.shapes.get(tensor) is not None:
                known.append(self.shapes[tensor][d])  # type: ignore[index]
        for ph in placeholders[1:]:
            self.classes.union(placeholders[0], ph)
        if placeholders:
            self.classes.hint.setdefault(self.classes.find(placeholders[0]), x)
        if known:
            for ph in placeholders:
                self.classes.bind(ph, known[0])
            return known[0]
        if placeholders:
            return Affine.var(placeholders[0])
        return None

    def _target_shape(self, writes: List[Tuple[Statement, Dict[str, Tuple[Constraint, ...]]]]
                      ) -> Tuple[Tuple[Affine, ...], Tuple[Affine, ...]]:
        """The shape an undeclared tensor needs to hold every element its statements write (all of
        them: `t[2*j] = ...` and `t[2*j + 1] = ...` together), and the first element written per
        dimension (0 where that is not one affine expression)."""
        dims, lows = [], []
        ps = params_str(self.context_params)
        ctx = self._context()
        first = writes[0][0]
        name = first.target.tensor
        for d in range(len(first.target.indices)):
            with isl_budget(f"inferring the shape of {name}"):
                img = None
                for st, ranges in writes:
                    cs = [Constraint(c.kind, self.canon(c.expr), c.modulus) for i in st.iterators for c in ranges[i]]
                    key = (st.name, d, ps, conjunction_str(cs))
                    part = self._written_parts.get(key)
                    if part is None:    # each write's image once: a tensor written by many statements
                        tup = "[" + ", ".join(isl_name(i) for i in st.iterators) + "]"
                        dom = isl.Set(f"{ps} -> {{ {tup} : {key[3]} }}")
                        part = isl.Map(f"{ps} -> {{ {tup} -> [{affine_str(st.target.indices[d])}] }}") \
                            .intersect_domain(dom).range().coalesce()
                        self._written_parts[key] = part
                    img = part if img is None else img.union(part).coalesce()
                img = img.coalesce().intersect_params(ctx)  # type: ignore[union-attr]
                v = first.target.indices[d].as_single_var()
                hi = self._extent(img.dim_max(0), ctx, v if v is not None and v in first.iterators
                                  else f"{name}_dim{d}") if img.is_bounded() else None
                lo = pw_aff_to_affine(img.dim_min(0), ctx)
            lows.append(lo if lo is not None else Affine.const(0))
            if hi is None:
                raise ShapeInferenceError(
                    f"cannot infer dimension {d} of {name!r}; declare its shape "
                    f"(e.g. {name}=pc.f32[...])", writes[-1][0].location)
            dims.append(hi + 1)
        return tuple(dims), tuple(lows)

    # -- whole program -------------------------------------------------------------------------
    def run(self) -> Program:
        groups: List[List[Statement]] = []
        for st in self.p.statements:
            if groups and groups[-1][-1].location == st.location and groups[-1][-1].text == st.text \
                    and groups[-1][-1].target == st.target:
                groups[-1].append(st)
            else:
                groups.append([st])
        resolved: Dict[str, Dict[str, Tuple[Constraint, ...]]] = {}
        writes: Dict[str, List[Tuple[Statement, Dict[str, Tuple[Constraint, ...]]]]] = {}
        pending = groups
        while pending:
            deferred: List[Tuple[List[Statement], ShapeInferenceError]] = []
            for group in pending:
                full = group[-1]
                name = full.target.tensor
                try:
                    ranges = self._infer_statement(full, {})
                except ShapeInferenceError as e:
                    if self.shapes.get(name) is not None:
                        raise
                    # A pure definition whose index no right-hand side ranges (Halide's
                    # `conv[c, x] = bias[c]`): a later statement writing the same tensor may fix
                    # its shape, which then gives the range.  Retry after the others.
                    deferred.append((group, e))
                    continue
                for st in group:
                    resolved[st.name] = {i: ranges[i] for i in st.iterators}
                if self.shapes.get(name) is None or name in writes:
                    self._record_write(writes.setdefault(name, []), group, ranges)
            if len(deferred) == len(pending):
                # Nothing else fixes them: a definition its own reads do not bound (Halide's
                # `kernel[x] = exp(-x * x)`, a clamped read) covers what later statements read.
                # Consumers come later in the program: try the last definitions first.
                settled = None
                for k in reversed(range(len(deferred))):
                    group = deferred[k][0]
                    ranges = self._ranges_from_consumers(group[-1], resolved)
                    if ranges is not None:
                        settled = k
                        break
                if settled is None:
                    raise deferred[0][1]
                for st in group:
                    resolved[st.name] = {i: ranges[i] for i in st.iterators}
                name = group[-1].target.tensor
                writes.setdefault(name, []).append((group[-1], ranges))
                self.shapes[name], self.lows[name] = self._target_shape(writes[name])
                deferred = deferred[:settled] + deferred[settled + 1:]
            pending = [g for g, _ in deferred]
        return self._finish(resolved)

    def _record_write(self, writes: List[Tuple[Statement, Dict[str, Tuple[Constraint, ...]]]],
                      group: List[Statement], ranges: Dict[str, Tuple[Constraint, ...]]) -> None:
        """Add `group`'s writes to its target's `writes` and set the target's shape from them all.

        A reduction's target holds an element for every value of its own indices, also where the
        reduction range is empty (the identity): its initialisation, the group's first statement,
        writes them all, over its indices' ranges without the reduction's (`O[i] +=! A[i, k]
        where k in i:K` has `M` rows, not `min(M, K)`).  Where the initialisation alone bounds
        nothing (an index ranged by the reduction index, `i in 0:k`), the update's writes give the
        shape, as before."""
        full, init = group[-1], group[0]
        name = full.target.tensor
        if init is not full:
            reduction = set(full.iterators) - set(init.iterators)
            own = {i: tuple(c for c in ranges[i] if not reduction & set(c.expr.variables)) for i in init.iterators}
            writes.append((init, own))
            try:
                self.shapes[name], self.lows[name] = self._target_shape(writes)
                return
            except PolycError:
                writes.pop()
        writes.append((full, ranges))
        self.shapes[name], self.lows[name] = self._target_shape(writes)

    def _ranges_from_consumers(self, st: Statement, resolved: Dict[str, Dict[str, Tuple[Constraint, ...]]]
                               ) -> Optional[Dict[str, Tuple[Constraint, ...]]]:
        """Ranges for `st`'s unranged indices from what later statements read of its target: an
        index that is the bare subscript of target dimension `d` runs over `0 <= x <= hi`, `hi` the
        largest index along `d` any resolved reader reads (isl, exactly; one affine expression).
        None when that does not settle every index, or a reader may read below 0 there (storage
        starts at 0)."""
        tensor = st.target.tensor
        readers = [r for r in self.p.statements if r.name in resolved and r is not st
                   and any(a.tensor == tensor for a in r.value.accesses())]
        if not readers:
            return None
        try:
            ranges = self._infer_partial(st)
        except ShapeInferenceError:
            return None
        ps = params_str(self.context_params)
        ctx = self._context()
        for d, e in enumerate(st.target.indices):
            x = e.as_single_var()
            if x is None or x in ranges:
                continue
            image = None
            with isl_budget(f"inferring the range of index {x!r} from the reads of {tensor}"):
                for r in readers:
                    cs = [Constraint(c.kind, self.canon(c.expr), c.modulus)
                          for i in r.iterators for c in resolved[r.name][i]]
                    tup = "[" + ", ".join(isl_name(i) for i in r.iterators) + "]"
                    dom = isl.Set(f"{ps} -> {{ {tup} : {conjunction_str(cs)} }}")
                    for acc in r.value.accesses():
                        if acc.tensor != tensor:
                            continue
                        part = isl.Map(f"{ps} -> {{ {tup} -> [{affine_str(acc.indices[d])}] }}") \
                            .intersect_domain(dom).range()
                        image = part if image is None else image.union(part)
                if image is None:
                    return None
                image = image.coalesce().intersect_params(ctx)
                lo = Affine.const(0)
                below = not image.is_empty() and not image.lexmin().intersect(
                    isl.Set(f"{ps} -> {{ [v] : v < 0 }}")).is_empty()
                if below and self.p.tensor(tensor).role != "temp":
                    return None
                hi = pw_aff_to_affine(image.dim_max(0), ctx)
                if below:
                    # Below 0: an intermediate's storage is shifted, by a constant or by sizes
                    # (Halide's `x + rx - KW / 2`: a size computed at call time, `_extent`).
                    lo = pw_aff_to_affine(image.dim_min(0), ctx) or self._floor_extent(image.dim_min(0), ctx, x)
                    if hi is None and lo is not None:
                        hi = self._floor_extent(image.dim_max(0), ctx, x)
            if hi is None or lo is None:
                return None
            ranges[x] = (lower_bound(x, lo), upper_bound_exclusive(x, hi + Affine.const(1)))
            if lo != Affine.const(0):
                self.shifts.setdefault(tensor, {})[d] = lo.scale(-1)
        if any(i not in ranges for i in st.iterators):
            return None
        return ranges

    def _infer_partial(self, st: Statement) -> Dict[str, Tuple[Constraint, ...]]:
        """The ranges `_infer_statement` settles for `st`, without failing on those it cannot."""
        ranges = _stated_ranges(st)
        for x in [i for i in st.iterators if i not in ranges]:
            found = self._range_from_reads(st, x, ranges, self._bare_base(st, x))
            if found is not None:
                ranges[x] = (lower_bound(x, found[0]), upper_bound_exclusive(x, found[1]))
        return ranges

    def _finish(self, resolved: Dict[str, Dict[str, Tuple[Constraint, ...]]]) -> Program:
        taken = kernel_names_in(self.p)
        taken |= {name for name, _, _ in self.derived}
        names: Dict[str, str] = {}
        new_sizes: List[str] = []
        for ph in self.classes.parent:
            r = self.classes.find(ph)
            if r in self.classes.binding or r in names:
                continue
            hint = self.classes.hint.get(r)
            candidate = hint.upper() if hint else ph.strip("_").replace("__", "_")
            if not hint:
                tensor, dim = ph[2:].rsplit("_", 1)
                candidate = f"{tensor}_dim{dim}"
            candidate = fresh_size_name(candidate, taken)
            names[r] = candidate
            new_sizes.append(candidate)

        def resolve(a: Affine, depth: int = 0) -> Affine:
            mapping = {}
            for v in a.variables:
                if v in self.classes.parent:
                    r = self.classes.find(v)
                    mapping[v] = resolve(self.classes.binding[r], depth + 1) if r in self.classes.binding \
                        else Affine.var(names[r])
            return a.substitute(mapping) if mapping else a

        def fix(c: Constraint) -> Constraint:
            return Constraint(c.kind, resolve(c.expr), c.modulus)

        statements = []
        for st in self.p.statements:
            if not st.inferred:
                statements.append(st)
                continue
            extra = tuple(fix(c) for i in st.inferred for c in resolved[st.name][i])
            domain = tuple(tuple(fix(c) for c in conj) + extra for conj in st.domain)
            statements.append(st.with_(domain=domain, inferred=()))
        shifts = {t: {d: resolve(a) for d, a in by.items()} for t, by in self.shifts.items()}
        statements = [_shifted(st, shifts) for st in statements]
        tensors = []
        for t in self.p.tensors:
            shape = self.shapes[t.name]
            if shape is not None and t.name in shifts:   # its writes start below 0: shifted
                shape = tuple(e + shifts[t.name].get(d, Affine.const(0)) for d, e in enumerate(shape))
            tensors.append(TensorDecl(t.name, t.dtype, tuple(resolve(e) for e in shape) if shape is not None else (),
                                      t.role, t.declared))
        return self.p.with_(statements=tuple(statements), tensors=tuple(tensors),
                            sizes=tuple(self.p.sizes) + tuple(new_sizes) + tuple(n for n, _, _ in self.derived),
                            assumptions=self.p.assumptions + tuple(fix(c) for c in self._derived_constraints()),
                            derived_sizes=self.p.derived_sizes + tuple((n, resolve(num), d) for n, num, d in self.derived))


def infer_shapes(program: Program) -> Program:
    """Fill in every inferred index range and every undeclared tensor shape of an Einstein program."""
    if not any(st.inferred for st in program.statements) and all(t.shape is not None for t in program.tensors):
        return program
    try:
        return _Inference(program).run()
    except ShapeInferenceError as first:
        # `B[i] = A[i] + 1.0; A[i] = B[i] * 2.0`: an updated tensor's writes are no range of their
        # own; it is passed in, so its shape is the call's, as an input's is.
        if not any(t.role == "inout" and t.shape is None for t in program.tensors):
            raise
        try:
            return _Inference(program, call_shaped_inout=True).run()
        except (ShapeInferenceError, RecursionError):   # (sizes bound to each other in a cycle)
            raise first from None


def _stated_ranges(st: Statement) -> Dict[str, Tuple[Constraint, ...]]:
    """The constraints `st` states on each iterator it does not leave to inference (`where`).

    A min/max iterator is fixed by alternative pieces of the domain (one per conjunction): for
    inference it is unconstrained, so a clamped read bounds no index (it is in bounds wherever it
    is; `check_bounds` proves that on the real domain afterwards).  An iterator's stated range is
    what every piece says of it: a clamp's pieces (`x <= W - 1` in one, `x >= W` in the other)
    split the range, never bound it."""
    extremes = set(st.extremes)
    common = [c for c in (st.domain[0] if st.domain else ()) if all(c in conj for conj in st.domain[1:])]
    return {i: () if i in extremes else tuple(dict.fromkeys(
        c for c in common if i in c.expr.variables and not extremes & set(c.expr.variables)))
        for i in st.iterators if i not in st.inferred}


def _shifted(st: Statement, shifts: Dict[str, Dict[int, Affine]]) -> Statement:
    """`st` with each access of a shifted intermediate moved into its storage (index + shift)."""
    if not shifts:
        return st

    def move(acc: Access) -> Access:
        by = shifts.get(acc.tensor)
        if not by:
            return acc
        return Access(acc.tensor, tuple(e + by.get(d, Affine.const(0)) for d, e in enumerate(acc.indices)))

    return st.with_(target=move(st.target),
                    value=rebuild(st.value, lambda e: move(e) if isinstance(e, Access) else None))
