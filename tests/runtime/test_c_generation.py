"""Generated C: parallel loop bodies keep `restrict`, vector math, the compile dialect."""
from __future__ import annotations

import numpy as np

import polyc as pc
from polyc.runtime import vector_math
from polyc.runtime.compiler import command_flags, resolve_compiler

MATVEC = "y[i] +=! A[i, j] * x[j]"


def test_parallel_loops_run_their_bodies_in_restrict_helpers(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    mv = pc.kernel(MATVEC, name="mv_par")
    sched = mv.schedule().parallel("i")
    src = pc.codegen(mv, sched, dtypes={"A": pc.f64, "x": pc.f64})
    helper = src[src.index("static void polyc_mv_par_loop1("):]
    assert "double *restrict d_A" in helper.splitlines()[0]
    assert "#pragma omp parallel for schedule(static)" in src
    assert "polyc_mv_par_loop1(d_y, d_A, d_x, n_I, n_J, i_i);" in src
    rng = np.random.default_rng(0)
    a, x = rng.random((37, 29)), rng.random(29)
    np.testing.assert_allclose(pc.compile(mv, sched)(A=a, x=x), a @ x, rtol=1e-12)


def test_parallel_loops_inside_sequential_loops_receive_their_iterators():
    k = pc.kernel("B[t, i] = A[t, i] * 2.0", name="outer_seq")
    sched = k.schedule().parallel("i")
    src = pc.codegen(k, sched, dtypes={"A": pc.f64})
    assert "int64_t i_t, int64_t i_i)" in src          # the helper takes the enclosing t and its own i
    a = np.random.default_rng(1).random((5, 9))
    np.testing.assert_array_equal(pc.compile(k, sched)(A=a), a * 2.0)


def test_vector_math_is_declared_and_enabled_where_libmvec_has_it():
    k = pc.kernel("B[i] = exp(A[i])", name="vexp")
    src = pc.codegen(k, dtypes={"A": pc.f32})
    assert "#ifdef POLYC_VMATH_exp" in src and "#pragma omp declare simd notinbranch" in src
    flags = command_flags(None, True, resolve_compiler())
    assert ("-DPOLYC_VMATH_exp" in flags) == ("exp" in vector_math.available())
    assert "-DPOLYC_VMATH_exp" not in command_flags(None, False, resolve_compiler())   # needs OpenMP
    a = np.linspace(-3, 3, 1000).astype(np.float32)
    np.testing.assert_allclose(pc.compile(k, k.schedule().vectorize("i"))(A=a), np.exp(a), rtol=4e-7)


def test_kernels_without_vector_math_calls_declare_nothing():
    src = pc.codegen(pc.kernel(MATVEC, name="mv_plain"))
    assert "POLYC_VMATH" not in src


def test_c_is_compiled_as_gcc_does_by_default_and_never_reads_errno():
    flags = command_flags(None, True, resolve_compiler())
    assert "-std=gnu11" in flags and "-fno-math-errno" in flags
