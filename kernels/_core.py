"""Shared helpers of the core (Einstein-notation) kernel library: random inputs and shape-only
declarations.  Private (leading underscore), so `kernels.all_kernels()` does not scan it."""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Sequence

import numpy as np

import polyc as pc

NUMPY_DTYPES = {"f32": np.float32, "f64": np.float64}


def shape(*extents: str) -> pc.TensorType:
    """A tensor declaration that fixes the shape only, leaving the element type to the arrays passed.

    `pc.f32[...]` would tie the kernel to one dtype; the core kernels run in f32 and f64 alike, so
    where inference cannot name a size well (or cannot infer it at all, as for strided pooling) we
    declare the shape with an undeclared dtype, which polyc treats exactly like an undeclared tensor
    whose shape is known.
    """
    return pc.tensor[extents]


def uniform(rng: np.random.Generator, dims: Sequence[int], dtype: str, lo: float = -1.0,
            hi: float = 1.0) -> np.ndarray:
    """A C-contiguous array of `dtype` with entries uniform in [lo, hi)."""
    return rng.uniform(lo, hi, size=tuple(int(d) for d in dims)).astype(NUMPY_DTYPES[dtype])


def input_maker(spec: Mapping[str, Callable[[Mapping[str, int]], Sequence[int]]],
                scalars: Mapping[str, float] = None, lo: float = -1.0,
                hi: float = 1.0) -> Callable[..., Dict[str, Any]]:
    """`make_inputs(sizes, dtype, rng)` filling each array of `spec` (name -> sizes -> shape)."""
    fixed = dict(scalars or {})

    def make_inputs(sizes: Mapping[str, int], dtype: str = "f64", rng: np.random.Generator = None) -> Dict[str, Any]:
        rng = rng if rng is not None else np.random.default_rng(0)
        out: Dict[str, Any] = {name: uniform(rng, dims(sizes), dtype, lo, hi) for name, dims in spec.items()}
        out.update(fixed)
        return out

    return make_inputs
