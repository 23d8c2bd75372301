"""`schedule="auto"`: legal, proven marks, correct results; tiling and time tiling where they apply;
a fallback (with a warning) when isl's budget runs out.  No timing assertions."""
import importlib
import warnings

import numpy as np
import pytest

import polyc as pc
from polyc.schedule.auto import AutoScheduleWarning, auto_schedule
from polyc.testing import check_proven
from kernels import by_name

POLYBENCH_MODULES = ("blas", "datamining", "linear_algebra", "medley", "solvers", "stencils")


def _polybench():
    out = {}
    for m in POLYBENCH_MODULES:
        for k in importlib.import_module("kernels.polybench." + m).KERNELS:
            out[k.name] = k
    return out


PB = _polybench()


def _copy(inputs):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}


def _assert_close(got, expected, rtol, atol):
    if isinstance(expected, dict):
        for name, e in expected.items():
            np.testing.assert_allclose(got[name], e, rtol=rtol, atol=atol, err_msg=name)
    else:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def _loops(sched):
    return [d.name for d in sched.dims if d.name is not None]


def _marked(sched, mark):
    return [d.name for d in sched.dims if mark in d.marks]


def test_matmul_is_tiled_parallel_vectorised_and_correct():
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")
    sched = auto_schedule(mm)
    check_proven(mm, sched)
    loops = _loops(sched)
    assert {"i_tile", "j_tile", "k_tile"} <= set(loops), loops
    assert _marked(sched, "parallel"), sched
    assert _marked(sched, "vector"), sched
    rng = np.random.default_rng(0)
    a = rng.standard_normal((67, 45)).astype(np.float32)
    b = rng.standard_normal((45, 300)).astype(np.float32)
    f = pc.compile(mm, schedule="auto")
    np.testing.assert_allclose(f(A=a, B=b), a @ b, rtol=1e-4, atol=1e-4)


def test_stencil_gets_time_tiling_with_a_wavefront():
    lk = PB["jacobi-2d"]
    sched = auto_schedule(lk.kernel)
    check_proven(lk.kernel, sched)
    loops = _loops(sched)
    # Tiles of the skewed (t, i, j) band, run as a wavefront whose second tile loop is parallel.
    assert "wave" in loops and loops.index("wave") < loops.index("t"), sched
    assert any(n.endswith("_tile") for n in _marked(sched, "parallel")), sched
    inputs = lk.make_inputs(lk.sizes["SMALL"], "f64")
    got = pc.compile(lk.kernel, sched)(**_copy(inputs))
    _assert_close(got, lk.expected(inputs), *lk.tol("f64"))


def _wave_terms(sched) -> int:
    wave = next(line for line in str(sched).splitlines() if line.strip().startswith("for wave"))
    return wave.split(";")[0].count("floor(")


def test_time_tiles_start_in_parallel():
    """When the call's time loop spans fewer than two time tiles per core, the wavefront of the
    time-tiled band sums all its tile loops (time, rows, columns), so tiles of different rows and
    columns share a wave; with many time tiles it keeps the (time, rows) wave and its locality."""
    lk = PB["jacobi-2d"]
    two_cores = pc.Target.host().with_(cores=2)
    sched = auto_schedule(lk.kernel, two_cores, sizes=dict(N=1300, TSTEPS=20))
    assert _wave_terms(sched) == 3, sched        # t, i and j tiles
    assert _wave_terms(auto_schedule(lk.kernel, two_cores, sizes=dict(N=1300, TSTEPS=1000))) == 2
    assert _wave_terms(auto_schedule(lk.kernel, two_cores.with_(cores=1), sizes=dict(N=1300, TSTEPS=20))) == 2
    check_proven(lk.kernel, sched)
    inputs = lk.make_inputs(dict(N=70, TSTEPS=5), "f64")
    got = pc.compile(lk.kernel, sched)(**_copy(inputs))
    _assert_close(got, lk.expected(inputs), *lk.tol("f64"))


@pytest.mark.parametrize("name", ["gemm", "atax", "bicg", "lu", "seidel-2d", "fdtd-2d", "heat-3d",
                                  "covariance", "trmm", "nussinov"])
def test_polybench_auto_matches_reference(name):
    lk = PB[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutoScheduleWarning)  # no fallback on these
        sched = auto_schedule(lk.kernel)
    check_proven(lk.kernel, sched)
    inputs = lk.make_inputs(lk.sizes["MINI"], lk.dtypes[0])  # PolyBench's type: int for nussinov
    got = pc.compile(lk.kernel, schedule="auto")(**_copy(inputs))
    _assert_close(got, lk.expected(inputs), *lk.tol(lk.dtypes[0]))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PB))
def test_every_polybench_kernel_auto_matches_reference(name):
    lk = PB[name]
    sched = auto_schedule(lk.kernel)
    check_proven(lk.kernel, sched)
    inputs = lk.make_inputs(lk.sizes["SMALL"], lk.dtypes[0])
    got = pc.compile(lk.kernel, sched)(**_copy(inputs))
    _assert_close(got, lk.expected(inputs), *lk.tol(lk.dtypes[0]))


def test_memory_bound_siblings_are_fused():
    """atax streams A twice per row: auto keeps both statements in one row loop, as written."""
    lk = PB["atax"]
    sched = auto_schedule(lk.kernel)
    maps = sched.map_texts
    # S2 (tmp += A x) and S3 (y += A tmp) share their first loop dimension.
    first = {name: maps[name].split("->")[2].split(",")[:2] for name in ("S2", "S3")}
    assert first["S2"] == first["S3"], sched


def test_tiny_budget_falls_back_with_a_warning_and_stays_correct():
    lk = PB["jacobi-2d"]
    lk.kernel.dependences()
    with pytest.warns(AutoScheduleWarning, match="source order"):
        sched = auto_schedule(lk.kernel, budget=50)
    assert "wave" not in _loops(sched)
    check_proven(lk.kernel, sched)
    assert _marked(sched, "parallel"), sched  # i carries no dependence within a time step
    inputs = lk.make_inputs(lk.sizes["MINI"], "f64")
    got = pc.compile(lk.kernel, sched)(**_copy(inputs))
    _assert_close(got, lk.expected(inputs), *lk.tol("f64"))


def test_compile_auto_through_the_public_api_for_an_einstein_pipeline():
    k = pc.kernel("""
        m[i] max=! X[i, j]
        E[i, j] = exp(X[i, j] - m[i])
        s[i] +=! E[i, j]
        Y[i, j] = E[i, j] / s[i]
    """, name="softmax_auto_test")
    x = np.random.default_rng(1).standard_normal((33, 70))
    f = pc.compile(k, schedule="auto")
    check_proven(k, f.schedule)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    out = f(X=x)
    y = out["Y"] if isinstance(out, dict) else out
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-10, atol=1e-12)


def test_untiled_variant_is_legal():
    lk = PB["gemm"]
    sched = auto_schedule(lk.kernel, tile=False)
    assert not any(n.endswith("_tile") for n in _loops(sched))
    check_proven(lk.kernel, sched)


def test_register_blocking_unrolls_and_jams_the_reduction_legally():
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul_rb")
    sched = auto_schedule(mm, register_blocking=True, pack=False)
    check_proven(mm, sched)
    lanes = [d.name for d in sched.dims if d.unroll.is_full]
    from polyc.codegen.loop_ast import ast_build_options
    assert lanes and "unroll" in str(ast_build_options(sched)), sched
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((37, 45)), rng.standard_normal((45, 70))  # 45 is no multiple of 4
    np.testing.assert_allclose(pc.compile(mm, sched)(A=a, B=b), a @ b, rtol=1e-10, atol=1e-10)


def test_schedule_time_is_small_for_ordinary_kernels():
    """Not a timing assertion on the machine: isl's own operation count stays far below budget."""
    from polyc.schedule.auto import SCHEDULER_BUDGET, isl_schedule
    lk = PB["gemm"]
    isl_schedule(lk.kernel.model, lk.kernel.dependences(), budget=SCHEDULER_BUDGET // 100)


def test_tune_measures_legal_variants_and_returns_the_fastest():
    from polyc.tune import tune
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul_tune")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((40, 30)), rng.standard_normal((30, 50))
    result = tune(mm, repeat=1, A=a, B=b)
    assert result.label in {label for label, _ in result.trials}
    assert result.seconds == min(t for _, t in result.trials)
    check_proven(mm, result.schedule)
    np.testing.assert_allclose(pc.compile(mm, result.schedule)(A=a, B=b), a @ b, rtol=1e-10, atol=1e-10)


def test_rows_fuse_until_nothing_more_fuses():
    """layernorm's backward: `beta_grad[j] +=! Y_grad[i, j]` shares rows of Y_grad only with a nest
    fused after it; fused to a fixed point it joins the row loop instead of streaming Y_grad alone."""
    g = pc.grad(by_name("layernorm").kernel, of="Y", wrt=["X", "gamma", "beta"])
    updates = {s.target.tensor: s.name for s in g.program.statements if s.update == "+" and s.reduction}
    maps = auto_schedule(g).map_texts
    first = {t: maps[updates[t]].split("->")[2].split(",")[:2] for t in ("beta_grad", "gamma_grad", "var")}
    assert first["beta_grad"] == first["gamma_grad"] == first["var"], maps


def test_per_row_scalars_fuse_into_the_row_loop_between_row_nests():
    """layernorm as PyTorch computes it: `mean = sum / N` and `rstd = 1 / sqrt(var / N + eps)` are
    per-row scalars between the row nests; they join the row loop, so X's rows stream once (the
    three passes ran apart: 3.5 ms against 1.0 ms at 4096 x 1024)."""
    ln = pc.kernel("""
        sum[i] +=! X[i, j]
        mean[i] = sum[i] / N
        xc[i, j] = X[i, j] - mean[i]
        var[i] +=! xc[i, j] * xc[i, j]
        rstd[i] = 1.0 / sqrt(var[i] / N + eps)
        Y[i, j] = xc[i, j] * rstd[i] * gamma[j] + beta[j]
    """, name="ln_torch_style", X=pc.f64["M", "N"], gamma=pc.f64["N"], beta=pc.f64["N"])
    sched = auto_schedule(ln, sizes={"M": 4096, "N": 1024})
    first = {st.target.tensor: sched.map_texts[st.name].split("->")[2].split(",")[0]
             for st in ln.program.statements if st.value.accesses()}
    assert len(set(first.values())) == 1, sched          # one row loop holds every computing statement
    rng = np.random.default_rng(0)
    x, g, b = rng.standard_normal((9, 16)), rng.standard_normal(16), rng.standard_normal(16)
    got = pc.compile(ln, sched)(X=x, gamma=g, beta=b, eps=1e-5)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_one_thread_decides_like_one_core(monkeypatch):
    """`"auto"` decides for the threads OpenMP will run: with OMP_NUM_THREADS=1 on a machine of
    several cores, a stencil keeps the (time, rows) wave of one core (its locality: jacobi-2d
    N=1300 T=50 in 37 against 45 ms)."""
    lk = PB["jacobi-2d"]
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    f = pc.compile(lk.kernel, schedule="auto")
    _, sched = f.schedule_for(dict(N=1300, TSTEPS=20))
    assert _wave_terms(sched) == 2, sched
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    if pc.Target.host().cores >= 2:
        _, two = pc.compile(lk.kernel, schedule="auto").schedule_for(dict(N=1300, TSTEPS=20))
        assert _wave_terms(two) == 3, two
