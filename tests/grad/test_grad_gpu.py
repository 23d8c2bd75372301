"""Gradient kernels on a real GPU (target "cuda"), checked by finite differences.  Skipped with a
reason where pycuda or a CUDA driver/GPU is missing (cuda-emu runs everywhere: test_grad_kernels)."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import by_name
from polyc.testing import check_grad


def _driver_available() -> bool:
    try:
        import pycuda.driver as drv
        drv.init()
        return drv.Device.count() > 0
    except Exception:  # noqa: BLE001 - ImportError (no libcuda) or a driver error
        return False


pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not _driver_available(),
                                 reason="needs pycuda with a CUDA driver and a GPU (pycuda.driver unavailable)")]


@pytest.mark.parametrize("name", ["matmul", "conv2d", "softmax", "layernorm"])
def test_gradient_kernels_on_the_gpu(name):
    lk = by_name(name)
    prog = lk.kernel.program
    of = next(t.name for t in prog.tensors if t.role == "output")
    wrt = [t.name for t in prog.tensors if t.role == "input"]
    check_grad(lk.kernel, of, wrt, lk.make_inputs(lk.sizes["small"], "f64", np.random.default_rng(0)),
               target="cuda")


def test_the_store_checkpoint_reverse_sweep_on_the_gpu():
    lk = by_name("jacobi-1d")
    rng = np.random.default_rng(5)
    check_grad(lk.kernel, "A", ["A"], dict(A=rng.random(40), B=rng.random(40), TSTEPS=4),
               checkpoint="store", target="cuda")
