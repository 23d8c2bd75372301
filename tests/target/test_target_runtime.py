"""The Target in the runtime: compiler command, cache key, CUDA limits and architecture."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import polyc as pc
from polyc.codegen.cuda import generate_cuda
from polyc.codegen.cuda_ir import GPUKernel, launch_dims
from polyc.codegen.loop_ast import LExpr
from polyc.codegen.typing import resolve_typing
from polyc.errors import TargetError
from polyc.ir import f32, f64
from polyc.runtime import cache, compile_c
from polyc.runtime.compiler import command_flags, resolve_compiler
from polyc.target import Target

SOURCE = textwrap.dedent("""\
    #include <stdint.h>
    void scale(float *restrict y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] *= 2.0f; }
""")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("POLYC_CC", raising=False)
    monkeypatch.delenv("POLYC_CFLAGS", raising=False)
    return tmp_path / "cache"


def test_the_target_is_part_of_the_cache_key(compile_counter):
    h = Target.host()
    other = h.with_(l2=h.l2 * 2)
    first = compile_c(SOURCE, target=h)
    assert compile_c(SOURCE, target=h) == first and len(compile_counter) == 1         # same target: a hit
    assert compile_c(SOURCE, target=other) != first and len(compile_counter) == 2     # same source and flags
    assert cache.cache_key("s", ("-O2",), "/cc", "v", h.fingerprint()) != \
        cache.cache_key("s", ("-O2",), "/cc", "v", other.fingerprint())


def test_compiler_flags_come_from_the_target(compile_counter):
    t = Target.host().with_(flags=("-O1",))
    compile_c(SOURCE, target=t)
    assert compile_counter[0][1] == "-O1" and "-O3" not in compile_counter[0] and "-fopenmp" in compile_counter[0]
    compile_c(SOURCE, flags=("-O2",), target=t)                 # an explicit flags argument wins
    assert compile_counter[1][1] == "-O2"


def test_openmp_and_vector_math_only_where_the_target_has_them():
    gcc = resolve_compiler("gcc")
    full = Target.host().with_(features=frozenset({"openmp", "libmvec:exp", "libmvec:sin"}))
    flags = command_flags(None, True, gcc, full)
    assert "-fopenmp" in flags and "-DPOLYC_VMATH_exp" in flags and "-DPOLYC_VMATH_sin" in flags
    assert "-DPOLYC_VMATH_log" not in flags
    bare = full.with_(features=frozenset())
    flags = command_flags(None, True, gcc, bare)
    assert "-fopenmp" not in flags and not any(f.startswith("-DPOLYC_VMATH") for f in flags)


def test_the_target_compiler_is_used(compile_counter, tmp_path):
    t = Target.host().with_(compiler="gcc")
    compile_c(SOURCE, target=t)
    assert compile_counter[0][0] == resolve_compiler("gcc")
    with pytest.raises(pc.CompileError, match="'no-such-cc-polyc'"):
        compile_c(SOURCE, target=t.with_(compiler="no-such-cc-polyc"))


def test_compiled_kernels_carry_their_target():
    k = pc.kernel("Y[i] = X[i] * 3.0", name="triple")
    t = Target.host().with_(flags=("-O2",), cores=1)
    f = pc.compile(k, target=t)
    x = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(f(X=x), x * 3)
    assert f.target == t and f.compile_flags[0] == "-O2" and "1 core" in repr(f)
    assert pc.compile(k).target == Target.host()
    emu = pc.compile(k, target="cuda-emu")
    assert emu.target.kind == "cuda-emu"
    np.testing.assert_array_equal(emu(X=x), x * 3)


def test_unsafe_flags_in_a_target_are_refused():
    with pytest.raises(TargetError) as e:
        Target.host().with_(flags=("-O2", "-o", "/tmp/x.so"))
    assert e.value.field == "flags"
    with pytest.raises(TargetError):
        pc.compile(pc.kernel("Y[i] = X[i]"), target="c flags=-save-temps")


MATMUL = "C[i, j] +=! A[i, k] * B[k, j]"


def _tiled_kernels(gen):
    return [k for k in gen.launch.kernels if k.private]


def test_the_contraction_kernel_is_used_only_where_it_fits_the_device():
    """The scheduler plans the tiled kernel only where it fits the Target (`auto_gpu_schedule`);
    the declared element type decides its shared memory (an undeclared one counts as 8 bytes)."""
    from polyc.schedule.auto_gpu import auto_gpu_schedule

    def tiled(kernel, target, dtype):
        typing = resolve_typing(kernel.program, {"A": dtype, "B": dtype, "C": dtype})
        return _tiled_kernels(generate_cuda(auto_gpu_schedule(kernel.schedule(), target), typing))

    mm32 = pc.kernel(MATMUL, name="mm", A=f32["M", "K"], B=f32["K", "N"])
    assert tiled(mm32, Target.cuda("sm_90"), f32)
    assert not tiled(mm32, Target.cuda("sm_90").with_(shared_memory_bytes=16 * 1024), f32)
    assert not tiled(mm32, Target.cuda("sm_90").with_(registers_per_block=16 * 1024), f32)
    # Doubles need twice the shared memory (33 KiB): they fit 48 KiB, not 32 KiB.
    mm64 = pc.kernel(MATMUL, name="mm", A=f64["M", "K"], B=f64["K", "N"])
    assert tiled(mm64, Target.cuda("sm_90"), f64)
    assert not tiled(mm64, Target.cuda("sm_90").with_(shared_memory_bytes=32 * 1024), f64)
    undeclared = pc.kernel(MATMUL, name="mm")
    assert not tiled(undeclared, Target.cuda("sm_90").with_(shared_memory_bytes=32 * 1024), f32)


def test_a_small_device_still_computes_the_right_thing():
    mm = pc.kernel(MATMUL, name="mm")
    small = Target.cuda_emu().with_(shared_memory_bytes=8 * 1024, max_threads_per_block=256)
    f = pc.compile(mm, target=small)
    rng = np.random.default_rng(1)
    a, b = rng.random((9, 5)), rng.random((5, 7))
    np.testing.assert_allclose(f(A=a, B=b), a @ b)
    assert not _tiled_kernels(f.generated)


def test_launches_respect_the_target_thread_limit():
    wide = LExpr("int", value=512)
    k = GPUKernel("k", None, (), (wide, None, None), (wide, LExpr("int", value=8), None))
    _, block = launch_dims(k, {})
    _, small = launch_dims(k, {}, 256)
    assert block[0] * block[1] <= 1024 and small[0] * small[1] <= 256 and small[0] * small[1] >= 128


def test_the_emulator_limits_its_launches_to_the_target(monkeypatch):
    """The emulator's backend walks launches with its Target's `max_threads_per_block`."""
    from polyc.codegen import cuda_ir as cuda_runtime
    seen = []
    real = cuda_runtime.walk_host

    def spy(program, sizes, launch, max_threads=None):
        seen.append(max_threads)
        return real(program, sizes, launch, max_threads)

    monkeypatch.setattr(cuda_runtime, "walk_host", spy)
    k = pc.kernel("Y[i, j] = X[i, j] + 1.0", name="add1")
    f = pc.compile(k, target=Target.cuda_emu().with_(max_threads_per_block=512))
    x = np.ones((40, 50))
    np.testing.assert_array_equal(f(X=x), x + 1)
    assert seen == [512]


def test_nvcc_gets_the_target_architecture(tmp_path, monkeypatch):
    """`compile_cuda_check` passes the Target's `cuda_arch` as nvcc's `-arch` (a stand-in nvcc
    records its command line, so no CUDA toolkit is needed)."""
    from polyc.runtime import cuda as cuda_runtime
    log = tmp_path / "args.txt"
    fake = tmp_path / "nvcc"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {log}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(cuda_runtime, "find_nvcc", lambda: str(fake))
    cuda_runtime.compile_cuda_check("__global__ void k() {}", Target.cuda("sm_80").with_(flags=("-O2",)))
    args = log.read_text().split()
    assert "-arch=sm_80" in args and "-O2" in args and "-O3" not in args
    cuda_runtime.compile_cuda_check("__global__ void k() {}", "sm_75")
    assert "-arch=sm_75" in log.read_text().split()
    with pytest.raises(TargetError):
        cuda_runtime.compile_cuda_check("__global__ void k() {}", "sm_75 -o /tmp/x")
