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


def _launched(gen, sizes):
    """The kernels a call with `sizes` launches, in order (the host side run without a device)."""
    from polyc.codegen.cuda_ir import walk_host
    out = []
    walk_host(gen.launch, sizes, lambda kernel, grid, block, host: out.append(kernel))
    return out


@pytest.mark.parametrize("name", ["matmul", "batched_matmul"])
def test_library_contractions_use_the_tiled_kernel(name):
    lk = kernels.by_name(name)
    gen = generate_cuda(auto_gpu_schedule(lk.kernel.schedule()), typing_for(lk, "f32"))
    # one tiled kernel per tile shape (full, fewer rows, fewer columns); the `= 0` init is fused
    assert len(_tiled(gen)) == len(gen.launch.kernels) == 3
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


MIXED = [(pc.f32, pc.f64, np.full((33, 5), 3 + 2.0 ** -23), np.full((5, 17), 3 + 2.0 ** -23)),
         (pc.i64, pc.f64, np.full((33, 2), 0.5), np.full((2, 17), 4.0)),
         (pc.f32, pc.u8, np.full((33, 2), 255, np.uint8), np.full((2, 17), 255, np.uint8))]


@pytest.mark.parametrize("result, operands, a, b", MIXED, ids=["f32=f64*f64", "i64=f64*f64", "f32=u8*u8"])
def test_operands_are_staged_in_their_own_types(result, operands, a, b):
    """The tiles held every operand in the result's type: f64 operands rounded to f32 before the
    product, f64 ones truncated to int64 (0.5 * 4.0 became 0), u8 products cast from float."""
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", C=result["I", "J"], A=operands["I", "K"],
                  B=operands["K", "J"], name="mixed")
    src = pc.codegen(k, "auto", target="cuda")
    assert f"{operands.c_name} pc_As[" in src and f"{operands.c_name} pc_Bs[" in src
    want = k.reference(A=a, B=b)
    np.testing.assert_array_equal(pc.compile(k, target="cuda-emu")(A=a, B=b), want)
    np.testing.assert_array_equal(pc.compile(k)(A=a, B=b), want)
    from polyc.runtime.cuda import compile_cuda_check, find_nvcc
    if find_nvcc() is not None:
        compile_cuda_check(src)


LAYOUTS = {"A[i,k] B[k,j]": "C[i, j] +=! A[i, k] * B[k, j]",      # vectors along k (A) and j (B)
           "A[k,i] B[j,k]": "C[i, j] +=! A[k, i] * B[j, k]",      # vectors along i (A) and k (B)
           "batched": "C[b, i, j] +=! A[b, i, k] * B[b, k, j]"}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ik_kj", [(256, 48, 128), (256, 40, 128), (128, 130, 256)])
def test_whole_tiles_take_the_vector_path_and_stay_exact(layout, dtype, ik_kj):
    """Whole 128 x 128 tiles of C and whole K tiles run the 16-byte-load pipeline (K = 48); K = 40
    ends in a partial K tile and K = 130 leaves float32 rows misaligned for vectors, so those run
    the element-wise pipeline; either way each element equals the serial loop's bit for bit."""
    I, K, J = ik_kj
    k = pc.kernel(LAYOUTS[layout], name="mm_layout")
    rng = np.random.default_rng(I + K)
    shapes = {"A[i,k] B[k,j]": ((I, K), (K, J)), "A[k,i] B[j,k]": ((K, I), (J, K)),
              "batched": ((2, I, K), (2, K, J))}[layout]
    a, b = (rng.standard_normal(s).astype(dtype) for s in shapes)
    f = pc.compile(k, target="cuda-emu")
    got = f(A=a, B=b)
    assert "pc_vload" in f.generated.source and "pc_fast" in f.generated.source
    serial = pc.compile(k, openmp=False, flags=["-O3", "-ffp-contract=off"])(A=a, B=b)
    np.testing.assert_array_equal(got, serial)


def test_misaligned_operands_are_read_element_by_element():
    """A C-contiguous view that starts 4 bytes into its buffer cannot be read with 16-byte loads:
    the kernel checks the tile corner's alignment at run time (in emulation the result shows that
    the fallback reads the same elements)."""
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_views")
    rng = np.random.default_rng(3)
    a = np.empty(128 * 64 + 1, np.float32)[1:].reshape(128, 64)
    a[...] = rng.standard_normal((128, 64))
    b = rng.standard_normal((64, 128)).astype(np.float32)
    assert a.ctypes.data % 16 != 0 and a.flags.c_contiguous
    got = pc.compile(k, target="cuda-emu")(A=a, B=b)
    serial = pc.compile(k, openmp=False, flags=["-O3", "-ffp-contract=off"])(A=a, B=b)
    np.testing.assert_array_equal(got, serial)


@pytest.mark.parametrize("sizes", [dict(N=2, C=3, H=12, W=21, F=5, KH=3, KW=3),
                                   dict(N=1, C=7, H=9, W=140, F=130, KH=2, KW=4)])
def test_convolution_is_one_implicit_matrix_product(sizes):
    """conv2d's loops group into rows f, columns (n, h, w) and reduction (c, kh, kw): one launch of
    a tiled kernel (no host loop over the batch), its tile picked by the sizes, equal to the serial
    loops bit for bit across partial tiles of every dimension."""
    lk = kernels.by_name("conv2d")
    f = pc.compile(lk.kernel, target="cuda-emu")
    inputs = lk.make_inputs(sizes, "f32", np.random.default_rng(sizes["W"]))
    got = f(**inputs)
    gen = f.generated
    launched = _launched(gen, sizes)
    assert len(launched) == 1 and launched[0].private and "pc_kb" in gen.source
    # F = 5 fits the 64-row tile (128 threads), F = 130 needs the full one
    assert launched[0].block[0].value == (128 if sizes["F"] <= 64 else 256)
    serial = pc.compile(lk.kernel, openmp=False, flags=["-O3", "-ffp-contract=off"])(**inputs)
    np.testing.assert_array_equal(got, serial)


def test_grouped_operands_keep_their_own_layouts():
    """Rows of two loops on the A side and a transposed, shifted read on the B side."""
    k = pc.kernel("Y[a, b, p, q] +=! W[b, r, a] * X[q, r + p]", name="grouped")
    rng = np.random.default_rng(5)
    w = rng.standard_normal((6, 19, 5)).astype(np.float32)
    x = rng.standard_normal((130, 21)).astype(np.float32)
    f = pc.compile(k, target="cuda-emu")
    got = f(W=w, X=x)
    assert _tiled(f.generated)
    serial = pc.compile(k, openmp=False, flags=["-O3", "-ffp-contract=off"])(W=w, X=x)
    np.testing.assert_array_equal(got, serial)


@pytest.mark.parametrize("sizes,threads", [(dict(I=40, K=33, J=300), 128), (dict(I=300, K=33, J=50), 128),
                                           (dict(I=300, K=33, J=300), 256)])
def test_narrow_products_take_the_half_tiles(sizes, threads):
    """At most 64 rows (or columns): the half-height (half-width) tile of 128 threads, chosen on
    the host from the sizes; exact either way."""
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_narrow")
    rng = np.random.default_rng(7)
    a = rng.standard_normal((sizes["I"], sizes["K"])).astype(np.float32)
    b = rng.standard_normal((sizes["K"], sizes["J"])).astype(np.float32)
    f = pc.compile(mm, target="cuda-emu")
    got = f(A=a, B=b)
    launched = _launched(f.generated, sizes)
    assert len(launched) == 1 and launched[0].block[0].value == threads
    serial = pc.compile(mm, openmp=False, flags=["-O3", "-ffp-contract=off"])(A=a, B=b)
    np.testing.assert_array_equal(got, serial)
