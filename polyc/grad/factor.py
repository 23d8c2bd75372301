"""Fewer passes over a row: factors constant along a gradient's sum taken out of it.

The chain rule leaves per-row factors inside the sums of a backward pass.  Layernorm's (with the
row's reciprocal deviation `r(i)`)::

    var_grad[i]  += -(Y_grad[i, j] * gamma[j] * (X[i, j] - mean[i])) * 0.5 * r(i)**3
    mean_grad[i] += -(Y_grad[i, j] * gamma[j] * r(i) + 2 * var_grad[i] / N * (X[i, j] - mean[i]))

The second sum reads `var_grad[i]`, the result of the first, so the two cannot share a loop: each
streams the row again.  With the factors taken out of the second,

    var_grad[i]      += (as above)
    mean_grad_sum[i]  += Y_grad[i, j] * gamma[j]
    mean_grad_sum2[i] += X[i, j] - mean[i]
    mean_grad[i]     += -r(i) * mean_grad_sum[i] - 2 * var_grad[i] / N * mean_grad_sum2[i]

the three sums read only the forward values and the seed, so `"auto"` runs them in one pass with
three accumulators (`schedule.auto_fuse`), and `mean_grad` follows from a few scalars per row.

The rewrite of a sum `T[o] += sum over r of E(o, r)` (o: the target's indices, r: the summed ones):

- `E` is split into its terms (through `+`, `-` and negation only; a product of sums is never
  multiplied out, so `X - mean` stays centred before it is summed), and each term into the factors
  of its product (through `*`, negation, and `/` by a factor constant along r);
- a term's *coefficient* is the product of its factors constant along r, its *summand* the product
  of the others; terms whose coefficient is a literal stay in the sum into `T` as they are; the
  others are grouped by summand, each group summed into a temporary `T_sum[o]` of `T`'s shape
  (zeroed first), and `T[o] += c1(o) * T_sum[o] + ...` runs after them over the target elements the
  sum covers (isl projects its domain: where a row is empty nothing is added, not even `inf * 0`).

Only sums where some coefficient reads the result of another sum are rewritten: that dependence is
what keeps them in a pass of their own.  Elsewhere a factor taken out saves one multiplication by a
loop invariant per element, which does not pay for another array and pass (avgpool's
`/ 4.0`); a sum with a term constant along r (no summand) is left alone too.  Exact in real
arithmetic; in floating point it rounds like any reassociation of the gradient's sums, which are
Einstein reductions (unordered by definition; `pc.grad`'s docstring says so).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

import islpy as isl

from ..errors import IslBudgetError
from ..ir import Access, Binary, Const, Constraint, Expr, Program, Statement, TensorDecl, Unary
from ..poly.islutil import conjunction_str, disjunction_str, isl_budget, params_str, set_dnf, user_name
from ..poly.model import tuple_str
from .derivative import ONE, ZERO, add, is_zero, mul, names_indexed, neg
from .exprs import fill_statement, fresh_name, used_names

#: A term: (negated, factors of its product).
Term = Tuple[bool, Tuple[Expr, ...]]


def _terms(e: Expr) -> List[Term]:
    """`e` as a sum of signed products (module docstring): sums split, products flattened, left to
    right.  Iterative, as `Expr.walk` is: a sum of a thousand terms needs no deep recursion."""
    out: List[Term] = []
    stack: List[Tuple[Expr, bool]] = [(e, False)]
    while stack:
        x, negated = stack.pop()
        if isinstance(x, Binary) and x.op in ("+", "-"):
            stack.append((x.rhs, negated != (x.op == "-")))
            stack.append((x.lhs, negated))
        elif isinstance(x, Unary) and x.op == "-":
            stack.append((x.operand, not negated))
        else:
            flipped, factors = _factors(x)
            out.append((negated != flipped, factors))
    return out


def _factors(e: Expr) -> Tuple[bool, Tuple[Expr, ...]]:
    """`e` as (negated, factors of a product, left to right), through `*` and negation (`/` is
    handled by the caller, which knows which denominators are constant)."""
    negated = False
    factors: List[Expr] = []
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Binary) and x.op == "*":
            stack += [x.rhs, x.lhs]
        elif isinstance(x, Unary) and x.op == "-":
            negated = not negated
            stack.append(x.operand)
        else:
            factors.append(x)
    return negated, tuple(factors)


def _split(factors: Sequence[Expr], summed: Set[str]) -> Tuple[bool, List[Expr], List[Expr]]:
    """(whether the product changes sign, its factors constant along the `summed` indices, the
    others); `a / b` with a constant `b` counts as `a` (split further) times `1 / b`."""
    negated = False
    constant: List[Expr] = []
    varying: List[Expr] = []
    stack = list(reversed(factors))
    while stack:
        f = stack.pop()
        if not (names_indexed(f) & summed):
            constant.append(f)
        elif isinstance(f, Binary) and f.op == "/" and not (names_indexed(f.rhs) & summed):
            constant.append(Binary("/", ONE, f.rhs))
            flipped, inner = _factors(f.lhs)
            negated = negated != flipped
            stack.extend(reversed(inner))
        else:
            varying.append(f)
    return negated, constant, varying


def _product(factors: Sequence[Expr]) -> Expr:
    out: Expr = ONE
    for f in factors:
        out = mul(out, f)
    return out


def _signed(negated: bool, e: Expr) -> Expr:
    return neg(e) if negated else e


class _Plan:
    """How one sum is rewritten: the literal-coefficient terms kept together (`plain`), and the
    other terms grouped by summand (summand -> coefficient)."""

    def __init__(self, st: Statement, results: Set[str]):
        summed = set(st.reduction)
        self.plain: Expr = ZERO
        self.groups: Dict[Expr, Expr] = {}
        self.worth = True
        for negated, factors in _terms(st.value):
            flipped, constant, varying = _split(factors, summed)
            negated = negated != flipped
            if not varying:
                self.worth = False          # a term constant along the sum: left alone
                return
            if all(isinstance(f, Const) for f in constant):
                self.plain = add(self.plain, _signed(negated, _product(constant + varying)))
                continue
            summand = _product(varying)
            self.groups[summand] = add(self.groups.get(summand, ZERO), _signed(negated, _product(constant)))
        # Worth it where a coefficient reads another sum's result: the dependence that kept this sum
        # out of that sum's loop goes with it.  Otherwise each element saves one multiplication by
        # a loop invariant, which does not pay for another array and pass (avgpool's `/ 4.0`).
        self.worth = any(results & {a.tensor for a in c.accesses()} for c in self.groups.values())


def _covered_elements(st: Statement, outer: Sequence[str], sizes: Sequence[str],
                      assumptions: Sequence[Constraint]) -> Optional[Tuple[Tuple[Constraint, ...], ...]]:
    """The domain of `st` projected on its `outer` iterators (the target elements some instance
    updates), as constraints; None where isl's form needs divisions or isl's budget runs out (the
    sum is then left as it is: this is an optimisation)."""
    p = params_str(sizes)
    summed = [k for k, i in enumerate(st.iterators) if i not in outer]
    dom = isl.Set(f"{p} -> {{ {tuple_str('G', st.iterators)} : {disjunction_str(st.domain)} }}")
    ctx = isl.Set(f"{p} -> {{ : {conjunction_str(assumptions)} }}")
    try:
        with isl_budget(f"projecting the sum {st.target} onto its target"):
            for k in reversed(summed):
                dom = dom.project_out(isl.dim_type.set, k, 1)
            dom = dom.intersect_params(ctx).gist_params(ctx)
            if dom.is_empty():
                return None
            names = [user_name(dom.get_dim_name(isl.dim_type.set, k)) for k in range(dom.dim(isl.dim_type.set))]
            return set_dnf(dom) if names == list(outer) else None
    except IslBudgetError:
        return None


def _eligible(st: Statement) -> Optional[Tuple[str, ...]]:
    """The target's iterators of a sum this module may rewrite, or None."""
    if st.update != "+" or not st.reduction or st.divisions or st.descending:
        return None
    if any(c.kind == "mod" for conj in st.domain for c in conj):
        return None
    outer = tuple(i for i in st.iterators if i not in st.reduction)
    coords = [a.as_single_var() for a in st.target.indices]
    if None in coords or sorted(coords) != sorted(outer) or len(set(coords)) != len(coords):
        return None
    if any(a.tensor == st.target.tensor for a in st.value.accesses()):
        return None
    return outer


def factor_sums(program: Program, adjoints: Set[str]) -> Tuple[Program, Set[str]]:
    """`program` with the sums into the `adjoints` rewritten as the module docstring says, and the
    names of the temporaries holding the new sums."""
    used = used_names(program)
    decls = program.tensor_map
    results = {st.target.tensor for st in program.statements if st.update is not None}
    zeroes: List[Statement] = []
    new_tensors: List[TensorDecl] = []
    out: List[Statement] = []
    for st in program.statements:
        t = decls[st.target.tensor]
        outer = _eligible(st) if t.name in adjoints and t.shape is not None else None
        plan = _Plan(st, results) if outer is not None else None
        covered = _covered_elements(st, outer, program.sizes, program.assumptions) \
            if plan is not None and plan.worth else None
        if not covered:
            out.append(st)
            continue
        if not is_zero(plan.plain):
            out.append(st.with_(value=plan.plain))     # the terms left alone, summed as before
        combined: Expr = ZERO
        for summand, coefficient in plan.groups.items():
            name = fresh_name(f"{t.name}_sum", used)
            new_tensors.append(TensorDecl(name, t.dtype, t.shape, "temp"))
            target = Access(name, st.target.indices)
            zeroes.append(fill_statement(name, t.shape, st, used))
            out.append(st.with_(target=target, value=summand))
            combined = add(combined, mul(coefficient, target))
        out.append(Statement(name="", iterators=outer, domain=covered, target=st.target, value=combined,
                             update="+", location=st.location, text=st.text))
    if not new_tensors:
        return program, set()
    statements = zeroes + out
    return program.with_(
        tensors=program.tensors + tuple(new_tensors),
        statements=tuple(s.with_(name=f"S{k}", order=(k,) + (0,) * len(s.iterators))
                         for k, s in enumerate(statements))), {t.name for t in new_tensors}
