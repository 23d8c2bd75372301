"""Small bridges between polyc's IR and isl: names, constraint strings, budgets, conversions.

isl is the single source of truth for sets and maps; this module only spells IR values in isl's
syntax and reads isl's answers back into IR values.
"""
from __future__ import annotations

import contextlib
import os
import re
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import islpy as isl

from ..errors import IslBudgetError, PolycError
from ..ir import Affine, Constraint

_BUDGET_WHEN_UNSET = 20000000
#: The largest budget isl takes (an unsigned long).
_MAX_BUDGET = 2 ** 63 - 1


def _budget_from_environment() -> Tuple[int, Optional[str]]:
    """POLYC_ISL_BUDGET as (budget, problem): a whole number of operations from 0 (unlimited) to
    2**63 - 1.  Anything else is a problem that `isl_budget` reports (`import polyc` must not fail
    on it), with the default budget meanwhile."""
    text = os.environ.get("POLYC_ISL_BUDGET", "").strip()
    if not text:
        return _BUDGET_WHEN_UNSET, None
    if text.isascii() and text.isdigit() and int(text) <= _MAX_BUDGET:
        return int(text), None
    return _BUDGET_WHEN_UNSET, (f"POLYC_ISL_BUDGET={text[:40]!r} is not a number of isl operations: set it to a "
                                f"whole number from 0 (unlimited) to {_MAX_BUDGET}, or unset it")


#: Default hard limit of isl operations for one guarded computation (0 = unlimited).
DEFAULT_BUDGET, _BUDGET_PROBLEM = _budget_from_environment()

#: isl keywords, compared case-insensitively (isl reads `MOD` and `Infty` as keywords too).
_ISL_KEYWORDS = {"and", "or", "not", "exists", "mod", "floor", "ceil", "min", "max", "infty",
                 "true", "false", "implies", "rat", "domain", "range", "div", "cdiv_q", "fdiv_q",
                 "nan", "inf", "infinity", "xor", "to", "list", "fail", "ceild", "floord"}

#: Names polyc uses inside isl text for its own variables (time dimensions `t0`, `u3`, ...), and the
#: names isl gives unnamed dimensions when it prints (`i0`, `o1`, `e0`): a lowercase letter and
#: digits, or a leading underscore.  No user name is spelled like this in isl (see `isl_name`).
_INTERNAL = re.compile(r"([a-z][0-9]+|_.*)\Z")
_VERBATIM = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
#: Marks the spelling of a name that does not start with an ASCII letter (`_g` never occurs in an
#: escaped body, where `_` is followed by `_` or a hex digit).
_ODD_START = "u_g"


def isl_name(name: str) -> str:
    """A user name as an isl identifier: injective, never an isl keyword, never one of polyc's
    internal isl names, always ASCII.

    Plain names (an ASCII letter, then letters, digits and `_`, not ending in `_`) stay as they are.
    Every other name ends in `_` (which plain names never do): keywords `and` -> `and_`, internal
    look-alikes `t0` -> `t0_`, `and_` -> `and___` (inner `_` doubled), and names that are not plain
    ASCII are spelled out (`α` -> `u_g_3b1__`, see `polyc.ir.spelling.ascii_spelling`).
    """
    if _VERBATIM.match(name) and not name.endswith("_") and name.lower() not in _ISL_KEYWORDS \
            and not _INTERNAL.match(name):
        return name
    from ..ir.spelling import ascii_spelling
    body = ascii_spelling(name)
    if not (name[:1].isascii() and name[:1].isalpha()):
        body = _ODD_START + body
    return body + "_"


def user_name(isl_id: str) -> str:
    """The name `isl_name` turned into `isl_id` (ids it cannot have produced come back unchanged)."""
    if not isl_id.endswith("_") or not isl_id[:1].isalpha():
        return isl_id
    body = isl_id[:-1]
    if body.startswith(_ODD_START):
        body = body[len(_ODD_START):]
    out, k = [], 0
    while k < len(body):
        ch = body[k]
        if ch != "_":
            out.append(ch)
            k += 1
        elif body[k + 1:k + 2] == "_":
            out.append("_")
            k += 2
        else:
            end = body.find("_", k + 1)
            try:
                out.append(chr(int(body[k + 1:end], 16)))
            except ValueError:        # not a spelling isl_name makes: a name of isl's or polyc's own
                return isl_id
            k = end + 1
    return "".join(out)


def affine_str(a: Affine) -> str:
    parts = [f"{c}*{isl_name(v)}" for v, c in a.terms]
    parts.append(str(a.constant))
    return "(" + " + ".join(parts) + ")"


def constraint_str(c: Constraint) -> str:
    if c.kind == "ge":
        return f"{affine_str(c.expr)} >= 0"
    if c.kind == "eq":
        return f"{affine_str(c.expr)} = 0"
    if c.kind == "mod":
        return f"{affine_str(c.expr)} mod {c.modulus} = 0"
    raise ValueError(c.kind)


def conjunction_str(cs: Iterable[Constraint]) -> str:
    parts = [constraint_str(c) for c in cs]
    return " and ".join(parts) if parts else "true"


def disjunction_str(dnf: Sequence[Sequence[Constraint]]) -> str:
    if not dnf:
        return "false"
    return " or ".join(f"({conjunction_str(conj)})" for conj in dnf)


def params_str(params: Iterable[str]) -> str:
    return "[" + ", ".join(isl_name(p) for p in params) + "]"


def budget_exhausted(ctx: isl.Context) -> bool:
    """True if the operation budget is spent: then even a trivial parse fails.

    (isl reports a budget hit inside parsing as a syntax error, and islpy exposes no operation
    counter, so a failing probe is the reliable signal.)
    """
    if not ctx.get_max_operations():
        return False
    try:
        isl.Set("{ [x] : x >= 0 }")
        return False
    except isl.Error:
        return True


@contextlib.contextmanager
def isl_budget(what: str, budget: Optional[int] = None) -> Iterator[None]:
    """Run an isl computation under a hard operation budget; exceeding it raises IslBudgetError.

    Parse inputs *before* entering (parsing counts against the budget and a limit hit while parsing
    reads as a misleading syntax error).
    """
    if _BUDGET_PROBLEM is not None:
        raise IslBudgetError(_BUDGET_PROBLEM)
    ctx = isl.DEFAULT_CONTEXT
    limit = DEFAULT_BUDGET if budget is None else budget
    previous = ctx.get_max_operations()
    ctx.set_max_operations(limit)
    ctx.reset_operations()
    exceeded = (f"{what} needed more than {limit} isl operations and was stopped (set POLYC_ISL_BUDGET "
                f"to raise the limit)")
    try:
        yield
    except isl.Error as e:
        if "operations" in str(e) or budget_exhausted(ctx):
            raise IslBudgetError(exceeded) from e
        raise PolycError(f"{what} failed inside isl: {e}") from e
    except (TypeError, ValueError) as e:
        # Past the budget some islpy conversions fail without an isl.Error (`Val.to_python` gets
        # no text back): that is the budget too, not a bug of the caller.
        if budget_exhausted(ctx):
            raise IslBudgetError(exceeded) from e
        raise
    finally:
        ctx.set_max_operations(previous)
        ctx.reset_operations()


def aff_to_affine(aff: isl.Aff) -> Optional[Affine]:
    """An isl affine function of parameters (and set dims named by `in_names`) as an IR Affine.

    Returns None when the function has a non-unit denominator or integer divisions.
    """
    if aff.get_denominator_val().to_python() != 1 or aff.dim(isl.dim_type.div) > 0:
        return None
    coeffs = {}
    for kind in (isl.dim_type.param, isl.dim_type.in_):
        for k in range(aff.dim(kind)):
            c = aff.get_coefficient_val(kind, k).to_python()
            if c:
                coeffs[user_name(aff.get_dim_name(kind, k))] = int(c)
    return Affine.from_dict(coeffs, int(aff.get_constant_val().to_python()))


def pw_aff_to_affine(pa: isl.PwAff, context: Optional[isl.Set] = None) -> Optional[Affine]:
    """A single-piece piecewise affine function as an Affine, or None when it has several pieces."""
    if context is not None:
        pa = pa.gist_params(context)
    pieces = pa.get_pieces()
    if len(pieces) != 1:
        affs = {str(aff) for _, aff in pieces}
        if len(affs) != 1:
            return None
    return aff_to_affine(pieces[0][1])


def sample_point_values(s: isl.Set) -> Tuple[dict, Tuple[int, ...]]:
    """Parameter values and coordinates of one point of a non-empty set (isl picks it)."""
    point = s.sample_point()
    space = s.get_space()
    params = {user_name(space.get_dim_name(isl.dim_type.param, k)):
              point.get_coordinate_val(isl.dim_type.param, k).to_python()
              for k in range(space.dim(isl.dim_type.param))}
    coords = tuple(point.get_coordinate_val(isl.dim_type.set, k).to_python()
                   for k in range(space.dim(isl.dim_type.set)))
    return params, coords


def union_map_pieces(umap: isl.UnionMap) -> list:
    """The maps of a union map, one per pair of spaces."""
    out: list = []
    umap.foreach_map(out.append)
    return out


def params_set_to_constraints(s: isl.Set, derived: Sequence[Tuple[str, Affine, int]] = (),
                              new_derived: Optional[List[Tuple[str, Affine, int]]] = None
                              ) -> Optional[Tuple[Constraint, ...]]:
    """A parameter set as one conjunction of affine constraints, or None when it needs several
    pieces or integer divisions (then it cannot be stated as simple call-time checks).

    A division `floor(num / d)` that is one of the `derived` sizes `(name, num, d)` is read as that
    size."""
    s = s.coalesce()
    pieces = s.get_basic_sets()
    if len(pieces) != 1:
        return None
    bset = pieces[0]
    divs = []
    for k in range(bset.dim(isl.dim_type.div)):
        div = bset.get_div(k)
        d = div.get_denominator_val()
        num = Affine.from_dict({user_name(div.get_dim_name(isl.dim_type.param, j)): int((div.get_coefficient_val(
            isl.dim_type.param, j) * d).to_python()) for j in range(div.dim(isl.dim_type.param))},
            int((div.get_constant_val() * d).to_python()))
        match = [name for name, n, dd in list(derived) + list(new_derived or ())
                 if n == num and dd == int(d.to_python())]
        if not match and new_derived is not None:   # a new size computed per call, like a derived one
            name = f"_floor{len(derived) + len(new_derived)}"
            new_derived.append((name, num, int(d.to_python())))
            match = [name]
        divs.append(match[0] if match else None)
    out = []
    for c in bset.get_constraints():
        coeffs = {}
        for k in range(c.dim(isl.dim_type.div)):
            v = c.get_coefficient_val(isl.dim_type.div, k)
            if v.is_zero():
                continue
            if divs[k] is None:
                return None
            coeffs[divs[k]] = coeffs.get(divs[k], 0) + int(v.to_python())
        for k in range(c.dim(isl.dim_type.param)):
            v = c.get_coefficient_val(isl.dim_type.param, k).to_python()
            if v:
                name = user_name(c.get_dim_name(isl.dim_type.param, k))
                coeffs[name] = coeffs.get(name, 0) + int(v)
        expr = Affine.from_dict(coeffs, int(c.get_constant_val().to_python()))
        out.append(Constraint("eq" if c.is_equality() else "ge", expr))
    return tuple(out)


def pw_aff_to_floor_form(pa: isl.PwAff, context: Optional[isl.Set] = None
                         ) -> Optional[Tuple[Affine, int, Affine, int]]:
    """A single-piece function of parameters `rest + c * floor(num / d)` as (rest, c, num, d).

    Such extents come from strides (`(H - K) // S + 1` output sizes); None for anything else.
    """
    if context is not None:
        pa = pa.gist_params(context)
    pieces = pa.get_pieces()
    if len({str(aff) for _, aff in pieces}) != 1:
        return None
    aff = pieces[0][1]
    if aff.dim(isl.dim_type.div) != 1 or aff.dim(isl.dim_type.in_) > 0 and any(
            not aff.get_coefficient_val(isl.dim_type.in_, k).is_zero() for k in range(aff.dim(isl.dim_type.in_))):
        return None
    if aff.get_denominator_val().to_python() != 1:
        return None
    div = aff.get_div(0)
    d = int(div.get_denominator_val().to_python())
    if any(not div.get_coefficient_val(isl.dim_type.div, k).is_zero() for k in range(div.dim(isl.dim_type.div))):
        return None  # a nested division
    coeffs, rest = {}, {}
    for k in range(div.dim(isl.dim_type.param)):
        name = user_name(div.get_dim_name(isl.dim_type.param, k))
        v = div.get_coefficient_val(isl.dim_type.param, k) * d
        if not v.is_zero():
            coeffs[name] = int(v.to_python())
        r = aff.get_coefficient_val(isl.dim_type.param, k)
        if not r.is_zero():
            rest[name] = int(r.to_python())
    num = Affine.from_dict(coeffs, int((div.get_constant_val() * d).to_python()))
    c = int(aff.get_coefficient_val(isl.dim_type.div, 0).to_python())
    return Affine.from_dict(rest, int(aff.get_constant_val().to_python())), c, num, d


def fixed_value(m: Union[isl.Map, isl.BasicMap], k: int) -> Optional[int]:
    """The constant value of output dimension `k` of `m` (every piece agrees), or None when it
    varies: the one way polyc reads a statement's constant schedule positions."""
    v = m.plain_get_val_if_fixed(isl.dim_type.out, k)
    return None if v.is_nan() else int(v.to_python())


def basic_set_constraints(bset: isl.BasicSet) -> Optional[Tuple[Constraint, ...]]:
    """The constraints of a basic set over parameters and named set dimensions (IR names), or None
    when it has integer divisions (existentials) the IR cannot state."""
    if bset.dim(isl.dim_type.div) > 0:
        return None
    out = []
    for c in bset.get_constraints():
        coeffs = {}
        for kind in (isl.dim_type.param, isl.dim_type.set):
            for k in range(c.dim(kind)):
                v = c.get_coefficient_val(kind, k).to_python()
                if v:
                    coeffs[user_name(c.get_dim_name(kind, k))] = int(v)
        out.append(Constraint("eq" if c.is_equality() else "ge",
                              Affine.from_dict(coeffs, int(c.get_constant_val().to_python()))))
    return tuple(out)


def set_dnf(s: isl.Set) -> Optional[Tuple[Tuple[Constraint, ...], ...]]:
    """`s` as a disjunction of conjunctions of IR constraints (isl's simplest form), or None when a
    piece needs integer divisions."""
    pieces = [basic_set_constraints(b) for b in s.remove_redundancies().coalesce().get_basic_sets()]
    return None if any(p is None for p in pieces) else tuple(pieces)
