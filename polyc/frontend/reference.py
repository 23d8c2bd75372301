"""Run an affine-Python kernel as written: the oracle every compiled schedule is checked against.

The kernel body names its sizes (`N`) without defining them; here they are bound from the arrays'
shapes and made visible to the body as globals of a fresh function object built from the kernel's
own code, so the kernel runs exactly as written, mutating the caller's arrays in place.
"""
from __future__ import annotations

import inspect
import math
import traceback
import types
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..errors import ArgumentError, ReferenceFailedError
from ..ir import Affine, Program


def with_derived_sizes(program: Program, sizes: Mapping[str, int]) -> Dict[str, int]:
    """`sizes` with the program's computed sizes (`floor(num / d)`: a strided extent) added where
    not given and their numerators are known, as a call computes them."""
    out = dict(sizes)
    for name, num, d in program.derived_sizes:
        if name not in out and all(v in out for v in num.variables):
            out[name] = num.evaluate(out) // d
    return out


def bind_sizes(program: Program, arrays: Dict[str, np.ndarray],
               given: Dict[str, int]) -> Dict[str, int]:
    """Size values from the arrays' shapes (and `int` arguments); ArgumentError on disagreement."""
    sizes: Dict[str, int] = {k: int(v) for k, v in given.items()}
    origin: Dict[str, str] = {k: f"the argument {k}={v}" for k, v in given.items()}
    pending: List[Tuple[str, int, Affine, int]] = []
    for t in program.tensors:
        if t.role == "temp" or t.name not in arrays or t.shape is None:
            continue
        for axis, (dim, actual) in enumerate(zip(t.shape, arrays[t.name].shape)):
            pending.append((t.name, axis, dim, int(actual)))
    # Solve dimensions with one unknown size until nothing changes, then check every dimension.
    changed = True
    while changed:
        changed = False
        for name, axis, dim, actual in pending:
            unknown = [v for v in dim.variables if v not in sizes]
            if len(unknown) != 1:
                continue
            var = unknown[0]
            coeff = dim.coeff(var)
            rest = Affine.from_dict({v: c for v, c in dim.terms if v != var}, dim.constant)
            residual = actual - rest.evaluate(sizes)
            if residual % coeff == 0 and residual // coeff >= 0:
                sizes[var] = residual // coeff
                origin[var] = f"{name}.shape[{axis}]"
                changed = True
    for name, axis, dim, actual in pending:
        missing = [v for v in dim.variables if v not in sizes]
        if len(missing) == 1 and dim.coeff(missing[0]) != 1:   # `2*H + 2` met by an odd extent
            raise ArgumentError(f"{name}.shape[{axis}] is {actual}, but {program.name} declares it as {dim}, "
                                f"which no size {missing[0]} >= 0 makes {actual}")
        if missing:
            raise ArgumentError(f"cannot determine size {missing[0]} from {name}.shape[{axis}]={actual} "
                                f"(declared {dim})")
        expected = dim.evaluate(sizes)
        if expected != actual:
            shape = tuple(arrays[name].shape)
            if dim.as_single_var() is not None:
                var = dim.as_single_var()
                raise ArgumentError(f"size {var} is {sizes[var]} from {origin[var]} but {name}.shape[{axis}] is "
                                    f"{actual} ({name} has shape {shape}): sizes of {program.name} disagree")
            why = ", ".join(f"{v} is {sizes[v]} from {origin[v]}" for v in dim.variables)
            raise ArgumentError(f"{name}.shape[{axis}] is {actual} but {program.name} expects {dim} = {expected}"
                                f"{f' ({why})' if why else ''}; {name} has shape {shape}")
    sizes = with_derived_sizes(program, sizes)   # `(N + 1) // 2` in a bound: computed, never passed
    for s in program.sizes:
        if s not in sizes:
            raise ArgumentError(f"size {s} of {program.name} is not determined by any array shape; "
                                f"pass it as {s}=<int>")
    return sizes


def check_arguments(program: Program, kwargs: Dict[str, object]) -> Tuple[Dict[str, np.ndarray], Dict[str, int]]:
    """Arrays and `int` arguments of a call, checked against the program's declarations."""
    params = [t for t in program.tensors if t.role != "temp"]
    known = {t.name for t in params} | set(program.sizes) | {s.name for s in program.scalars}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise ArgumentError(f"{program.name} has no parameter {', '.join(unknown)}")
    arrays: Dict[str, np.ndarray] = {}
    for t in params:
        if t.name not in kwargs:
            raise ArgumentError(f"missing array argument {t.name} of {program.name}")
        a = kwargs[t.name]
        if not isinstance(a, np.ndarray):
            raise ArgumentError(f"argument {t.name} must be a numpy array, got {type(a).__name__}")
        if t.shape is not None and a.ndim != len(t.shape):
            raise ArgumentError(f"array {t.name} must have {len(t.shape)} dimension(s), got shape {a.shape}")
        if t.dtype is not None and a.dtype != t.dtype.numpy:
            raise ArgumentError(f"array {t.name} must have dtype {t.dtype.numpy}, got {a.dtype}")
        arrays[t.name] = a
    given: Dict[str, int] = {}
    for s in program.sizes:
        if s in kwargs:
            v = kwargs[s]
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ArgumentError(f"size argument {s} must be an int, got {v!r}")
            if not 0 <= int(v) <= 2 ** 63 - 1:    # as the compiled kernel: sizes are int64
                shown = str(int(v)) if int(v).bit_length() <= 128 else f"an integer of {int(v).bit_length()} bits"
                raise ArgumentError(f"size argument {s} = {shown} does not fit in int64 as a non-negative size")
            given[s] = int(v)
    for sc in program.scalars:
        if sc.name not in kwargs:
            raise ArgumentError(f"missing scalar argument {sc.name} of {program.name}")
    return arrays, bind_sizes(program, arrays, given)


def run_reference(fn: Callable, program: Optional[Program] = None, **kwargs: object) -> None:
    """Execute the original kernel `fn` on numpy arrays, in place, with sizes bound from shapes.

    `program` is `fn`'s Program (built if None).  Arrays, `int` parameters and scalar values are
    passed by keyword.  Raises `ArgumentError` when shapes, dtypes or sizes disagree.  The
    function's module globals are read as they are now (see `run_reference_frozen`).
    """
    run_reference_frozen(fn, program, kwargs, None)


def run_reference_frozen(fn: Callable, program: Optional[Program], kwargs: Mapping[str, object],
                         frozen_globals: Optional[Mapping[str, object]]) -> None:
    """`run_reference` with `fn`'s module globals taken from `frozen_globals` (when given): the
    values the kernel was compiled with (`Kernel.function_globals`, read when it was defined), so
    that rebinding a global afterwards changes neither the compiled kernel nor its reference."""
    fn = inspect.unwrap(fn)
    if program is None:
        from .pyloops import program_from_function
        program = program_from_function(fn)
    kwargs = {**{k: v for k, v in program.defaults if k not in kwargs}, **kwargs}
    _, sizes = check_arguments(program, kwargs)
    env = _with_c_math({**(fn.__globals__ if frozen_globals is None else frozen_globals), **sizes})
    runnable = types.FunctionType(fn.__code__, env, fn.__name__, fn.__defaults__, fn.__closure__)
    runnable.__kwdefaults__ = fn.__kwdefaults__
    positional, keywords = [], {}
    for name, param in inspect.signature(fn).parameters.items():
        value = kwargs[name] if name in kwargs else sizes[name]
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append(value)
        else:
            keywords[name] = value
    try:
        runnable(*positional, **keywords)
    except (ArithmeticError, ValueError) as e:
        lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename == fn.__code__.co_filename
                 and f.name == fn.__name__]
        where = f"{fn.__code__.co_filename}:{lines[-1]}: " if lines else ""
        raise ReferenceFailedError(
            f"{where}the Python reference of {fn.__name__} stopped with {type(e).__name__}: {e}. Python refuses "
            f"this value where the compiled kernel computes C's (numpy's) answer, so the two cannot be compared "
            f"on these inputs") from e


#: The `math` functions a loop kernel may call, computed as the compiled kernel computes them:
#: numpy's (C's) values where Python's `math` raises (`sqrt(-1.0)` is nan, `exp(1000.0)` inf,
#: `floor(nan)` nan), so the reference gives the same answer instead of a ValueError.
_C_MATH = {"sqrt": np.sqrt, "exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
           "floor": np.floor, "ceil": np.ceil, "fabs": np.fabs, "pow": np.power}


def _quiet(f: Callable) -> Callable:
    def call(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return f(*(np.float64(a) if isinstance(a, (int, float)) and not isinstance(a, bool) else a
                       for a in args))
    return call


_C_MATH_QUIET = {name: _quiet(f) for name, f in _C_MATH.items()}
_C_MATH_QUIET["pow"] = _quiet(lambda a, b: np.power(np.float64(a), np.float64(b)))   # a float power, always


def _with_c_math(env: Dict[str, Any]) -> Dict[str, Any]:
    """`env` with Python's `math` module, and its functions imported by name (`from math import
    sqrt`), replaced by their numpy versions (`_C_MATH`)."""
    by_id = {id(getattr(math, name)): name for name in _C_MATH}
    out = dict(env)
    for key, value in env.items():
        if value is math:
            out[key] = types.SimpleNamespace(**{**vars(math), **_C_MATH_QUIET})
        elif id(value) in by_id and value is getattr(math, by_id[id(value)]):
            out[key] = _C_MATH_QUIET[by_id[id(value)]]
    return out
