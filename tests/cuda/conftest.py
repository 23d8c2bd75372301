"""Shared helpers of the CUDA tests: the kernel library, small inputs, result comparison."""
from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np
import pytest

import polyc as pc
from polyc.codegen.typing import resolve_typing
from polyc.runtime.cuda import find_nvcc


def small_sizes(lk) -> Dict[str, int]:
    return lk.sizes.get("small") or lk.sizes.get("MINI") or next(iter(lk.sizes.values()))


def library_inputs(lk, dtype: str, seed: int = 0) -> Dict[str, Any]:
    return lk.make_inputs(small_sizes(lk), dtype, np.random.default_rng(seed))


def copies(inputs: Dict[str, Any]) -> Dict[str, Any]:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}


def assert_matches(got: Any, expected: Any, tol: Tuple[float, float], what: str = "") -> None:
    rtol, atol = tol
    if isinstance(expected, dict):
        assert isinstance(got, dict), f"{what}: expected several outputs, got {type(got).__name__}"
        for k, v in expected.items():
            np.testing.assert_allclose(got[k], v, rtol=rtol, atol=atol, err_msg=f"{what}: output {k}")
    elif isinstance(expected, (tuple, list)):
        for n, (g, e) in enumerate(zip(got, expected)):
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"{what}: output {n}")
    else:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=what)


def typing_for(lk, dtype: str):
    d = pc.f32 if dtype == "f32" else pc.f64
    program = lk.kernel.program
    passed = {t.name: d for t in program.tensors if t.role in ("input", "inout")}
    return resolve_typing(program, passed, default=d)


needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc (CUDA toolkit) is not installed here")


def driver_available() -> bool:
    try:
        import pycuda.driver as drv  # noqa: F401
        drv.init()
        return drv.Device.count() > 0
    except Exception:  # noqa: BLE001 - ImportError (no libcuda) or a driver error
        return False
