"""Generated C: parallel loop bodies keep `restrict`, vector math, the compile dialect."""
from __future__ import annotations

import subprocess

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


TRIANGLE = "C[i, j] += A[i, k] * A[j, k] where j in 0:i+1"


def test_a_triangular_parallel_loop_is_dealt_out_in_chunks(monkeypatch):
    """Rows of a triangle (`j <= i`) grow: whole halves would give one thread three times the work
    of the other.  The parallel loop runs in about four chunks per thread dealt out in turn."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    tri = pc.kernel(TRIANGLE, name="tri_par", A=pc.f64["N", "M"], C=pc.f64["N", "N"])
    sched = tri.schedule().parallel("i")
    src = pc.codegen(tri, sched)
    assert "schedule(static, pc_omp_chunk((n_N)))" in src
    assert "static inline int64_t pc_omp_chunk(int64_t pc_trip)" in src
    rng = np.random.default_rng(4)
    for n in (1, 7, 61):
        a, c = rng.random((n, 5)), rng.random((n, n))
        np.testing.assert_allclose(pc.compile(tri, sched)(A=a, C=c.copy()), c + np.tril(a @ a.T), rtol=1e-12)


def test_tiles_of_a_triangle_are_chunked_and_tiles_of_a_box_are_not(monkeypatch):
    """Tile loops of a box move both bounds of their point loops together (`16*t` to `16*t + 15`):
    even work, whole shares.  Over a triangle the column tiles stop at the row tile (`tj <= ti`)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    tri = pc.kernel(TRIANGLE, name="tri_tiles", A=pc.f64["N", "M"], C=pc.f64["N", "N"])
    box = pc.kernel("C[i, j] += A[i, k] * A[j, k]", name="box_tiles", A=pc.f64["N", "M"], C=pc.f64["N", "N"])
    for k, chunked in ((tri, True), (box, False)):
        sched = k.schedule().tile(i=16, j=16).parallel("i_outer")
        src = pc.codegen(k, sched)
        assert ("pc_omp_chunk((" in src) is chunked, src
        assert "#pragma omp parallel for schedule(static" in src
        rng = np.random.default_rng(5)
        a, c = rng.random((45, 3)), rng.random((45, 45))
        want = c + (np.tril(a @ a.T) if chunked else a @ a.T)
        np.testing.assert_allclose(pc.compile(k, sched)(A=a, C=c.copy()), want, rtol=1e-12)


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
    assert "-std=gnu11" in flags and "-fno-math-errno" in flags and "-fno-trapping-math" in flags


def test_a_guarded_division_is_vectorised_and_never_leaks(tmp_path):
    """`select(c, a / b, 0)`: without -fno-trapping-math gcc keeps the loop scalar (the division
    might trap where c is false); vectorised, the division runs everywhere and the select still
    discards the lanes where c is false (b = 0 there: inf and NaN never reach the result)."""
    k = pc.kernel("Y[i, j] = select(D[i, j] != 0.0, X[i, j] / D[i, j], 0.0)", name="guarded_div")
    src = pc.codegen(k, "auto", dtypes={"X": pc.f32, "D": pc.f32})
    compiler = resolve_compiler()
    path = tmp_path / "k.c"
    path.write_text(src)
    flags = [f for f in command_flags(None, True, compiler) if f != "-shared"]
    out = subprocess.run([compiler, *flags, "-fopt-info-vec-optimized", "-c", str(path), "-o", str(tmp_path / "k.o")],
                         capture_output=True, text=True, check=True)
    line = next(n for n, text in enumerate(src.splitlines(), 1) if "t_D[" in text and "?" in text)
    vectorised = {int(m.split("k.c:")[1].split(":")[0]) for m in out.stderr.splitlines() if "loop vectorized" in m}
    assert any(line - 3 <= n <= line for n in vectorised), (line, out.stderr)
    x = np.arange(1, 121, dtype=np.float32).reshape(3, 40)
    d = np.where(np.arange(120).reshape(3, 40) % 3 == 0, 0, 2).astype(np.float32)
    np.testing.assert_array_equal(pc.compile(k, "auto")(X=x, D=d), np.where(d != 0, x / np.where(d != 0, d, 1), 0))


def test_sizes_in_float_arithmetic_are_converted_once_per_function():
    """`X[i, j] / N` converts N to float once at the top of each function: converted in the loop,
    gcc leaves the reduction scalar on AVX2 (no vector int64 -> float conversion), which made
    layernorm's backward twice as slow."""
    k = pc.kernel("""
        mean[i] +=! X[i, j] / N
        Y[i, j] = X[i, j] * M - mean[i]
    """, name="centre", X=pc.tensor["M", "N"])
    for dtype, ctype in ((pc.f32, "float"), (pc.f64, "double")):
        src = pc.codegen(k, "auto", dtypes={"X": dtype})
        body = [line for line in src.splitlines() if "t_X[" in line]
        assert len(body) >= 2 and all("n_N" not in line and "n_M" not in line for line in body)
        assert f"const {ctype} pc_fsize0_{dtype.name} = ({ctype})(n_N);" in src
        assert f"const {ctype} pc_fsize1_{dtype.name} = ({ctype})(n_M);" in src
        rng = np.random.default_rng(4)
        for m, n in ((3, 5), (64, 1000)):
            x = rng.standard_normal((m, n)).astype(dtype.numpy)
            got = pc.compile(k, "auto")(X=x)
            want = x * m - (x / np.array(n, dtype.numpy)).sum(axis=1, keepdims=True)
            np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == pc.f32 else 1e-12, atol=1e-5)
    # Integer arithmetic keeps its integer sizes.
    counts = pc.kernel("Y[i, j] = X[i, j] * N", name="scale_int", X=pc.i32["M", "N"])
    assert "fsize" not in pc.codegen(counts, "auto")
