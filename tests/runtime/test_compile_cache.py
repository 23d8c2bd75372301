"""compile_c, the on-disk cache and the ctypes loader, against the system C compiler."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import polyc as pc
from polyc.errors import CompileError
from polyc.ir import f32, i64
from polyc.runtime import KernelParam, KernelSignature, compile_c, load_function, load_library
from polyc.runtime import compiler as compiler_module

REPO_ROOT = Path(__file__).resolve().parents[2]

AXPY_SOURCE = textwrap.dedent("""\
    #include <stdint.h>
    void axpy(float *restrict y, float *restrict x, int64_t n, float a) {
        for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
    }
""")
AXPY_SIGNATURE = KernelSignature("axpy", (
    KernelParam("y", "array", f32), KernelParam("x", "array", f32),
    KernelParam("n", "size", i64), KernelParam("a", "scalar", f32),
))


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Each test compiles into its own cache directory, with default flags and compiler."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("POLYC_CACHE_DIR", str(cache))
    monkeypatch.delenv("POLYC_CC", raising=False)
    monkeypatch.delenv("POLYC_CFLAGS", raising=False)
    return cache


def test_compiled_function_runs_on_numpy_arrays(private_cache):
    lib = compile_c(AXPY_SOURCE)
    assert lib.parent == private_cache and lib.suffix == ".so"
    assert lib.with_suffix(".c").read_text() == AXPY_SOURCE
    axpy = load_function(lib, AXPY_SIGNATURE)
    y = np.ones(5, dtype=np.float32)
    x = np.arange(5, dtype=np.float32)
    axpy(y, x, 5, 2.0)
    np.testing.assert_array_equal(y, 1 + 2 * np.arange(5, dtype=np.float32))


def test_signature_prints_the_c_prototype():
    assert AXPY_SIGNATURE.c_prototype() == (
        "void axpy(float *restrict d_y, float *restrict d_x, int64_t n_n, float s_a)")
    with pytest.raises(ValueError, match="kind must be one of"):
        KernelParam("z", "pointer", f32)


def test_cache_hit_reuses_the_library_without_recompiling(compile_counter):
    first = compile_c(AXPY_SOURCE)
    mtime = first.stat().st_mtime_ns
    assert len(compile_counter) == 1
    assert compile_c(AXPY_SOURCE) == first          # in-process memo
    compiler_module._memo.clear()                     # as a fresh process would see it
    assert compile_c(AXPY_SOURCE) == first          # on-disk hit
    assert len(compile_counter) == 1
    assert first.stat().st_mtime_ns == mtime


def test_flags_compiler_options_and_openmp_change_the_key(compile_counter):
    default = compile_c(AXPY_SOURCE)
    assert compile_c(AXPY_SOURCE, openmp=False) != default
    assert compile_c(AXPY_SOURCE, flags=("-O1",)) != default
    assert len(compile_counter) == 3
    o1_command = compile_counter[-1]
    assert "-O1" in o1_command and "-O3" not in o1_command
    assert {"-fPIC", "-shared", "-fopenmp"} <= set(o1_command)


def test_cflags_environment_variable_overrides_optimisation_flags(monkeypatch, compile_counter):
    monkeypatch.setenv("POLYC_CFLAGS", "-O0 -g")
    compile_c(AXPY_SOURCE)
    assert compile_counter[0][1:3] == ["-O0", "-g"]
    assert "-shared" in compile_counter[0]


def test_compile_error_keeps_source_and_shows_compiler_message():
    source = "void broken(float *restrict y) { y[0] = undeclared_thing; }\n"
    with pytest.raises(CompileError) as info:
        compile_c(source)
    error = info.value
    assert error.source == source
    assert "undeclared_thing" in error.compiler_output
    message = str(error)
    assert "undeclared" in message and "undeclared_thing" in message
    kept = [line.split("source kept at: ")[1] for line in message.splitlines() if "source kept at: " in line]
    assert len(kept) == 1 and Path(kept[0]).read_text() == source
    assert "-shared" in error.command


def test_missing_compiler_is_a_compile_error(monkeypatch):
    with pytest.raises(CompileError, match="'no-such-cc-polyc' .*was not found"):
        compile_c(AXPY_SOURCE, compiler="no-such-cc-polyc")
    monkeypatch.setenv("POLYC_CC", "no-such-cc-polyc")
    with pytest.raises(CompileError, match=r"from \$POLYC_CC\) was not found"):
        compile_c(AXPY_SOURCE)


def test_long_compiler_output_is_trimmed_in_the_message():
    output = "\n".join([f"warning {i}" for i in range(100)] + ["x.c:1: error: boom"] + ["note"] * 100)
    trimmed = compiler_module.trim_output(output)
    assert "error: boom" in trimmed
    assert len(trimmed.splitlines()) <= compiler_module.MAX_MESSAGE_LINES + 1
    assert "more lines of compiler output" in trimmed


def test_loader_memoises_libraries_and_checks_symbols_and_arity():
    lib = compile_c(AXPY_SOURCE)
    assert load_library(lib) is load_library(lib)
    with pytest.raises(CompileError, match="has no function 'nope'"):
        load_function(lib, KernelSignature("nope", ()))
    axpy = load_function(lib, AXPY_SIGNATURE)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        axpy(np.zeros(1, np.float32))
    with pytest.raises(TypeError, match="argument x must be a numpy array"):
        axpy(np.zeros(1, np.float32), [1.0], 1, 1.0)


_RACE_SCRIPT = textwrap.dedent("""\
    import sys, time
    import numpy as np
    from polyc.ir import f32, i64
    from polyc.runtime import KernelParam, KernelSignature, compile_c, load_function
    start, source = float(sys.argv[1]), sys.argv[2]
    while time.time() < start:
        time.sleep(0.001)
    lib = compile_c(source)
    sig = KernelSignature("axpy", (KernelParam("y", "array", f32), KernelParam("x", "array", f32),
                                   KernelParam("n", "size", i64), KernelParam("a", "scalar", f32)))
    y = np.zeros(4, np.float32)
    load_function(lib, sig)(y, np.arange(4, dtype=np.float32), 4, 3.0)
    assert y.tolist() == [0.0, 3.0, 6.0, 9.0], y
    print(lib)
""")


def test_two_processes_compiling_the_same_kernel_both_succeed(private_cache):
    env = dict(os.environ, POLYC_CACHE_DIR=str(private_cache),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    # Both processes start compiling at the same instant, after their imports are done.
    start = str(time.time() + 2.0)
    procs = [subprocess.Popen([sys.executable, "-c", _RACE_SCRIPT, start, AXPY_SOURCE], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
    paths = {out.strip() for out, _ in results}
    assert len(paths) == 1
    assert sorted(f.suffix for f in private_cache.iterdir()) == [".c", ".sha256", ".so"]  # no temp files left


def test_native_flags_key_what_native_means_here():
    # `-march=native`'s text alone would let a shared cache serve this CPU's instructions to another
    from polyc.runtime.compiler import native_machine, resolve_compiler
    cc = resolve_compiler()
    native = native_machine(cc, ("-O3", "-march=native"))
    assert native.startswith(" native:") and native == native_machine(cc, ("-O2", "-march=native"))
    assert native != native_machine(cc, ("-O3", "-march=native", "-mno-avx2"))
    assert native_machine(cc, ("-O3", "-march=x86-64")) == ""


_FTZ = """
import numpy as np, polyc as pc
k = pc.kernel("B[i] = A[i] * 2.0", name="fast_scale")
f = pc.compile(k, flags=["-O2", "{flag}"])
assert (f(A=np.ones(4)) == 2.0).all()
print(np.array([1e-310]) * 1.0)
"""


@pytest.mark.parametrize("flag", ["-Ofast", "-ffast-math"])
def test_fast_math_flags_do_not_flush_subnormals_in_the_whole_process(flag, tmp_path):
    # gcc links crtfastmath.o with these flags; its constructor would set FTZ/DAZ for numpy too
    env = dict(os.environ, POLYC_CACHE_DIR=str(tmp_path), PYTHONPATH=str(Path(pc.__file__).parents[1]))
    out = subprocess.run([sys.executable, "-c", _FTZ.replace("{flag}", flag)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "1.e-310" in out.stdout, out.stdout
