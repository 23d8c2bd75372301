"""Legality of schedules against exact dependences, with concrete counterexamples.

- A schedule is legal iff, for every dependence `x -> y`, `y` is scheduled strictly after `x`
  (lexicographically positive).
- A loop may run in parallel (or as SIMD lanes, or across GPU blocks/threads) iff no dependence is
  *carried* by it: no pair that agrees on all outer dimensions and differs at that loop.
Each refusal raises `IllegalScheduleError` naming the dependence kind, the statements, the array
and one concrete pair of instances with the sizes isl picked.
"""
from __future__ import annotations

from typing import Iterable, List, Optional, Tuple

import islpy as isl

from ..errors import IllegalScheduleError
from ..poly.dependences import Dependence, Dependences
from ..poly.islutil import isl_budget, sample_point_values
from .schedule import Schedule

_VERB = {"flow": ("writes", "reads"), "anti": ("reads", "overwrites"), "output": ("writes", "overwrites")}


def _instance(statement, coords) -> str:
    if not statement.iterators:
        return f"{statement.name}"
    return f"{statement.name}[{', '.join(f'{i}={v}' for i, v in zip(statement.iterators, coords))}]"


def describe_pair(schedule: Schedule, dep: Dependence, pairs: isl.Map) -> str:
    """One violating pair of `dep` (restricted to `pairs`) in words, with sizes."""
    program = schedule.model.program
    params, coords = sample_point_values(pairs.intersect_params(schedule.model.context).wrap())
    n_in = pairs.dim(isl.dim_type.in_)
    src, snk = program.statement(dep.source), program.statement(dep.sink)
    src_c, snk_c = coords[:n_in], coords[n_in:]
    env = dict(params)
    env.update(zip(src.iterators, src_c))
    acc = next((a for a in ([src.target] + list(src.reads())) if a.tensor == dep.array), None)
    element = f"{dep.array}[{', '.join(str(e.evaluate(env)) for e in acc.indices)}]" if acc and acc.indices \
        else dep.array
    first, second = _VERB[dep.kind]
    sizes = ", ".join(f"{k}={v}" for k, v in params.items()) or "any sizes"
    where = ""
    if src.location is not None:
        where = f" (line {src.location.line}" + (f", line {snk.location.line})" if snk.location and
                                                  snk.location.line != src.location.line else ")")
    return (f"{dep.kind} dependence {dep.source} -> {dep.sink} on {dep.array}{where}: "
            f"{_instance(src, src_c)} {first} {element}, which {_instance(snk, snk_c)} then {second} "
            f"(with {sizes})")


def _pairs_where(schedule: Schedule, dep: Dependence, time_relation: isl.Map) -> isl.Map:
    """Pairs of `dep` whose schedule times are related by `time_relation` ([t] -> [t'])."""
    s_src = schedule.statement_map(dep.source)
    s_snk = schedule.statement_map(dep.sink)
    through = s_src.apply_range(time_relation).apply_range(s_snk.reverse())
    return dep.relation.intersect(through)


def _n_dims(schedule: Schedule) -> int:
    return len(schedule.dims)


def _time_space(schedule: Schedule) -> isl.Space:
    name, text = schedule.maps[0]
    return isl.Map(text).get_space().range()


def _first_constant_difference(schedule: Schedule, dep: Dependence, before: int) -> Optional[int]:
    """Sign of the first dimension below `before` where the two statements of `dep` sit at different
    constants, provided every dimension before it is the same constant for both; 0 when there is
    none.  Any instance of one then runs before (sign < 0) or after every instance of the other,
    which decides a pair without asking isl."""
    fixed = schedule.fixed_positions
    src, snk = fixed[dep.source], fixed[dep.sink]
    for k in range(before):
        a, b = src[k], snk[k]
        if a is None or b is None:
            return 0
        if a != b:
            return -1 if a < b else 1
    return 0


def violations(schedule: Schedule, deps: Iterable[Dependence]) -> List[Tuple[Dependence, isl.Map]]:
    """Dependences that `schedule` does not keep strictly positive, with their violating pairs."""
    out = []
    if not schedule.maps:
        return out  # a kernel without statements has nothing to order
    space = _time_space(schedule)
    not_after = isl.Map.lex_ge(space)  # t >= t': the sink does not run strictly after the source
    for dep in deps:
        if _first_constant_difference(schedule, dep, _n_dims(schedule)) < 0:
            continue  # every source instance runs before every sink instance
        bad = _pairs_where(schedule, dep, not_after).intersect_params(schedule.model.context)
        if not bad.is_empty():
            out.append((dep, bad))
    return out


def check_legal(schedule: Schedule, deps: Dependences, what: str) -> None:
    """Raise IllegalScheduleError if `schedule` reverses (or makes simultaneous) any dependence."""
    with isl_budget(f"checking that {what} is legal"):
        bad = violations(schedule, deps)
    if bad:
        dep, pairs = bad[0]
        more = f" ({len(bad) - 1} more dependence(s) broken too)" if len(bad) > 1 else ""
        raise IllegalScheduleError(
            f"{what} is illegal: it breaks the {describe_pair(schedule, dep, pairs)}; the new schedule "
            f"runs the second instance before (or together with) the first{more}.", dependence=dep)


def carried_at(schedule: Schedule, deps: Iterable[Dependence], level: int) -> List[Tuple[Dependence, isl.Map]]:
    """Dependences carried by schedule dimension `level`, with the carrying pairs."""
    n = _n_dims(schedule)
    ts = [f"t{k}" for k in range(n)]
    us = [f"u{k}" for k in range(n)]
    eq = [f"t{k} = u{k}" for k in range(level)]
    cond = " and ".join(eq + [f"t{level} != u{level}"])
    rel = isl.Map(f"{{ [{', '.join(ts)}] -> [{', '.join(us)}] : {cond} }}")
    out = []
    for dep in deps:
        if _first_constant_difference(schedule, dep, level) != 0:
            continue  # the two statements differ at a constant outside the loop: never carried
        params = dep.relation.get_space()
        r = rel.align_params(params)
        pairs = _pairs_where(schedule, dep, r).intersect_params(schedule.model.context)
        if not pairs.is_empty():
            out.append((dep, pairs))
    return out


def check_parallel(schedule: Schedule, deps: Dependences, loop: str, what: str,
                   ignore: Optional[callable] = None) -> None:
    """Raise IllegalScheduleError if loop `loop` carries a dependence (optionally ignoring some)."""
    level = schedule.dim_index(loop)
    with isl_budget(f"checking that {what} is legal"):
        carried = [(d, p) for d, p in carried_at(schedule, deps, level) if not (ignore and ignore(d))]
    if carried:
        dep, pairs = carried[0]
        raise IllegalScheduleError(
            f"{what} is illegal: loop {loop!r} carries the {describe_pair(schedule, dep, pairs)}; "
            f"these two instances are in different iterations of {loop!r}, so running its iterations "
            f"at the same time would race.", dependence=dep)
