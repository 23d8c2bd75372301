"""Bind the keyword arguments of a kernel call to the kernel's tensors, sizes and scalars.

`bind_arguments` is the single place where user data meets compiled code, so it checks everything
the C function silently relies on: element types (never cast), rank, shape consistency across
arrays, C-contiguous aligned memory, writability of outputs, no aliasing with written arrays, scalar
types.  Each violation raises `ArgumentError` naming the argument and saying what was expected and
what was given.  Size symbols are bound from array shapes (or from integer keywords like `N=5`).
"""
from __future__ import annotations

import difflib
import inspect
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Collection, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ..errors import ArgumentError
from ..ir import Affine, DType, Program, ScalarDecl, TensorDecl, dtype_of_numpy, DTYPES, f64
from ..ir.text import with_floors
from ..ir.magnitude import SAFE_MAGNITUDE
from ..codegen.signature import KernelSignature
from .aligned import aligned_empty
from .dlpack import contiguous_hint, host_view

Number = Union[int, float]

_WRITTEN_ROLES = ("output", "inout")
_INT_RANGES = {32: (-(2 ** 31), 2 ** 31 - 1), 64: (-(2 ** 63), 2 ** 63 - 1), 8: (0, 255), 16: (0, 65535)}


@dataclass(frozen=True)
class BoundCall:
    """A checked call: concrete sizes, the arrays (outputs allocated), scalars, what to return.

    - `sizes`: the value of every size symbol;
    - `arrays`: every non-temp tensor, by name (outputs not passed are freshly zero-filled);
    - `scalars`: every scalar parameter as a Python int or float;
    - `outputs`: names of the tensors the call returns (roles output and inout, program order).
    """

    program: Program
    sizes: Dict[str, int]
    arrays: Dict[str, np.ndarray]
    scalars: Dict[str, Number]
    outputs: Tuple[str, ...]
    _temps: Dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def c_args(self, signature: KernelSignature,
               scratch: Optional[Dict[Tuple[str, Tuple[int, ...], str], np.ndarray]] = None) -> Tuple[Any, ...]:
        """The C function's arguments in signature order: numpy arrays, int sizes, scalar numbers.

        A temp tensor the signature asks for is allocated here (uninitialised scratch memory), or
        taken from `scratch` (name, extents, dtype -> array) when an earlier call left one of that
        shape there; `scratch` is then left holding this call's temps.  Intermediates are written
        before they are read (checked when the kernel is defined), so reused memory is never seen.
        """
        args: List[Any] = []
        for p in signature.params:
            if p.kind == "array":
                array = self.arrays.get(p.name)
                if array is None:
                    array = self._temp(p.name, p.dtype, scratch)
                if array.dtype != p.dtype.numpy:
                    raise ArgumentError(f"{p.name} has dtype {array.dtype} but the kernel expects "
                                        f"{p.dtype.numpy}; convert it explicitly, e.g. "
                                        f"{p.name}.astype(np.{p.dtype.numpy_name})")
                args.append(array)
            elif p.kind == "size":
                args.append(self._lookup(self.sizes, p.name, "size"))
            else:
                args.append(self._lookup(self.scalars, p.name, "scalar"))
        return tuple(args)

    def results(self) -> Union[np.ndarray, Tuple[np.ndarray, ...], None]:
        """What a call returns: the single output array, a tuple of several, or None."""
        arrays = tuple(self.arrays[name] for name in self.outputs)
        if not arrays:
            return None
        return arrays[0] if len(arrays) == 1 else arrays

    def _temp(self, name: str, dtype: DType, scratch: Optional[Dict] = None) -> np.ndarray:
        if name not in self._temps:
            try:
                decl = self.program.tensor(name)
            except KeyError:
                raise ValueError(f"kernel signature names array {name!r}, which the program does not "
                                 f"declare (code generator and program disagree)") from None
            if decl.shape is None:
                raise ValueError(f"intermediate {name!r} has no inferred shape; cannot allocate it")
            # A temp's shape bounds the indices its statements use; below 0 at these sizes, the
            # loops that use it are empty (a local in `range(2, N - 2)` at N = 1): no cells.
            extents = tuple(max(0, e.evaluate(self.sizes)) for e in decl.shape)
            self._temps[name] = scratch_array(scratch, name, extents, dtype.numpy)
        return self._temps[name]

    @staticmethod
    def _lookup(table: Mapping[str, Any], name: str, what: str) -> Any:
        try:
            return table[name]
        except KeyError:
            raise ValueError(f"kernel signature names {what} {name!r}, which the program does not "
                             f"declare (code generator and program disagree)") from None


def scratch_array(scratch: Optional[Dict[Tuple[str, Tuple[int, ...], str], np.ndarray]], name: str,
                  extents: Tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Uninitialised memory for intermediate `name`: the buffer `scratch` holds for these extents
    and dtype (an earlier call's), else a new one, which `scratch` then holds instead of any
    other shape's (one buffer per intermediate)."""
    if scratch is None:
        return aligned_empty(extents, dtype)
    key = (name, extents, np.dtype(dtype).name)
    reused = scratch.get(key)
    if reused is not None:
        return reused
    for stale in [k for k in scratch if k[0] == name]:
        del scratch[stale]
    array = scratch[key] = aligned_empty(extents, dtype)
    return array


def bind_arguments(program: Program, kwargs: Mapping[str, Any], *,
                   dtypes: Optional[Mapping[str, DType]] = None,
                   fully_written: Collection[str] = ()) -> BoundCall:
    """Check a call's keyword arguments against `program` and bind them.

    `dtypes` supplies element types for tensors whose declared dtype is None (needed for outputs
    that are not passed; for passed arrays it is also checked).  Outputs that are not passed are
    allocated zero-filled, except those in `fully_written` (every element written by the kernel,
    `PolyModel.fully_written`): those are left uninitialised.  Raises `ArgumentError`.
    """
    dtypes = dict(dtypes or {})
    size_names = size_symbols(program)
    _check_keywords(program, kwargs, size_names)
    if program.defaults:   # a loop kernel's Python defaults, for the parameters a call leaves out
        kwargs = {**{k: v for k, v in program.defaults if k not in kwargs}, **kwargs}

    passed: Dict[str, np.ndarray] = {}
    for t in program.tensors:
        if t.role == "temp":
            continue
        value = kwargs.get(t.name)
        if value is None:
            if t.role in ("input", "inout"):
                raise ArgumentError(_missing_array_message(t, dtypes.get(t.name)))
            continue
        passed[t.name] = _check_array(t, value, t.dtype or dtypes.get(t.name))

    sizes, origins = _solve_sizes(program, passed, kwargs, size_names)
    _check_shapes(program, passed, sizes, origins)
    _check_assumptions(program, sizes, origins)
    _check_magnitude(program, sizes, origins)
    check_aliasing(program, passed)
    scalars = {s.name: _check_scalar(s, kwargs) for s in program.scalars}

    arrays: Dict[str, np.ndarray] = {}
    for t in program.tensors:
        if t.role == "temp":
            continue
        arrays[t.name] = passed[t.name] if t.name in passed else _allocate(t, dtypes, sizes, origins,
                                                                           zero=t.name not in fully_written)
    outputs = tuple(t.name for t in program.tensors if t.role in _WRITTEN_ROLES)
    return BoundCall(program, sizes, arrays, scalars, outputs)


def call_key(kwargs: Mapping[str, Any]) -> Optional[Tuple[Any, ...]]:
    """What `bind_arguments`' checks of a call depend on, apart from memory addresses: per plain
    numpy array its dtype, shape and layout flags, per Python number its type and value.  Two
    calls with the same key pass or fail the same checks (aliasing aside) and get the same sizes,
    so a checked call can be reused (`ready_call.ReadyCall`).  None for anything else (DLPack objects, array
    subclasses, numpy scalars): those calls always take the full checks."""
    parts = []
    for name, value in kwargs.items():
        kind = type(value)
        if kind is np.ndarray:
            flags = value.flags
            parts.append((name, value.dtype.str, value.shape, flags.c_contiguous, flags.aligned, flags.writeable))
        elif kind is float:     # by its bits: -0.0 == 0.0, but 1/-0.0 is not 1/0.0
            parts.append((name, kind, value.hex()))
        elif kind is int or kind is bool:
            parts.append((name, kind, value))
        else:
            return None
    return tuple(parts)


def passed_dtypes(program: Program, kwargs: Mapping[str, Any]) -> Dict[str, DType]:
    """Element types of the tensor arrays present in `kwargs` (for resolving undeclared dtypes).

    Applies the same "is it a usable numpy array" checks as `bind_arguments`.
    """
    _check_keywords(program, kwargs, size_symbols(program))    # a misspelt name, before "X is missing"
    found: Dict[str, DType] = {}
    for t in program.tensors:
        value = kwargs.get(t.name)
        if t.role == "temp" or value is None:
            continue
        value = host_view(t.name, value)
        _require_ndarray(t.name, value, t.dtype)
        found[t.name] = _supported_dtype(t.name, value)
    return found


def size_symbols(program: Program) -> Tuple[str, ...]:
    """`program.sizes` plus any other symbol a tensor shape mentions, in first-seen order."""
    names = list(program.sizes)
    for t in program.tensors:
        for entry in t.shape or ():
            for v in entry.variables:
                if v not in names:
                    names.append(v)
    return tuple(names)


# -- keywords ---------------------------------------------------------------------------------

def _check_keywords(program: Program, kwargs: Mapping[str, Any], size_names: Tuple[str, ...]) -> None:
    arrays = [t.name for t in program.tensors if t.role != "temp"]
    temps = {t.name for t in program.tensors if t.role == "temp"}
    scalars = [s.name for s in program.scalars]
    known = set(arrays) | set(scalars) | set(size_names)
    for key in kwargs:
        if key in known:
            continue
        if key in temps:
            raise ArgumentError(f"{key} is an intermediate computed inside kernel {program.name!r}; "
                                f"it cannot be passed as an argument")
        accepted = []
        if arrays:
            accepted.append(f"arrays {', '.join(arrays)}")
        if scalars:
            accepted.append(f"scalars {', '.join(scalars)}")
        if size_names:
            accepted.append(f"sizes {', '.join(size_names)}")
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ArgumentError(f"unknown argument {key!r} for kernel {program.name!r}{hint}; it takes "
                            f"{'; '.join(accepted) or 'no arguments'}")


# -- arrays -----------------------------------------------------------------------------------

def _describe(t: TensorDecl, dtype: Optional[DType]) -> str:
    shape = "" if t.shape is None else "[" + ", ".join(str(s) for s in t.shape) + "]"
    return f"{dtype.numpy_name if dtype else 'array'}{shape}"


def _missing_array_message(t: TensorDecl, resolved: Optional[DType]) -> str:
    what = _describe(t, t.dtype or resolved)
    if t.role == "inout":
        return (f"missing array {t.name} ({what}): the kernel reads and updates it in place, "
                f"so it must be passed")
    return f"missing input array {t.name} ({what})"


def _require_ndarray(name: str, value: Any, dtype: Optional[DType] = None) -> None:
    if isinstance(value, np.ndarray):
        if isinstance(value, np.ma.MaskedArray):
            raise ArgumentError(f"{name} is a masked array; polyc kernels ignore masks, so pass "
                                f"{name}.filled(...) or np.asarray({name}) explicitly")
        return
    if getattr(value, "__polyc_traced__", False):       # a compiled kernel called inside @pc.program
        raise value.refused_as_array(f"the compiled kernel's argument {name}")
    if hasattr(value, "__cuda_array_interface__"):
        raise ArgumentError(f"{name}: device array passed to a CPU kernel ({type(value).__name__}); "
                            f"copy it to host memory first (e.g. {name}.get() or cupy.asnumpy({name})) "
                            f"or compile the kernel with target='cuda'")
    raise ArgumentError(f"{name} must be a numpy array but got {type(value).__name__}; "
                        f"pass a numpy array, e.g. np.asarray({name}, dtype=np.{(dtype or f64).numpy_name})")


def arguments_by_name(kernel: Any, args: tuple, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """A call's arguments by name.  A loop kernel takes positional ones in its function's parameter
    order, as the function itself does (`scale(a, b, 2)`); an Einstein kernel's tensors have no
    order a reader could rely on, so positional arrays get the call spelled out instead."""
    if not args:
        return kwargs
    program: Program = kernel.program
    function = getattr(kernel, "function", None)
    if function is None:
        names = [t.name for t in program.tensors if t.role in ("input", "inout")] + \
            [s.name for s in program.scalars] + list(program.int_params)     # (outputs are optional)
        raise ArgumentError(f"{kernel.name} takes its arrays by name, not by position "
                            f"({len(args)} positional given): call it as f({', '.join(f'{n}=...' for n in names)})")
    order = list(inspect.signature(function).parameters)
    if len(args) > len(order):
        raise ArgumentError(f"{kernel.name} takes {len(order)} arguments ({', '.join(order)}) but "
                            f"{len(args)} were given")
    named = dict(zip(order, args))
    twice = sorted(set(named) & set(kwargs))
    if twice:
        raise ArgumentError(f"{kernel.name} got {twice[0]} both by position and by name")
    named.update(kwargs)
    return named


def _supported_dtype(name: str, array: np.ndarray) -> DType:
    dtype = dtype_of_numpy(array.dtype)
    if dtype is None:
        supported = ", ".join(d.numpy_name for d in DTYPES.values())
        raise ArgumentError(f"{name} has dtype {array.dtype}, which polyc kernels do not support "
                            f"(supported: {supported}); convert it explicitly with {name}.astype(...)")
    return dtype


def _check_array(t: TensorDecl, value: Any, expected: Optional[DType]) -> np.ndarray:
    name = t.name
    original, value = value, host_view(name, value)
    _require_ndarray(name, value, expected)
    array: np.ndarray = value
    if expected is None:
        _supported_dtype(name, array)
    elif array.dtype != expected.numpy:
        raise ArgumentError(f"{name} has dtype {array.dtype} but the kernel expects {expected.numpy}; "
                            f"convert it explicitly, e.g. {name}.astype(np.{expected.numpy_name}) "
                            f"(polyc never casts arrays silently)")
    if t.shape is not None and array.ndim != len(t.shape):
        raise ArgumentError(f"{name} must have {len(t.shape)} dimension(s) "
                            f"({_describe(t, expected)}) but has {array.ndim}: shape {array.shape}")
    if not array.flags.c_contiguous:
        raise ArgumentError(f"{name} is not C-contiguous (a transposed, strided or Fortran-order "
                            f"array); use {contiguous_hint(name, original)}")
    if not array.flags.aligned:
        raise ArgumentError(f"{name} is not aligned to its element size; copy it into fresh memory "
                            f"with {name}.copy() (np.ascontiguousarray keeps misaligned data as is)")
    if t.role in _WRITTEN_ROLES and not array.flags.writeable:
        raise ArgumentError(f"{name} is read-only but the kernel writes it (role {t.role}); "
                            f"pass a writable array, e.g. {name}.copy()")
    return array


def _allocate(t: TensorDecl, dtypes: Mapping[str, DType], sizes: Mapping[str, int],
              origins: Mapping[str, str], zero: bool = True) -> np.ndarray:
    dtype = t.dtype or dtypes.get(t.name)
    if dtype is None:
        raise ArgumentError(f"cannot allocate output {t.name}: its element type is not known from the "
                            f"arguments given; pass {t.name} explicitly")
    if t.shape is None:
        raise ArgumentError(f"cannot allocate output {t.name}: its shape is not known; pass "
                            f"{t.name} explicitly")
    # Zero-filled unless the kernel writes every element: an output need not be written everywhere
    # (e.g. stencil borders).
    extents = _extents(t, sizes, origins)
    return aligned_empty(extents, dtype.numpy, zero=zero)


def _extents(t: TensorDecl, sizes: Mapping[str, int], origins: Mapping[str, str]) -> Tuple[int, ...]:
    extents = []
    for d, entry in enumerate(t.shape or ()):
        value = entry.evaluate(sizes)
        if value < 0:
            raise ArgumentError(f"cannot allocate {t.name}: {t.name}.shape[{d}] = {entry} = {value} "
                                f"is negative ({_explain(entry, sizes, origins)})")
        extents.append(value)
    return tuple(extents)


# -- sizes and shapes ---------------------------------------------------------------------------

def _check_size_keyword(name: str, value: Any, any_sign: bool = False) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ArgumentError(f"size {name} must be an integer but got {type(value).__name__} {value!r}")
    if any_sign:  # an integer parameter (a shift, a stride), not an extent
        lo, hi = _INT_RANGES[64]
        if not lo <= int(value) <= hi:
            raise ArgumentError(f"{name} = {int(value)} does not fit in int64")
        return int(value)
    if int(value) < 0:
        raise ArgumentError(f"size {name} must be a non-negative integer but got {int(value)}")
    if int(value) > _INT_RANGES[64][1]:
        raise ArgumentError(f"size {name} = {_short_int(int(value))} does not fit in int64 (at most "
                            f"{_INT_RANGES[64][1]}), the type sizes have in generated code")
    return int(value)


def _solve_sizes(program: Program, passed: Mapping[str, np.ndarray], kwargs: Mapping[str, Any],
                 size_names: Tuple[str, ...]) -> Tuple[Dict[str, int], Dict[str, str]]:
    """Bind sizes from keywords, then bare-symbol dims (first array wins), then one-unknown dims."""
    sizes: Dict[str, int] = {}
    origins: Dict[str, str] = {}
    for name in size_names:
        if name in kwargs:
            sizes[name] = _check_size_keyword(name, kwargs[name], name in program.int_params)
            origins[name] = f"the argument {name}={sizes[name]}"
    shaped = [(t, passed[t.name]) for t in program.tensors if t.name in passed and t.shape is not None]
    for t, array in shaped:
        for d, entry in enumerate(t.shape):
            v = entry.as_single_var()
            if v is not None and v not in sizes:
                sizes[v], origins[v] = int(array.shape[d]), f"{t.name}.shape[{d}]"
    # A dim like `N - 2` or `H - KH + 1` with a single unbound symbol also determines that symbol.
    progress = True
    while progress:
        progress = False
        for name, num, d in program.derived_sizes:  # e.g. a strided output extent floor((H - K) / 2)
            if name not in sizes and all(v in sizes for v in num.variables):
                sizes[name], origins[name] = num.evaluate(sizes) // d, f"floor(({num}) / {d})"
                progress = True
        for t, array in shaped:
            for d, entry in enumerate(t.shape):
                unknown = [v for v in entry.variables if v not in sizes]
                if len(unknown) != 1:
                    continue
                u, coeff = unknown[0], entry.coeff(unknown[0])
                rest = entry.substitute({u: Affine.const(0)}).evaluate(sizes)
                actual = int(array.shape[d])
                value, remainder = divmod(actual - rest, coeff)
                if remainder or value < 0:
                    raise ArgumentError(f"{t.name}.shape[{d}] is {actual} but the kernel expects {entry}, "
                                        f"and no size {u} >= 0 gives that"
                                        + _context(entry, u, sizes, origins))
                sizes[u], origins[u] = value, f"{t.name}.shape[{d}] = {entry}"
                progress = True
    _largest_allowed(program, sizes, origins)
    missing = [n for n in size_names if n not in sizes]
    if missing:
        raise ArgumentError(_undetermined_message(program, missing))
    return sizes, origins


def _largest_allowed(program: Program, sizes: Dict[str, int], origins: Dict[str, str]) -> None:
    """A size no shape determines, but which the kernel's requirements bound from above (a range
    `where i in 0:N` over an undeclared input `a[i]` needs `a_dim0 >= N`), takes the largest value
    they allow: the kernel then covers its inputs."""
    for name in program.sizes:
        if name in sizes:
            continue
        caps = []
        for c in program.assumptions:
            k = c.expr.coeff(name)
            if c.kind == "ge" and k < 0 and all(v in sizes for v in c.expr.variables if v != name):
                caps.append((c.expr.substitute({name: Affine.const(0)}).evaluate(sizes) // -k, c))
        if caps:
            value, c = min(caps, key=lambda x: x[0])
            sizes[name], origins[name] = value, f"the largest value the requirement {c} allows"


def _context(entry: Affine, skip: str, sizes: Mapping[str, int], origins: Mapping[str, str]) -> str:
    known = [v for v in entry.variables if v != skip]
    return f" ({_explain_vars(known, sizes, origins)})" if known else ""


def _undetermined_message(program: Program, missing: List[str]) -> str:
    parts = []
    for name in missing:
        unpassed = [t.name for t in program.tensors
                    if t.role != "temp" and any(name in e.variables for e in t.shape or ())]
        where = (f"it appears only in the shape of {', '.join(unpassed)}, which was not passed"
                 if unpassed else "no array shape determines it")
        parts.append(f"size {name} cannot be determined from the arrays passed ({where})")
    example = ", ".join(f"{n}=..." for n in missing)
    return "; ".join(parts) + f"; pass it as an integer keyword, e.g. {example}"


def _explain_vars(names: List[str], sizes: Mapping[str, int], origins: Mapping[str, str]) -> str:
    """`N is 4 from A.shape[0], ...`; an internal floor size (`_floor0`) as the floor it is."""
    return ", ".join(f"{origins[v]} is {sizes[v]}" if v.startswith("_") and origins.get(v, "").startswith("floor(")
                     else f"{v} is {sizes[v]} from {origins.get(v, '?')}" for v in names)


def _explain(entry: Affine, sizes: Mapping[str, int], origins: Mapping[str, str]) -> str:
    return _explain_vars(list(entry.variables), sizes, origins)


def _check_shapes(program: Program, passed: Mapping[str, np.ndarray], sizes: Mapping[str, int],
                  origins: Mapping[str, str]) -> None:
    for t in program.tensors:
        if t.name not in passed or t.shape is None:
            continue
        array = passed[t.name]
        for d, entry in enumerate(t.shape):
            expected, actual = entry.evaluate(sizes), int(array.shape[d])
            if expected == actual:
                continue
            v = entry.as_single_var()
            if v is not None:
                raise ArgumentError(f"size {v} is {sizes[v]} from {origins[v]} but {t.name}.shape[{d}] "
                                    f"is {actual} ({t.name} has shape {array.shape})")
            if entry.is_constant:    # declared `pc.f64[3]`
                raise ArgumentError(f"{t.name}.shape[{d}] is {actual} but the kernel declares it {expected} "
                                    f"({t.name} has shape {array.shape})")
            raise ArgumentError(f"{t.name}.shape[{d}] is {actual} but the kernel expects {entry} = "
                                f"{expected} ({_explain(entry, sizes, origins)}; {t.name} has shape "
                                f"{array.shape})")


def _check_assumptions(program: Program, sizes: Mapping[str, int], origins: Mapping[str, str]) -> None:
    for c in program.assumptions:
        if any(v not in sizes for v in c.expr.variables):
            continue
        value = c.expr.evaluate(sizes)
        holds = value >= 0 if c.kind == "ge" else value == 0 if c.kind == "eq" else value % c.modulus == 0
        if not holds:
            raise ArgumentError(f"the sizes violate an assumption of kernel {program.name!r}: "
                                f"{with_floors(str(c), program.derived_sizes)} ({_explain(c.expr, sizes, origins)})")


def _check_magnitude(program: Program, sizes: Mapping[str, int], origins: Mapping[str, str]) -> None:
    """Refuse sizes and integer parameters so large that the kernel's int64 loop bounds or
    subscripts could overflow (`s + N` with `s = 2**63 - 2` wraps and the loop runs nowhere)."""
    if not sizes:
        return
    name = max(sizes, key=lambda v: abs(sizes[v]))
    if abs(sizes[name]) * program.index_scale >= SAFE_MAGNITUDE:
        raise ArgumentError(f"{name} = {sizes[name]} ({origins.get(name, 'given')}) is too large: kernel "
                            f"{program.name!r} computes loop bounds and subscripts up to {program.index_scale} "
                            f"times its sizes and integer parameters in 64-bit integers, so each must stay below "
                            f"{SAFE_MAGNITUDE // program.index_scale} in magnitude")


# -- aliasing ---------------------------------------------------------------------------------

def check_aliasing(program: Program, passed: Mapping[str, np.ndarray]) -> None:
    """Written arrays are `restrict` in C: they must not share memory with any other argument."""
    roles = {t.name: t.role for t in program.tensors}
    names = [t.name for t in program.tensors if t.name in passed]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            written = [n for n in (a, b) if roles[n] in _WRITTEN_ROLES]
            if not written:
                continue
            x, y = passed[a], passed[b]
            if x is y:
                how = "are the same array"
            elif np.shares_memory(x, y):
                how = "overlap in memory (one is a view of the other)"
            else:
                continue
            raise ArgumentError(f"{a} and {b} alias: they {how}, but the kernel writes "
                                f"{' and '.join(written)}; pass separate arrays, e.g. {b}={b}.copy()")


# -- scalars ----------------------------------------------------------------------------------

def _check_scalar(decl: ScalarDecl, kwargs: Mapping[str, Any]) -> Number:
    name, dtype = decl.name, decl.dtype
    if dtype is None:  # an undeclared Einstein scalar takes the kernel's float type
        dtype = f64
    if name not in kwargs:
        raise ArgumentError(f"missing scalar argument {name} ({dtype.numpy_name})")
    value = kwargs[name]
    kind = "a real number" if dtype.is_float else "an integer"
    if isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__"):
        raise ArgumentError(f"{name} is a scalar parameter ({dtype.numpy_name}) but got an array; "
                            f"pass a Python number, e.g. {name}={'1.0' if dtype.is_float else '1'}")
    if isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"{name} must be {kind} ({dtype.numpy_name}) but got bool {value!r}")
    if dtype.is_float:
        if not isinstance(value, numbers.Real):
            raise ArgumentError(f"{name} must be {kind} ({dtype.numpy_name}) but got "
                                f"{type(value).__name__} {value!r}")
        largest = float(np.finfo(dtype.numpy).max)
        try:
            number = float(value)
        except OverflowError:      # an int past float64's range (10**400): no silent inf
            raise ArgumentError(f"{name} = {_short_int(int(value))} does not fit in {dtype.numpy_name} "
                                f"(largest finite value {largest:.4g})") from None
        with np.errstate(over="ignore"):
            narrowed = float(dtype.numpy.type(number))
        if math.isinf(narrowed) and math.isfinite(number):    # 1e39 as a float32: no silent inf
            raise ArgumentError(f"{name} = {number!r} does not fit in {dtype.numpy_name} (largest finite value "
                                f"{largest:.4g}); pass inf itself if that is meant")
        return number
    if not isinstance(value, numbers.Integral):
        raise ArgumentError(f"{name} must be {kind} ({dtype.numpy_name}) but got "
                            f"{type(value).__name__} {value!r}; polyc does not convert silently")
    lo, hi = _INT_RANGES[dtype.bits]
    if not lo <= int(value) <= hi:
        raise ArgumentError(f"{name} = {_short_int(int(value))} does not fit in {dtype.numpy_name} "
                            f"(range {lo} to {hi})")
    return int(value)


def _short_int(v: int) -> str:
    """`v` for a message: digits when short, else its size (str() refuses past 4300 digits)."""
    return str(v) if v.bit_length() <= 128 else f"an integer of {v.bit_length()} bits"
