"""Shared machinery of the PolyBench kernels: the `pc` handle, running a kernel as written, and
building `LibraryKernel` entries.

Each PolyBench kernel is written once as a plain affine-Python function.  `polybench_kernel`
turns it into a library entry whose `kernel` is `pc.kernel(fn)` and whose `reference` runs the very
same function in the Python interpreter (`run_as_written`), so the oracle and the compiled kernel
can never drift apart.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
import types
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import numpy as np

from kernels import LibraryKernel

try:  # the public package, once it re-exports the API
    import polyc as pc

    pc.f64  # noqa: B018 - probe for the re-exported element types
except (ImportError, AttributeError):
    # `polyc/__init__.py` does not (yet) re-export the API.  The annotations `pc.f64[...]` only need
    # the element type, so a stand-in namespace keeps the modules importable; kernels stay plain
    # functions until `pc.kernel` exists.
    from polyc.ir import types as _ir_types

    pc = types.SimpleNamespace(f64=_ir_types.f64, f32=_ir_types.f32, i32=_ir_types.i32, u8=_ir_types.u8)

#: The five PolyBench dataset presets, in increasing size.
PRESETS = ("MINI", "SMALL", "MEDIUM", "LARGE", "EXTRALARGE")

#: Default comparison tolerance (rtol, atol) of the PolyBench kernels.  All inputs are scaled to
#: O(1)..O(N) and well-conditioned, so a compiled kernel that only reorders floating-point
#: operations (tiling, vectorised reductions) stays far inside it.  Integer kernels are exact.
DEFAULT_TOL = {"f64": (1e-9, 1e-9), "i32": (0.0, 0.0)}

#: numpy element types by polyc dtype name, for the types PolyBench's kernels declare.
NUMPY_TYPES = {"f64": np.float64, "f32": np.float32, "i32": np.int32, "u8": np.uint8}


def presets(names: str, *rows: Tuple[int, ...]) -> Dict[str, Dict[str, int]]:
    """`presets("NI NJ", (20, 25), ...)`: the five PolyBench presets as {preset: {symbol: value}}."""
    keys = names.split()
    assert len(rows) == len(PRESETS), "one row per PolyBench preset"
    out = {}
    for preset, row in zip(PRESETS, rows):
        assert len(row) == len(keys)
        out[preset] = dict(zip(keys, (int(v) for v in row)))
    return out


def fill(shape: Tuple[int, ...], formula: Callable[..., Any], dtype: str = "f64") -> np.ndarray:
    """A C-contiguous array of `dtype` (default float64) whose element at index (i, j, ...) is
    `formula(i, j, ...)`.

    The formula receives integer index grids (numpy int64), so `%` and `*` are exact integer
    operations as in PolyBench's C init functions.
    """
    idx = np.indices(shape, dtype=np.int64)
    out = np.empty(shape, dtype=NUMPY_TYPES[dtype])
    out[...] = formula(*idx)  # a fresh, writable array even when the formula is a constant
    return out


def _size_bindings(fn: Callable, arrays: Mapping[str, Any]) -> Dict[str, int]:
    """Size symbols bound from the shapes of the arrays passed (every dimension must be a symbol
    or a constant, which holds for all PolyBench kernels)."""
    sizes: Dict[str, int] = {}
    for name, annot in fn.__annotations__.items():
        shape = getattr(annot, "shape", None)
        if shape is None or name not in arrays:
            continue
        arr = arrays[name]
        if np.ndim(arr) != len(shape):
            raise ValueError(f"{fn.__name__}: {name} has rank {np.ndim(arr)}, expected {len(shape)}")
        for dim, extent in zip(shape, np.shape(arr)):
            symbol = dim.as_single_var()
            if symbol is None:
                if dim.is_constant and dim.constant != extent:
                    raise ValueError(f"{fn.__name__}: {name} has extent {extent}, expected {dim}")
                continue
            if sizes.setdefault(symbol, extent) != extent:
                raise ValueError(f"{fn.__name__}: size {symbol} is both {sizes[symbol]} and {extent}")
    return sizes


def run_as_written(fn: Callable, **args: Any) -> Dict[str, Any]:
    """Execute the plain Python kernel `fn`, updating the arrays in `args` in place.

    Size symbols (the names in the shape annotations, e.g. `N`) are free variables of the loop
    bounds; they are bound from the arrays' shapes by re-creating the function over globals that
    hold them.  Returns `args`.
    """
    sizes = _size_bindings(fn, args)
    scope = dict(fn.__globals__)
    scope.update(sizes)
    bound = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    bound(**args)
    return args


def written_arrays(fn: Callable) -> Tuple[str, ...]:
    """Parameters the kernel assigns to (subscripted assignment targets), in parameter order."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            nodes = node.targets
        elif isinstance(node, ast.AugAssign):
            nodes = [node.target]
        else:
            continue
        for t in nodes:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                targets.add(t.value.id)
    params = list(inspect.signature(fn).parameters)
    return tuple(p for p in params if p in targets)


def _compile(fn: Callable) -> Any:
    """`pc.kernel(fn)` when the front end exists; the plain function until then."""
    make = getattr(pc, "kernel", None)
    return make(fn) if make is not None else fn


def polybench_kernel(
    name: str,
    fn: Callable,
    init: Callable[..., Dict[str, Any]],
    sizes: Dict[str, Dict[str, int]],
    tolerance: Optional[Dict[str, tuple]] = None,
    dtype: str = "f64",
) -> LibraryKernel:
    """A `LibraryKernel` for the PolyBench kernel `name` written as the plain function `fn`.

    `init(**preset)` returns every argument of `fn` (arrays, including the output arrays the kernel
    updates in place, and scalars) for one preset.  The reference runs `fn` as written and returns
    the arrays it writes: one array, or a dict name -> array when it writes several.

    `dtype` is the data type PolyBench/C declares for the kernel (`DATA_TYPE`: double for most,
    int for floyd-warshall and nussinov); it is the entry's only dtype, so benchmarks and tests
    time and check the kernel in PolyBench's own type.  `make_inputs(preset, dtype)` refuses any
    other type rather than converting silently.
    """
    outputs = written_arrays(fn)
    native = dtype
    assert set(sizes) == set(PRESETS), name
    params = set(inspect.signature(fn).parameters)

    def make_inputs(preset: Mapping[str, int], dtype: Optional[str] = None, rng: Any = None) -> Dict[str, Any]:
        # Deterministic: PolyBench initialises from index formulas, so `rng` is not used.
        if dtype is not None and dtype != native:
            raise ValueError(f"PolyBench kernel {name} is defined in {native} only, not {dtype}")
        inputs = init(**preset)
        assert set(inputs) == params, (name, sorted(set(inputs) ^ params))
        return inputs

    def reference(**inputs: Any) -> Any:
        result = run_as_written(fn, **inputs)
        if len(outputs) == 1:
            return result[outputs[0]]
        return {k: result[k] for k in outputs}

    entry = LibraryKernel(
        name=name,
        kernel=_compile(fn),
        make_inputs=make_inputs,
        sizes=sizes,
        reference=reference,
        dtypes=(native,),
        tolerance=dict(tolerance or DEFAULT_TOL),
        suite="polybench",
    )
    # Kept for tests and tools that want the loop nest itself, independent of polyc.
    entry.function = fn  # type: ignore[attr-defined]
    entry.outputs = outputs  # type: ignore[attr-defined]
    return entry
