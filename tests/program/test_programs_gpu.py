"""Operator programs and their gradients on a real GPU (target "cuda"), against the composition of
the operators' references.  Skipped with a reason where pycuda or a CUDA driver/GPU is missing
(the same programs run on cuda-emu everywhere: test_programs, test_grad_programs)."""
from __future__ import annotations

import numpy as np
import pytest

import kernels.programs as P
from polyc.testing import check_grad

from ..cuda.conftest import driver_available

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not driver_available(),
                                 reason="needs pycuda with a CUDA driver and a GPU (pycuda.driver unavailable)")]

SIZES = {"attention": dict(S=200, D=64), "mlp": dict(B=96, D=130, H=260),
         "ln_residual_gelu": dict(M=70, N=300), "conv_bn_relu": dict(N=2, C=5, H=20, W=33, F=7)}


@pytest.mark.parametrize("name", sorted(SIZES))
@pytest.mark.parametrize("contract", [False, True])
def test_programs_on_the_gpu(name, contract):
    prog = getattr(P, name)(target="cuda", contract=contract)
    arrays = P.inputs(prog, SIZES[name], seed=2)
    np.testing.assert_allclose(prog(**arrays), prog.reference(**arrays), rtol=2e-4, atol=2e-5)


def test_program_gradient_on_the_gpu():
    prog = P.mlp(target="cuda")
    check_grad(prog, of="out", wrt=["w1", "b1"], inputs=P.inputs(prog, dict(B=3, D=4, H=5)), target="cuda")


def test_device_arrays_stay_on_the_device():
    """Device inputs give device outputs, and every buffer of the plan is device memory: the
    groups' kernels read and write them in place."""
    from pycuda import gpuarray
    prog = P.attention(target="cuda")
    arrays = P.inputs(prog, SIZES["attention"], seed=3)
    out = prog(**{k: gpuarray.to_gpu(v) for k, v in arrays.items()})
    assert isinstance(out, gpuarray.GPUArray)
    np.testing.assert_allclose(out.get(), prog.reference(**arrays), rtol=2e-4, atol=2e-5)
