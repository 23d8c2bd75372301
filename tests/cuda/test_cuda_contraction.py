"""The shared-memory/register-tiled contraction kernel: recognition and exact results (emulated)."""
from __future__ import annotations

import numpy as np
import pytest

import kernels
import polyc as pc
from polyc.codegen.cuda import generate_cuda
from polyc.schedule.auto_gpu import auto_gpu_schedule

from .conftest import needs_nvcc, typing_for


def _tiled(gen):
    return [k for k in gen.launch.kernels if k.private]


@pytest.mark.parametrize("name", ["matmul", "batched_matmul"])
def test_library_contractions_use_the_tiled_kernel(name):
    lk = kernels.by_name(name)
    gen = generate_cuda(auto_gpu_schedule(lk.kernel.schedule()), typing_for(lk, "f32"))
    assert len(_tiled(gen)) == 1 and len(gen.launch.kernels) == 1   # the `= 0` init is fused
    assert "__syncthreads();" in gen.source and "__shared__" in gen.source


def test_non_contractions_keep_the_plain_mapping():
    lk = kernels.by_name("matvec")
    assert not _tiled(generate_cuda(auto_gpu_schedule(lk.kernel.schedule()), typing_for(lk, "f32")))


@pytest.mark.parametrize("sizes", [dict(I=130, K=35, J=260), dict(I=1, K=1, J=1), dict(I=3, K=200, J=129)])
def test_tiled_matmul_is_exact_across_partial_tiles(sizes):
    """Each C element sums its k terms in source order, so the result equals a serial loop's
    bit for bit (compared with the C target, which runs the loops as written, compiled without
    fused multiply-adds: the emulator rounds the product and the sum separately)."""
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_tiles")
    rng = np.random.default_rng(0)
    a = rng.random((sizes["I"], sizes["K"]), dtype=np.float32)
    b = rng.random((sizes["K"], sizes["J"]), dtype=np.float32)
    emu = pc.compile(mm, target="cuda-emu")(A=a, B=b)
    serial = pc.compile(mm, openmp=False, flags=["-O3", "-ffp-contract=off"])(A=a, B=b)
    np.testing.assert_array_equal(emu, serial)


def test_accumulating_contraction_starts_from_old_values():
    k = pc.kernel("C[i, j] += alpha * A[i, k] * B[k, j]", name="gemm_acc")
    rng = np.random.default_rng(1)
    a, b = rng.random((70, 20)), rng.random((20, 140))
    c = rng.random((70, 140))
    f = pc.compile(k, target="cuda-emu")
    got = f(A=a, B=b, C=c.copy(), alpha=0.5)
    assert any(kk.private for kk in f.generated.launch.kernels)
    np.testing.assert_allclose(got, c + 0.5 * a @ b, rtol=1e-12)


@needs_nvcc
def test_tiled_kernel_compiles_for_f64():
    from polyc.runtime.cuda import compile_cuda_check
    lk = kernels.by_name("batched_matmul")
    compile_cuda_check(generate_cuda(auto_gpu_schedule(lk.kernel.schedule()), typing_for(lk, "f64")).source, "sm_90")
