"""On a real GPU (target "cuda"): library kernels match their references; device arrays work in
place.  Skipped with a reason where pycuda or a CUDA driver/GPU is missing."""
from __future__ import annotations

import numpy as np
import pytest

import kernels
import polyc as pc

from .conftest import assert_matches, copies, driver_available, library_inputs

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not driver_available(),
                                 reason="needs pycuda with a CUDA driver and a GPU (pycuda.driver unavailable)")]

SUBSET = ("matmul", "softmax", "layernorm", "conv2d", "gemm", "jacobi-2d", "lu", "atax")


@pytest.mark.parametrize("name", SUBSET)
def test_library_kernel_on_gpu(name):
    lk = kernels.by_name(name)
    f = pc.compile(lk.kernel, target="cuda")
    for dtype in lk.dtypes:
        inputs = library_inputs(lk, dtype)
        assert_matches(f(**copies(inputs)), lk.expected(inputs), lk.tol(dtype), f"{name} ({dtype}) on the GPU")


def test_device_arrays_are_used_in_place():
    import pycuda.autoprimaryctx  # noqa: F401 - device arrays made before any polyc call need a context
    from pycuda import gpuarray
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_gpu_inplace")
    rng = np.random.default_rng(0)
    a, b = rng.random((300, 70), dtype=np.float32), rng.random((70, 150), dtype=np.float32)
    A, B = gpuarray.to_gpu(a), gpuarray.to_gpu(b)
    C = gpuarray.zeros((300, 150), np.float32)
    f = pc.compile(mm, target="cuda")
    out = f(A=A, B=B, C=C)
    assert out is C
    np.testing.assert_allclose(C.get(), a @ b, rtol=1e-4)
    fresh = f(A=A, B=B)                      # outputs not passed stay on the device
    assert isinstance(fresh, gpuarray.GPUArray)
    np.testing.assert_allclose(fresh.get(), a @ b, rtol=1e-4)


def test_non_contiguous_device_array_is_refused():
    import pycuda.autoprimaryctx  # noqa: F401 - device arrays made before any polyc call need a context
    from pycuda import gpuarray
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_gpu_layout")
    A = gpuarray.to_gpu(np.ones((8, 6), np.float32))

    class Transposed:                        # a (6, 8) view of A's memory, column-major
        __cuda_array_interface__ = dict(A.__cuda_array_interface__, shape=(6, 8), strides=(4, 24))

    f = pc.compile(mm, target="cuda")
    with pytest.raises(pc.ArgumentError, match="C-contiguous"):
        f(A=Transposed(), B=gpuarray.to_gpu(np.ones((8, 4), np.float32)))
