"""Generated CUDA compiles with nvcc (sm_80, sm_90) and has the expected shape."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import kernels
import polyc as pc
from polyc.api import codegen
from polyc.codegen.cuda import generate_cuda
from polyc.schedule.auto_gpu import auto_gpu_schedule
from polyc.errors import CompileError
from polyc.runtime.cuda import compile_cuda_check

from .conftest import needs_nvcc, typing_for

LIBRARY = kernels.all_kernels()
#: A representative subset for the default run: contraction, reductions + intermediates,
#: host time loop (stencil), triangular/host-loop solver, 4-D conv (host batch loop).
REPRESENTATIVE = ("matmul", "softmax", "gemm", "jacobi-2d", "lu", "conv2d")
ARCHS = ("sm_80", "sm_90")


def _sources(names, dtypes=None):
    out = []
    for lk in LIBRARY:
        if names is not None and lk.name not in names:
            continue
        for dt in (dtypes or lk.dtypes):
            if dt in lk.dtypes:
                out.append((f"{lk.name}-{dt}", generate_cuda(auto_gpu_schedule(lk.kernel.schedule()), typing_for(lk, dt)).source))
    return out


def _check_all(items):
    def one(item):
        (label, src), arch = item
        try:
            compile_cuda_check(src, arch)
            return None
        except CompileError as e:
            return f"{label} for {arch}:\n{e}"
    jobs = [(s, a) for s in items for a in ARCHS]
    with ThreadPoolExecutor(4) as ex:
        errors = [e for e in ex.map(one, jobs) if e]
    assert not errors, "\n\n".join(errors)


@needs_nvcc
def test_representative_kernels_compile_with_nvcc():
    _check_all(_sources(REPRESENTATIVE, ("f32",)) + _sources(("gemm",), ("f64",)))


@needs_nvcc
@pytest.mark.slow
def test_every_library_kernel_compiles_with_nvcc():
    _check_all(_sources(None))


@needs_nvcc
def test_nvcc_rejection_is_a_compile_error_with_source():
    bad = 'extern "C" __global__ void k(float *x) { x[0] = undefined_name; }\n'
    with pytest.raises(CompileError) as info:
        compile_cuda_check(bad, "sm_90")
    assert "undefined_name" in str(info.value)
    assert info.value.source == bad


def test_codegen_cuda_text_without_gpu():
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul_text", A=pc.f32["I", "K"], B=pc.f32["K", "J"])
    src = codegen(mm, target="cuda")
    assert 'extern "C" __global__ void' in src
    assert "blockIdx" in src and "threadIdx" in src
    assert "[(" in src  # flattened row-major indexing, no VLAs


def test_sequential_nests_become_sequential_kernels_and_host_loops():
    lk = kernels.by_name("jacobi-2d")
    gen = generate_cuda(auto_gpu_schedule(lk.kernel.schedule()), typing_for(lk, "f64"))
    from polyc.codegen.cuda_ir import HostLoop
    assert isinstance(gen.launch.host, HostLoop) or "HostLoop" in repr(gen.launch.host)
    assert len(gen.launch.kernels) == 2
    assert all(k.host_iterators for k in gen.launch.kernels)


MATH_OF_INTEGERS = "\n".join(f"{fn}_[i] = {fn}(A[i])" for fn in
                             ("exp", "log", "sqrt", "tanh", "sin", "cos", "floor", "ceil", "abs")) + \
    "\nG[x] = exp(-x * x)"


@needs_nvcc
@pytest.mark.parametrize("dtype", [pc.i32, pc.i64, pc.u8])
def test_math_functions_of_integers_compile_with_nvcc(dtype):
    """CUDA's C++ `exp(int)` overloads are host functions: the generated code converts integer
    operands to the float type itself, and `floor`/`ceil` of an integer is the integer."""
    import numpy as np
    k = pc.kernel(MATH_OF_INTEGERS, A=dtype["N"], G=pc.f64["N"])
    compile_cuda_check(pc.codegen(k, "auto", target="cuda"))
    a = np.arange(1, 6).astype(dtype.numpy)
    got = pc.compile(k, target="cuda-emu")(A=a)
    np.testing.assert_allclose(got["sqrt_"], np.sqrt(a.astype(np.float64)))
    np.testing.assert_array_equal(got["floor_"], a)
    np.testing.assert_allclose(got["G"], np.exp(-np.arange(5.0) ** 2))


def test_a_thread_loop_starting_at_a_conditional_bound_adds_the_thread_to_the_whole_bound():
    """isl writes some loop starts as `c ? 0 : e`; `+ threadIdx.x` must add to all of it, not to
    `e` alone (every thread then started at 0 where `c` held: 512 sums of one element)."""
    @pc.kernel
    def spread_back(Yg: pc.f64["2*N"], Xg: pc.f64["N"]):
        for i in range(2 * N):
            for q in range(N):
                if 2 * q <= i and i <= 2 * q + 1:
                    Xg[q] += Yg[i]
    for target in ("c", "cuda-emu"):
        xg = np.zeros(4)
        pc.compile(spread_back, target=target)(Yg=np.arange(1.0, 9.0), Xg=xg)
        np.testing.assert_array_equal(xg, [3.0, 7.0, 11.0, 15.0])
    upsample = pc.kernel("Y[i] = X[i // 2]")
    grad = pc.grad(upsample, of="Y", wrt=["X"])
    np.testing.assert_array_equal(pc.compile(grad, target="cuda-emu")(Y_grad=np.ones(8)), [2.0] * 4)


def test_operand_parenthesizes_what_a_larger_expression_would_split():
    from polyc.codegen.loop_ast import operand
    assert operand("c ? 0 : e") == "(c ? 0 : e)"
    assert operand("a - b") == "(a - b)"
    assert operand("(a - b)") == "(a - b)"
    assert operand("(a) - (b)") == "((a) - (b))"
    assert operand("x_1") == "x_1"


@pytest.mark.parametrize("ctype", ["i32", "u8"])
def test_tiled_integer_products_of_floats_convert_every_step_as_numpy(ctype):
    """A GPU's float-to-int conversion saturates where numpy's (and x86's) wraps: the tiled
    contraction's register update converts through `pc_f2i_*` like every other path."""
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", C=getattr(pc, ctype)["I", "J"], A=pc.f32["I", "K"],
                  B=pc.f32["K", "J"])
    src = pc.codegen(k, "auto", target="cuda")
    assert f"pc_acc[pc_m][pc_n] = pc_f2i_{ctype}(pc_acc[pc_m][pc_n] + " in src
    assert "pc_acc[pc_m][pc_n] +=" not in src
    a = np.array([[3e9, 1.0], [300.0, 0.0], [-5.0, 0.0]], np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(pc.compile(k, "auto", target="cuda-emu")(A=a, B=np.ones((2, 1), np.float32)),
                                      k.reference(A=a, B=np.ones((2, 1), np.float32)))


@needs_nvcc
def test_tiled_integer_products_compile_with_nvcc():
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", C=pc.i32["I", "J"], A=pc.f32["I", "K"], B=pc.f32["K", "J"])
    compile_cuda_check(pc.codegen(k, "auto", target="cuda"), "sm_90")


def test_tiled_products_take_no_vector_path_over_an_empty_reduction():
    """K = 0 passed `K % 16 == 0`: the 16-byte fast path then loaded a tile of the empty operands."""
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]")
    src = pc.codegen(mm, "auto", target="cuda")
    assert "((n_K)) > 0 && ((n_K)) % 16 == 0" in src
    out = pc.compile(mm, "auto", target="cuda-emu")(A=np.zeros((64, 0), np.float32), B=np.zeros((0, 64), np.float32))
    np.testing.assert_array_equal(out, np.zeros((64, 64), np.float32))


def test_a_block_loop_running_several_rows_waits_for_its_tree_before_the_next_row():
    """A block runs several rows when the grid is smaller than the rows (a clamped grid): the next
    row's warps must not write the shared partials while warp 0 still reads this row's."""
    k = pc.kernel("O[i] +=! A[i, k]")
    src = pc.codegen(k, "auto", target="cuda")
    body = src[src.index("for (int64_t i_i = (int64_t)blockIdx.x"):]
    last_stage = body.rindex("__shfl_down_sync(0xffffffffu, pc_w, 1)")
    assert body[last_stage:].split("\n")[-4:] == ["    __syncthreads();", "  }", "}", ""]


def test_at_most_three_loops_map_to_blocks_or_threads():
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]")
    s = mm.schedule().tile(i=4, j=4)
    for mapping in ("map_to_blocks", "map_to_threads"):
        with pytest.raises(pc.ScheduleArgumentError, match="at most 3 fit"):
            getattr(s, mapping)("i_outer", "j_outer", "i_inner", "j_inner")
    with pytest.raises(pc.ScheduleArgumentError, match="already mapped to blocks"):
        s.map_to_blocks("i_outer").map_to_threads("i_outer")
