"""A direct numpy interpretation of a kernel: the oracle compiled code is checked against.

Operators mean what numpy's ufuncs mean (README "Types"): `max`/`min` are `np.maximum`/
`np.minimum` (NaN propagates), `fmax`/`fmin` are `np.fmax`/`np.fmin`, `%` and `//` are `np.mod` and
`np.floor_divide` (floor semantics; an integer divisor 0 gives 0), and the identity of `max=!`
on an integer tensor is that type's minimum.  An integer literal that does not fit the type it takes
raises `LiteralRangeError`, as compiling the kernel does.

Affine-Python kernels run their own Python source (on copies of nothing: in place, as written).
Einstein kernels run statement by statement in source order; each statement is evaluated for all
points of its domain at once with numpy (points enumerated from isl's bounds for the concrete
sizes), reductions accumulate with `ufunc.at`.  A statement that reads other elements of the
tensor it writes (a recurrence) runs point by point in lexicographic order instead.  The
interpreter shares no code with the code generator, so a bug in one is not hidden by the other.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import islpy as isl
import numpy as np

from ..codegen.typing import BOOL, is_integer, literal_type
from ..ir import (Access, Affine, Binary, Call, Cast, Const, DType, Expr, IndexExpr, ScalarRef, Select, Statement,
                  Unary, dtype_of_numpy)
from ..ir.literals import integer_literal_fits, literal_location, literal_range_error
from ..poly.islutil import isl_name

_NUMPY_FN = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs, "floor": np.floor,
             "ceil": np.ceil, "sin": np.sin, "cos": np.cos, "max": np.maximum, "min": np.minimum,
             "pymax": lambda a, b: np.where(b > a, b, a), "pymin": lambda a, b: np.where(b < a, b, a),
             "fmax": np.fmax, "fmin": np.fmin, "pow": np.power, "stop_gradient": lambda a: a}
_BIN = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "%": np.mod, "//": np.floor_divide,
        "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
        "!=": np.not_equal, "and": np.logical_and, "or": np.logical_or}
#: The numpy ufunc of each update operator (`T op= e`), for its `reduce`, `at` and plain calls.
UPDATE_UFUNCS = {"+": np.add, "*": np.multiply, "max": np.maximum, "min": np.minimum}


#: Points of one statement evaluated at once: the domain's bounding box is enumerated in chunks of
#: this many points (lexicographic order), so the oracle of a 1024^3 matmul needs megabytes, not the
#: 8 GB per iterator that one index grid over the whole box took.
POINTS_PER_CHUNK = 1 << 20


def _point_chunks(kernel, st: Statement, sizes: Mapping[str, int],
                  chunk: Optional[int] = None) -> Iterator[Dict[str, np.ndarray]]:
    """The points of `st`'s domain for concrete sizes, in lexicographic order, as successive chunks
    (one index array per iterator; at most `chunk` points of the bounding box per chunk).  A
    statement without iterators yields one empty dict when its domain is not empty."""
    chunk = POINTS_PER_CHUNK if chunk is None else chunk
    dom = kernel.model.domains[st.name]
    for p, v in sizes.items():
        k = dom.find_dim_by_name(isl.dim_type.param, isl_name(p))
        if k >= 0:
            dom = dom.fix_val(isl.dim_type.param, k, isl.Val(int(v)))
    if dom.is_empty():
        return
    if not st.iterators:
        yield {}
        return
    lows, shape = [], []
    for k in range(len(st.iterators)):
        lo = dom.dim_min(k).get_pieces()[0][1].get_constant_val().to_python()
        hi = dom.dim_max(k).get_pieces()[0][1].get_constant_val().to_python()
        lows.append(int(lo))
        shape.append(int(hi) - int(lo) + 1)
    total = math.prod(shape)
    for first in range(0, total, chunk):
        flat = np.arange(first, min(total, first + chunk), dtype=np.int64)
        env = {i: ix + lo for i, ix, lo in zip(st.iterators, np.unravel_index(flat, shape), lows)}
        env.update({p: np.int64(v) for p, v in sizes.items()})
        keep = np.zeros(len(flat), dtype=bool)
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
        if keep.any():
            yield {i: env[i][keep] for i in st.iterators}


class _Evaluator:
    def __init__(self, arrays, scalars, sizes, typing):
        self.arrays, self.scalars, self.sizes, self.typing = arrays, scalars, sizes, typing
        self.statement: Optional[Statement] = None
        #: How many guards (a select, the right of `and`/`or`) enclose the expression evaluated.
        self.guarded = 0

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Evaluate under a guard: numpy evaluates every operand, but where the guard fails the
        value is never used, and its reads may lie outside their tensor (clamped in `access`)."""
        self.guarded += 1
        try:
            yield
        finally:
            self.guarded -= 1

    def index(self, a: Affine, env) -> Any:
        return a.evaluate({**self.sizes, **env})

    def access(self, acc: Access, env):
        arr = self.arrays[acc.tensor]
        if not acc.indices:
            return arr[()]
        idx = tuple(self.index(e, env) for e in acc.indices)
        if self.guarded:
            # numpy evaluates both branches of a select; where the guard fails the element is
            # never used (and may lie outside the tensor, like A[i - 1] at i = 0): clamp it.
            idx = tuple(np.clip(i, 0, max(n - 1, 0)) for i, n in zip(idx, arr.shape))
        return arr[idx]

    def const(self, e: Const, hint: Optional[DType]):
        """A literal in the type it takes, as the generated code prints it (a weak float literal
        next to an integer is the kernel's float); an integer type's infinities are its limits
        (the identity of `max=!` and `min=!`); an integer literal that does not fit is refused."""
        if e.dtype is None and isinstance(e.value, float) and math.isfinite(e.value) and is_integer(hint):
            hint = self.typing.literal_float
        polyc_type = e.dtype or hint or self.typing.default_float
        dt = polyc_type.numpy
        value = e.value
        if dt.kind in "iu" and isinstance(value, float) and math.isinf(value):
            info = np.iinfo(dt)
            return dt.type(info.max if value > 0 else info.min)
        if not integer_literal_fits(value, polyc_type):
            loc = literal_location(self.statement, value) if self.statement is not None else None
            raise literal_range_error(value, polyc_type, loc)
        return dt.type(value)

    def expr(self, e: Expr, env, hint: Optional[DType]):
        """The values of `e` at the points `env`, computed in the types the generated code uses
        (`Typing`); `hint` is the type a literal or undeclared scalar adopts (the other operand's)."""
        if isinstance(e, Const):
            return self.const(e, hint)
        if isinstance(e, ScalarRef):
            return self.typing.scalars[e.name].numpy.type(self.scalars[e.name])
        if isinstance(e, IndexExpr):
            return np.int64(1) * self.index(e.value, env)
        if isinstance(e, Access):
            return self.access(e, env)
        if isinstance(e, Cast):
            inner = e.operand.operand if isinstance(e.operand, Unary) and e.operand.op == "-" else e.operand
            hint = literal_type(inner) if isinstance(inner, Const) and inner.dtype is None else None
            with np.errstate(all="ignore"):
                return np.asarray(self.expr(e.operand, env, hint)).astype(e.dtype.numpy)
        if isinstance(e, Unary):
            if e.op == "-" and isinstance(e.operand, Const) and not isinstance(e.operand.value, bool):
                return self.const(Const(-e.operand.value, e.operand.dtype), hint)   # `-2147483648` fits int32
            v = self.expr(e.operand, env, hint)
            if e.op == "not":
                return np.logical_not(v)
            return np.negative(np.asarray(v).astype(np.int64) if np.asarray(v).dtype == bool else v)  # C: -(!x)
        if isinstance(e, Binary) and e.op in ("and", "or"):
            # numpy evaluates both operands; the right one only matters where the left one lets
            # it (short-circuit), where its reads may lie outside (clamped, as under a select).
            a = self.expr(e.lhs, env, None)
            with self.guard():
                return _BIN[e.op](a, self.expr(e.rhs, env, None))
        if isinstance(e, Binary):
            # Operands in the type the generated code combines them in (`Typing.operation_type`), not
            # numpy's promotion: float32 + int32 is float32 in a kernel (README "Types"), float64 in numpy.
            common = self.typing.operation_type(e, hint)
            a, b = (_typed(self.expr(x, env, common), common) for x in (e.lhs, e.rhs))
            with np.errstate(all="ignore"):
                return _BIN[e.op](a, b)
        if isinstance(e, Select):
            rt = self.typing.type_of(e, hint)
            with self.guard():
                return np.where(self.expr(e.cond, env, None), _typed(self.expr(e.if_true, env, rt), rt),
                                _typed(self.expr(e.if_false, env, rt), rt))
        if isinstance(e, Call):
            rt = self.typing.type_of(e, hint) or hint or literal_type(*e.args)
            args = [self.expr(a, env, rt) for a in e.args]
            if e.fn == "pow" and rt != BOOL and not rt.is_float:
                return _int_power(*(_typed(a, rt) for a in args))
            if e.fn in ("floor", "ceil") and is_integer(self.typing.type_of(e.args[0], rt)):
                return args[0]          # an integer already, as the generated code keeps it
            with np.errstate(all="ignore"):
                return _typed(_NUMPY_FN[e.fn](*(_typed(a, rt) for a in args)), rt)
        raise TypeError(e)

    def run(self, st: Statement, env) -> None:
        self.statement = st
        target = self.arrays[st.target.tensor]
        dtype = target.dtype
        raw = np.asarray(self.expr(st.value, env, dtype_of_numpy(dtype)))
        wide = self.update_type(st, dtype)
        if wide is not None:
            self.update_in(wide, st, target, raw, env)
            return
        value = raw.astype(dtype)
        idx = tuple(self.index(e, env) for e in st.target.indices)
        n = len(next(iter(env.values()))) if env else 1
        if not idx:
            if st.update is None:
                target[()] = value.reshape(-1)[-1] if value.size else target[()]
            else:
                target[()] = UPDATE_UFUNCS[st.update].reduce(np.concatenate([[target[()]], np.broadcast_to(value, (n,))]))
            return
        idx = tuple(np.broadcast_to(i, (n,)) for i in idx)
        value = np.broadcast_to(value, (n,))
        if st.update is None:
            target[idx] = value
        else:
            UPDATE_UFUNCS[st.update].at(target, idx, value)

    def update_type(self, st: Statement, dtype: np.dtype) -> Optional[np.dtype]:
        """The type `T op= e` computes in when it is not T's own, else None (README "Types").

        A `+=`/`*=` (`+=!`, `*=!`) update adds or multiplies in the promoted type of T and e and
        converts the result to T's type, each step: numpy's `np.add(T, e, out=T, casting="unsafe")`
        and C's compound assignment, so an int64 T += 0.5 gives trunc(T + 0.5), not T + trunc(0.5).
        `max`/`min` need no widening: for finite in-range values max(T, trunc(e)) == trunc(max(T, e)).
        """
        if st.update not in ("+", "*"):
            return None
        own = dtype_of_numpy(np.dtype(dtype))
        vt = self.typing.type_of(st.value, own)
        if own is None or vt is None or vt.name == "bool":
            return None
        wide = self.typing.promote(own, vt).numpy
        return None if wide == np.dtype(dtype) else wide

    def update_in(self, wide: np.dtype, st: Statement, target: np.ndarray, raw: np.ndarray, env) -> None:
        """Apply the update of `st` point by point in lexicographic order, combining in `wide` and
        converting after every step (a reduction into an integer rounds at each step, as the C does)."""
        n = len(next(iter(env.values()))) if env else 1
        value = np.broadcast_to(raw.astype(wide), (n,))
        idx = [np.broadcast_to(self.index(e, env), (n,)) for e in st.target.indices]
        ufunc = UPDATE_UFUNCS[st.update]
        with np.errstate(all="ignore"):
            for k in range(n):
                at = tuple(int(i[k]) for i in idx)
                target[at] = ufunc(target[at].astype(wide), value[k]).astype(target.dtype)


def _typed(value: Any, t: Optional[DType]) -> Any:
    """`value` converted to `t` (a condition or an unknown type leaves it as it is)."""
    if t is None or t == BOOL:
        return value
    return np.asarray(value).astype(t.numpy, copy=False)


def _int_power(base: np.ndarray, exp: np.ndarray) -> np.ndarray:
    """numpy's integer power (wrapping); a negative exponent, which numpy refuses, gives the exact
    power truncated toward zero (0 unless the base is 1 or -1), as the compiled `pc_ipow_<t>`."""
    negative = exp < 0
    with np.errstate(all="ignore"):
        out = np.power(base, np.where(negative, 0, exp).astype(exp.dtype))
    if np.any(negative):
        odd = (exp % 2) != 0
        sign = np.where((base == -1) & odd, -1, 1).astype(base.dtype)
        out = np.where(negative, np.where((base == 1) | (base == -1), sign, 0).astype(base.dtype), out)
    return out


def _nests(statements: Sequence[Statement]) -> List[List[Statement]]:
    """Consecutive statements grouped by the outermost loop they share (`order[0]`): an Einstein
    kernel's statements are nests of their own, run one after the other; a loop kernel's (or its
    gradient's) may interleave inside one nest."""
    out: List[List[Statement]] = []
    for st in statements:
        if out and st.iterators and out[-1][-1].iterators and out[-1][-1].order[0] == st.order[0]:
            out[-1].append(st)
        else:
            out.append([st])
    return out


def _interleaved_runs(kernel, nest: Sequence[Statement], sizes: Mapping[str, int]
                      ) -> Iterator[Tuple[Statement, Dict[str, np.ndarray]]]:
    """The instances of the statements of one nest in source order (`PolyModel.statement_schedule`:
    order constants between the iterators, a descending loop's iterator negated), as runs of
    consecutive instances of one statement: a time loop around two statements runs them in turn
    at every step, not one after the other over all steps."""
    depth = max(len(st.order) for st in nest) * 2
    points: List[Dict[str, np.ndarray]] = []
    times, owner, position = [], [], []
    for k, st in enumerate(nest):
        chunks = list(_point_chunks(kernel, st, sizes))
        pts = {i: np.concatenate([c[i] for c in chunks]) for i in st.iterators} if chunks else {}
        n = len(pts[st.iterators[0]]) if pts else 0
        time = np.zeros((n, depth), dtype=np.int64)
        for d, c in enumerate(st.order):
            time[:, 2 * d] = c
            if d < len(st.iterators):
                it = st.iterators[d]
                time[:, 2 * d + 1] = -pts[it] if it in st.descending else pts[it]
        points.append(pts)
        times.append(time)
        owner.append(np.full(n, k))
        position.append(np.arange(n))
    time = np.concatenate(times)
    order = np.lexsort(time.T[::-1])
    who, where = np.concatenate(owner)[order], np.concatenate(position)[order]
    breaks = np.flatnonzero(np.diff(who)) + 1
    for run_who, run_where in zip(np.split(who, breaks), np.split(where, breaks)):
        if len(run_who):
            st = nest[int(run_who[0])]
            yield st, {i: a[run_where] for i, a in points[int(run_who[0])].items()}


def _is_recurrence(st: Statement) -> bool:
    return any(a.tensor == st.target.tensor and a != st.target for a in st.value.accesses())


def interpret(kernel, kwargs: Dict[str, Any]) -> Any:
    """Run `kernel` as written on `kwargs`; returns what the compiled kernel's call would return."""
    from ..codegen.typing import resolve_typing
    from ..runtime.arguments import bind_arguments, passed_dtypes
    from ..runtime.dlpack import mark_written

    program = kernel.program
    if kernel.function is not None:
        from ..frontend.reference import run_reference_frozen
        run_reference_frozen(kernel.function, program, kwargs, kernel.function_globals)
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
    for nest in _nests(program.statements):
        runs = _interleaved_runs(kernel, nest, bound.sizes) if len(nest) > 1 else \
            ((nest[0], pts) for pts in _point_chunks(kernel, nest[0], bound.sizes))
        for st, pts in runs:
            with np.errstate(all="ignore"):     # NaN, inf and division by zero are values, as in C
                if _is_recurrence(st) and st.iterators:
                    for k in range(len(pts[st.iterators[0]])):
                        ev.run(st, {i: pts[i][k:k + 1] for i in st.iterators})
                else:
                    ev.run(st, pts)
    mark_written(kwargs, bound.outputs)
    outs = {name: arrays[name] for name in bound.outputs}
    return next(iter(outs.values())) if len(outs) == 1 else outs
