"""A direct numpy interpretation of a kernel: the oracle compiled code is checked against.

Affine-Python kernels run their own Python source (on copies of nothing: in place, as written).
Einstein kernels run statement by statement in source order; each statement is evaluated for all
points of its domain at once with numpy (points enumerated from isl's bounds for the concrete
sizes), reductions accumulate with `ufunc.at`.  A statement that reads other elements of the
tensor it writes (a recurrence) runs point by point in lexicographic order instead.  The
interpreter shares no code with the code generator, so a bug in one is not hidden by the other.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping

import islpy as isl
import numpy as np

from ..ir import (Access, Affine, Binary, Call, Cast, Const, Expr, IndexExpr, ScalarRef, Select, Statement,
                  Unary)
from ..poly.islutil import isl_name

_NUMPY_FN = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs, "floor": np.floor,
             "ceil": np.ceil, "sin": np.sin, "cos": np.cos, "max": np.maximum, "min": np.minimum,
             "pow": np.power}
_BIN = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "%": np.fmod,
        "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
        "!=": np.not_equal, "and": np.logical_and, "or": np.logical_or}
_UPDATE = {"+": np.add, "*": np.multiply, "max": np.maximum, "min": np.minimum}


def _points(kernel, st: Statement, sizes: Mapping[str, int]) -> Dict[str, np.ndarray]:
    """All points of `st`'s domain for concrete sizes, as one index array per iterator (lex order)."""
    dom = kernel.model.domains[st.name]
    for p, v in sizes.items():
        k = dom.find_dim_by_name(isl.dim_type.param, isl_name(p))
        if k >= 0:
            dom = dom.fix_val(isl.dim_type.param, k, isl.Val(int(v)))
    if not st.iterators:
        return {} if not dom.is_empty() else {"__empty__": np.zeros(0, dtype=np.int64)}
    if dom.is_empty():
        return {i: np.zeros(0, dtype=np.int64) for i in st.iterators}
    axes = []
    for k in range(len(st.iterators)):
        lo = dom.dim_min(k).get_pieces()[0][1].get_constant_val().to_python()
        hi = dom.dim_max(k).get_pieces()[0][1].get_constant_val().to_python()
        axes.append(np.arange(int(lo), int(hi) + 1, dtype=np.int64))
    grids = np.meshgrid(*axes, indexing="ij")
    env = {i: g.ravel() for i, g in zip(st.iterators, grids)}
    env.update({p: np.int64(v) for p, v in sizes.items()})
    keep = np.zeros(len(env[st.iterators[0]]), dtype=bool)
    for conj in st.domain:
        ok = np.ones_like(keep)
        for c in conj:
            val = c.expr.evaluate(env) + np.zeros_like(keep, dtype=np.int64)
            if c.kind == "ge":
                ok &= val >= 0
            elif c.kind == "eq":
                ok &= val == 0
            else:
                ok &= (val % c.modulus) == 0
        keep |= ok
    return {i: env[i][keep] for i in st.iterators}


class _Evaluator:
    def __init__(self, arrays, scalars, sizes, typing):
        self.arrays, self.scalars, self.sizes, self.typing = arrays, scalars, sizes, typing

    def index(self, a: Affine, env) -> Any:
        return a.evaluate({**self.sizes, **env})

    def access(self, acc: Access, env):
        arr = self.arrays[acc.tensor]
        if not acc.indices:
            return arr[()]
        return arr[tuple(self.index(e, env) for e in acc.indices)]

    def expr(self, e: Expr, env, dtype):
        if isinstance(e, Const):
            t = np.dtype(e.dtype.numpy if e.dtype else dtype)
            if t.kind in "iu" and isinstance(e.value, float) and np.isinf(e.value):
                # the identity of an integer max=!/min=! is the type's extreme value (as in the C)
                return t.type(np.iinfo(t).min if e.value < 0 else np.iinfo(t).max)
            return t.type(e.value)
        if isinstance(e, ScalarRef):
            return self.typing.scalars[e.name].numpy.type(self.scalars[e.name])
        if isinstance(e, IndexExpr):
            return np.int64(1) * self.index(e.value, env)
        if isinstance(e, Access):
            return self.access(e, env)
        if isinstance(e, Cast):
            return np.asarray(self.expr(e.operand, env, dtype)).astype(e.dtype.numpy)
        if isinstance(e, Unary):
            v = self.expr(e.operand, env, dtype)
            return np.logical_not(v) if e.op == "not" else np.negative(v)
        if isinstance(e, Binary):
            a, b = self.expr(e.lhs, env, dtype), self.expr(e.rhs, env, dtype)
            with np.errstate(all="ignore"):
                return _BIN[e.op](a, b)
        if isinstance(e, Select):
            return np.where(self.expr(e.cond, env, dtype), self.expr(e.if_true, env, dtype),
                            self.expr(e.if_false, env, dtype))
        if isinstance(e, Call):
            with np.errstate(all="ignore"):
                return _NUMPY_FN[e.fn](*(self.expr(a, env, dtype) for a in e.args))
        raise TypeError(e)

    def run(self, st: Statement, env) -> None:
        target = self.arrays[st.target.tensor]
        dtype = target.dtype
        value = np.asarray(self.expr(st.value, env, dtype)).astype(dtype)
        idx = tuple(self.index(e, env) for e in st.target.indices)
        n = len(next(iter(env.values()))) if env else 1
        if not idx:
            if st.update is None:
                target[()] = value.reshape(-1)[-1] if value.size else target[()]
            else:
                target[()] = _UPDATE[st.update].reduce(np.concatenate([[target[()]], np.broadcast_to(value, (n,))]))
            return
        idx = tuple(np.broadcast_to(i, (n,)) for i in idx)
        value = np.broadcast_to(value, (n,))
        if st.update is None:
            target[idx] = value
        else:
            _UPDATE[st.update].at(target, idx, value)


def _is_recurrence(st: Statement) -> bool:
    return any(a.tensor == st.target.tensor and a != st.target for a in st.value.accesses())


def interpret(kernel, kwargs: Dict[str, Any]) -> Any:
    """Run `kernel` as written on `kwargs`; returns what the compiled kernel's call would return."""
    from ..codegen.typing import resolve_typing
    from ..runtime.arguments import bind_arguments, passed_dtypes

    program = kernel.program
    if kernel.function is not None:
        from ..frontend.reference import run_reference
        run_reference(kernel.function, program, **kwargs)
        outs = {t.name: kwargs[t.name] for t in program.tensors if t.role in ("output", "inout") and t.name in kwargs}
        return next(iter(outs.values())) if len(outs) == 1 else outs
    typing = resolve_typing(program, passed_dtypes(program, kwargs))
    bound = bind_arguments(program, kwargs, dtypes=typing.tensors)
    arrays = dict(bound.arrays)
    for t in program.tensors:
        if t.name not in arrays:
            shape = tuple(e.evaluate(bound.sizes) for e in (t.shape or ()))
            arrays[t.name] = np.zeros(shape, dtype=typing.tensors[t.name].numpy)
    ev = _Evaluator(arrays, bound.scalars, bound.sizes, typing)
    for st in program.statements:
        pts = _points(kernel, st, bound.sizes)
        if "__empty__" in pts:
            continue
        if st.iterators and len(pts[st.iterators[0]]) == 0:
            continue
        if _is_recurrence(st) and st.iterators:
            for k in range(len(pts[st.iterators[0]])):
                ev.run(st, {i: pts[i][k:k + 1] for i in st.iterators})
        else:
            ev.run(st, pts)
    outs = {name: arrays[name] for name in bound.outputs}
    return next(iter(outs.values())) if len(outs) == 1 else outs
