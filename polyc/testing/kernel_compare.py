"""NaN-aware comparison of a compiled kernel's outputs with the reference's, for the kernel fuzzer.

NaN positions must match exactly, and so must infinities (with their sign); finite values must
agree within `atol + rtol * |expected|`, where both scale with the machine epsilon of the least
precise float type the kernel touches and `atol` also with the magnitude the values can reach (a
reordered sum of terms of size B has an error of a few ulps of B, however small the sum itself
is).  Integers must be equal, and so must shapes and dtypes.
"""
from __future__ import annotations

from typing import Any, List, Mapping

import numpy as np

from .kernel_gen_common import GeneratedKernel

#: Multiples of epsilon: (rtol, atol) for Einstein kernels (static magnitude bounds) and for loop
#: kernels (magnitude taken from the data: recurrences make static bounds useless).
EINSUM_ULPS = (64, 256)
LOOP_ULPS = (256, 4096)


def tolerance_eps(kernel: GeneratedKernel) -> float:
    """Epsilon of the least precise float type in the kernel (f64 if it uses none)."""
    types = {d for _, d, _ in kernel.declared if d} | {d for _, d in kernel.scalars}
    return float(np.finfo(np.float32).eps) if "f32" in types else float(np.finfo(np.float64).eps)


def _scale(arrays: Mapping[str, Any], want: np.ndarray) -> float:
    vals = [1.0]
    for a in list(arrays.values()) + [want]:
        if isinstance(a, np.ndarray) and a.size and a.dtype.kind in "fi":
            f = np.abs(a[np.isfinite(a)]) if a.dtype.kind == "f" else np.abs(a)
            if f.size:
                vals.append(float(f.max()))
    return max(vals)


def compare_outputs(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], eps: float,
                    bounds: Mapping[str, float], inputs: Mapping[str, Any]) -> List[str]:
    """Problems found (empty when everything matches)."""
    problems: List[str] = []
    for name, w in want.items():
        if name not in got:
            problems.append(f"{name}: not returned by the compiled kernel")
            continue
        g = got[name]
        if g.shape != w.shape:
            problems.append(f"{name}: shape {g.shape}, expected {w.shape}")
            continue
        if g.dtype != w.dtype:
            problems.append(f"{name}: dtype {g.dtype}, expected {w.dtype}")
            continue
        if w.dtype.kind != "f":
            bad = g != w
        else:
            eps = max(eps, float(np.finfo(w.dtype).eps))     # an f32 result of f64 data
            if name in bounds:
                rtol, atol = EINSUM_ULPS[0] * eps, EINSUM_ULPS[1] * eps * max(1.0, bounds[name])
            else:
                rtol, atol = LOOP_ULPS[0] * eps, LOOP_ULPS[1] * eps * _scale(inputs, w)
            gn, wn = np.isnan(g), np.isnan(w)
            same_inf = (np.isinf(g) == np.isinf(w)) & (~np.isinf(w) | (g == w))
            fin = ~gn & ~wn & np.isfinite(g) & np.isfinite(w)
            close = np.ones(w.shape, dtype=bool)
            with np.errstate(all="ignore"):
                close[fin] = np.abs(g[fin].astype(np.float64) - w[fin].astype(np.float64)) <= \
                    atol + rtol * np.abs(w[fin].astype(np.float64))
            bad = (gn != wn) | ~same_inf | ~close
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0]) if w.ndim else ()
            problems.append(f"{name}: {int(bad.sum())} of {bad.size} elements differ; first at {where}: "
                            f"got {g[where]!r}, expected {w[where]!r}")
    return problems


def only_nan_lost(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray]) -> bool:
    """Whether every difference is a NaN the reference has where the compiled kernel has a number
    (the signature of NaN dropped by a max/min; used by triage)."""
    seen = False
    for name, w in want.items():
        g = got.get(name)
        if g is None or g.shape != w.shape or w.dtype.kind != "f" or g.dtype != w.dtype:
            if g is None or g.shape != w.shape or not np.array_equal(g, w):
                return False
            continue
        differ = ~((g == w) | (np.isnan(g) & np.isnan(w)))
        if differ.any():
            if not (np.isnan(w[differ]).all() and not np.isnan(g[differ]).any()):
                return False
            seen = True
    return seen
