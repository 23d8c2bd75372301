"""A proof that generated loops run every statement instance exactly once.

isl's AST generator is trusted to turn a schedule into loops, and it is right almost always, but
not always: for some strided, tiled and skewed schedules (isl 0.28) it takes a loop for one that
runs once and drops it, so some instances silently never run (found by polyc's kernel fuzzer:
`for i in range(0, N, 2)` under tile+skew+split+skew).  polyc promises no silent wrong code, so
the loop AST is read back into isl: every call of a statement becomes a relation from the
iteration vector of the loops around it (plus the call's position, so two calls never share a
point) to the statement instance it runs.  The loops are right iff that relation is injective
(no instance runs twice) and its range is exactly the iteration domain (none is missing, none is
extra) for every size the context allows.

Expressions the check cannot spell in isl (a `?:` select) make it inconclusive, reported as None:
the caller decides what an unverifiable AST means.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import islpy as isl

from ..poly.islutil import isl_name
from .loop_nodes import Block, Call, Guard, LExpr, Loop, Node


class _Unspellable(Exception):
    """An AST expression with no isl spelling (the check is inconclusive)."""


_COMPARE = {"==": "=", "<=": "<=", "<": "<", ">=": ">=", ">": ">"}


def _isl_text(e: LExpr, names: Dict[str, str]) -> str:
    if e.op == "int":
        return str(e.value)
    if e.op == "id":
        return names.get(str(e.value), str(e.value))
    a = [_isl_text(x, names) for x in e.args]
    if e.op == "neg":
        return f"(-({a[0]}))"
    if e.op in ("min", "max"):
        return f"{e.op}({a[0]}, {a[1]})"
    if e.op in ("floord", "/", "%", "*"):
        # isl's syntax wants a literal integer divisor, modulus or factor
        if e.op == "*" and e.args[0].op == "int":
            return f"({a[0]}*({a[1]}))"
        if e.args[1].op != "int":
            raise _Unspellable(e.op)
        if e.op == "*":
            return f"({a[1]}*({a[0]}))"
        return f"(({a[0]}) mod {a[1]})" if e.op == "%" else f"floor(({a[0]})/{a[1]})"
    if e.op in ("+", "-"):
        return f"(({a[0]}) {e.op} ({a[1]}))"
    if e.op in _COMPARE:
        return f"({a[0]}) {_COMPARE[e.op]} ({a[1]})"
    if e.op == "&&":
        return f"(({a[0]}) and ({a[1]}))"
    if e.op == "||":
        return f"(({a[0]}) or ({a[1]}))"
    raise _Unspellable(e.op)


def _calls(node: Node, loops: Tuple[Tuple[str, str], ...], conds: Tuple[str, ...],
           names: Dict[str, str], out: List[Tuple[str, Tuple[Tuple[str, str], ...], Tuple[str, ...], Tuple[str, ...]]]
           ) -> None:
    """Collect (statement, enclosing loop variables, constraints, call arguments) for every call."""
    if isinstance(node, Loop):
        var = f"pc_v{len(loops)}"
        inner = dict(names)
        inner[node.iterator] = var
        init = _isl_text(node.init, names)
        bound = [f"{var} >= {init}" if node.step > 0 else f"{var} <= {init}", _isl_text(node.cond, inner)]
        if abs(node.step) != 1:
            bound.append(f"({var} - ({init})) mod {abs(node.step)} = 0")
        _calls(node.body, loops + ((node.iterator, var),), conds + tuple(bound), inner, out)
    elif isinstance(node, Guard):
        cond = _isl_text(node.cond, names)
        _calls(node.then, loops, conds + (cond,), names, out)
        if node.orelse is not None:
            _calls(node.orelse, loops, conds + (f"not ({cond})",), names, out)
    elif isinstance(node, Block):
        for child in node.children:
            _calls(child, loops, conds, names, out)
    elif isinstance(node, Call):
        out.append((isl_name(node.statement), loops, conds, tuple(_isl_text(a, names) for a in node.args)))


def executed_instances(root: Node, params: str) -> Optional[isl.UnionMap]:
    """{ [call position, loop vector] -> statement instance } for the loops of `root`, or None when
    an expression has no isl spelling.  `params` is the `[N, M]` parameter list of the model."""
    found: list = []
    try:
        _calls(root, (), (), {}, found)
    except _Unspellable:
        return None
    depth = max((len(loops) for _, loops, _, _ in found), default=0)
    result: Optional[isl.UnionMap] = None
    for position, (statement, loops, conds, args) in enumerate(found):
        variables = [var for _, var in loops] + [f"pc_pad{k}" for k in range(len(loops), depth)]
        pads = [f"pc_pad{k} = 0" for k in range(len(loops), depth)]
        where = " and ".join(list(conds) + pads) or "true"
        text = (f"{params} -> {{ [{', '.join(['pc_call'] + variables)}] -> {statement}[{', '.join(args)}] : "
                f"pc_call = {position} and {where} }}")
        m = isl.UnionMap(text)
        result = m if result is None else result.union(m)
    return result


def loops_run_domain_once(root: Node, params: str, domain: isl.UnionSet, context: isl.Set) -> Optional[str]:
    """None if the loops of `root` run every instance of `domain` exactly once for every size in
    `context`; otherwise a sentence saying what goes wrong.  Raises `_Unspellable` never: an AST
    it cannot read is reported as the string "unverifiable"."""
    runs = executed_instances(root, params)
    if runs is None:
        return "unverifiable"
    runs = runs.intersect_params(context)
    wanted = domain.intersect_params(context)
    ran = runs.range()
    if not ran.is_subset(wanted):
        return f"the loops run instances outside the iteration domain: {ran.subtract(wanted).sample_point()}"
    if not wanted.is_subset(ran):
        return f"the loops never run some instances, e.g. {wanted.subtract(ran).sample_point()}"
    if not runs.is_injective():
        return "the loops run some instances more than once"
    return None
