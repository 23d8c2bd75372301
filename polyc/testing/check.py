"""`check_kernel`: run a compiled kernel (any schedule) and its reference on the same random inputs.

Inputs are built from the kernel's own declarations: each non-temporary tensor gets an array of
the shape its `TensorDecl.shape` (affine in the size symbols) takes for the given sizes; scalars
get random values of their type; sizes that no array shape determines (e.g. a time-step count
`T` used only as a loop bound) are passed by keyword.  Outputs are passed zero-filled, so the
compiled kernel and the reference write into identical arrays.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional

import numpy as np

from ..ir import DType
from ..ir import types as _types

#: Default comparison tolerances (rtol, atol) by element type name.
TOLERANCES = {"f32": (2e-4, 1e-5), "f64": (1e-9, 1e-11), "i32": (0, 0), "i64": (0, 0)}

_WRITTEN = ("output", "inout")


def _dtype(name_or_dtype: Any) -> DType:
    if isinstance(name_or_dtype, DType):
        return name_or_dtype
    try:
        return getattr(_types, str(name_or_dtype))
    except AttributeError:
        raise ValueError(f"unknown dtype {name_or_dtype!r}; use 'f32', 'f64', 'i32' or 'i64'") from None


def default_sizes(kernel) -> Dict[str, int]:
    """Small, mutually different sizes (5, 6, 7, 5, ...) so that transposed indexing shows."""
    from ..runtime.arguments import size_symbols
    return {name: 5 + k % 3 for k, name in enumerate(size_symbols(kernel.program))}


def _np(d: DType) -> np.dtype:
    return d.numpy


def random_inputs(kernel, sizes: Optional[Mapping[str, int]] = None, dtype: Any = "f64",
                  seed: int = 0) -> Dict[str, Any]:
    """Keyword arguments for one call: arrays for every non-temp tensor (outputs zero-filled),
    scalar values, and sizes no input shape determines."""
    program = kernel.program
    sizes = dict(default_sizes(kernel) if sizes is None else sizes)
    rng = np.random.default_rng(seed)
    base = _dtype(dtype)
    out: Dict[str, Any] = {}
    shaped = set()
    for t in program.tensors:
        if t.role == "temp":
            continue
        shape = tuple(int(e.evaluate(sizes)) for e in (t.shape or ()))
        if any(n < 0 for n in shape):
            raise ValueError(f"sizes {sizes} give {t.name} the negative shape {shape}; choose other sizes")
        npd = _np(t.dtype or base)
        if t.role == "output":
            out[t.name] = np.zeros(shape, dtype=npd)
        elif npd.kind == "f":
            out[t.name] = rng.uniform(0.5, 1.5, size=shape).astype(npd)
        else:
            out[t.name] = rng.integers(0, 10, size=shape).astype(npd)
        if t.role != "output":
            for e in t.shape or ():
                shaped.update(e.variables)
    for s in program.scalars:
        d = s.dtype or base
        out[s.name] = float(rng.uniform(0.5, 1.5)) if _np(d).kind == "f" else int(rng.integers(1, 4))
    for name, value in sizes.items():
        if name not in shaped:
            out[name] = int(value)
    return out


def _copy(inputs: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}


def _written(kernel, result: Any, passed: Mapping[str, Any]) -> Dict[str, np.ndarray]:
    """Every written tensor's final value, from the call's result or the arrays passed in."""
    names = [t.name for t in kernel.program.tensors if t.role in _WRITTEN]
    got: Dict[str, Any] = {}
    if isinstance(result, dict):
        got.update(result)
    elif isinstance(result, np.ndarray) and len(names) == 1:
        got[names[0]] = result
    return {n: np.asarray(got[n] if n in got else passed[n]) for n in names if n in got or n in passed}


def _diff_message(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    if got.shape != want.shape:
        return f"{name}: shape {got.shape}, expected {want.shape}"
    bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    err = np.where(np.isnan(err), np.inf, err)
    worst = np.unravel_index(int(np.argmax(np.where(bad, err, -1))), got.shape) if got.ndim else ()
    return (f"{name}: {int(bad.sum())} of {bad.size} elements differ (rtol={rtol}, atol={atol}); worst at "
            f"{tuple(int(i) for i in worst)}: got {got[worst]!r}, expected {want[worst]!r}")


def check_kernel(kernel, schedule: Any = None, sizes: Optional[Mapping[str, int]] = None,
                 rtol: Optional[float] = None, atol: Optional[float] = None, dtype: Any = "f64",
                 seed: int = 0, inputs: Optional[Mapping[str, Any]] = None, *, target: str = "c",
                 reference: Optional[Callable[..., Any]] = None, compiled: Any = None,
                 flags: Optional[Any] = None) -> Dict[str, np.ndarray]:
    """Compile `kernel` with `schedule`, run it and the reference on the same inputs, and assert
    that every written tensor matches.  Returns the compiled kernel's written tensors.

    `inputs` replaces the random inputs; `reference` replaces `kernel.reference` (e.g. a library
    kernel's expected-output function); `compiled` reuses an already compiled kernel; `flags`
    replaces the C compiler's optimisation flags.
    """
    import polyc
    d = _dtype(dtype)
    default_rtol, default_atol = TOLERANCES.get(d.name, TOLERANCES["f64"])
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    args = dict(inputs) if inputs is not None else random_inputs(kernel, sizes, d, seed)
    if compiled is not None:
        fn = compiled
    else:
        fn = polyc.compile(kernel, schedule, target=target, **({"flags": flags} if flags is not None else {}))
    mine, theirs = _copy(args), _copy(args)
    got = _written(kernel, fn(**mine), mine)
    want = _written(kernel, (reference or kernel.reference)(**theirs), theirs)
    problems = []
    for name, w in want.items():
        if name not in got:
            problems.append(f"{name}: not returned by the compiled kernel")
            continue
        g = got[name]
        if g.shape != w.shape or not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            problems.append(_diff_message(name, g, w, rtol, atol))
    if problems:
        what = getattr(fn, "schedule", schedule)
        size_text = ", ".join(f"{k}={v}" for k, v in (sizes or default_sizes(kernel)).items()) \
            if inputs is None else "sizes of the given inputs"
        raise AssertionError(f"{kernel.name} with schedule {what!r} ({target}, {size_text}) does not match "
                             f"the reference:\n  " + "\n  ".join(problems))
    return got
