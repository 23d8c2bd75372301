"""`schedule="auto"` per size class: the C runtime decides the automatic schedule again for a call's
sizes, so parallel loops and time tiling appear only where they pay (`polyc.schedule.auto_size`).
Decisions are asserted, never times."""
import importlib
import warnings

import numpy as np
import pytest

import polyc as pc
from polyc.schedule.auto import AutoRequest, auto_schedule
from polyc.schedule.auto_size import PARALLEL_REGION_WORK, region_work, size_key, working_set_bytes
from polyc.schedule.legality import check_legal, check_mark


def _pb(name):
    for m in ("medley", "stencils", "linear_algebra", "solvers", "blas"):
        for k in importlib.import_module("kernels.polybench." + m).KERNELS:
            if k.name == name:
                return k
    raise KeyError(name)


def _marks(sched):
    return {d.name: d.marks for d in sched.dims if d.name is not None}


def _copy(inputs):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}


def _proven(kernel, sched):
    """Every dependence kept, every parallel or vector loop proven (`check_mark`: the same proof
    the scheduler used, reductions and per-thread copies included) on `kernel` (what was compiled:
    `f.kernel`, which `"auto"` may have expanded)."""
    deps = kernel.dependences()
    check_legal(sched, deps, "sized schedule")
    for d in sched.dims:
        if d.name is not None and d.marks & {"parallel", "vector"}:
            check_mark(sched, deps, d.name, "sized mark")


def _compiled_and_checked(lk, preset):
    """A `schedule="auto"` kernel called at `preset`, its result checked against the source-order
    C (itself checked against the Python reference in tests/kernels, and much faster than it at
    these sizes); (compiled, the schedule its size class got)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = pc.compile(lk.kernel, schedule="auto")
    inputs = lk.make_inputs(lk.sizes[preset])
    work, expected = _copy(inputs), _copy(inputs)
    f(**work)
    pc.compile(lk.kernel)(**expected)
    for name in lk.outputs:
        np.testing.assert_allclose(work[name], expected[name], *lk.tol(lk.dtypes[0]), err_msg=name)
    key, sched = f.schedule_for(dict(lk.sizes[preset]))
    assert key, "an automatic schedule is decided per size class"
    return f, sched


def test_seidel_2d_small_gets_no_time_tiling_and_no_parallel_loop():
    """PolyBench SMALL (120 x 120, 115 KB): it fits in L2, so the skewed tiles and their wavefront
    (the issue's 32 ms against 4.7 ms) are not made; the rows run in source order, eight at a time
    (`auto_sweep`)."""
    lk = _pb("seidel-2d")
    f, sched = _compiled_and_checked(lk, "SMALL")
    _proven(lk.kernel, sched)
    names = [d.name for d in sched.dims if d.name is not None]
    assert names == ["t", "i_outer", "j", "i_inner"], sched
    assert not any(m - {"unroll"} for m in _marks(sched).values()), sched
    assert "omp parallel" not in f.source


def test_seidel_2d_large_keeps_its_parallel_time_tiles():
    lk = _pb("seidel-2d")
    sched = auto_schedule(lk.kernel, sizes=lk.sizes["LARGE"])  # 2000 x 2000: 32 MB
    _proven(lk.kernel, sched)
    marks = _marks(sched)
    assert "wave" in marks and any("parallel" in m for n, m in marks.items() if n.endswith("_tile")), sched


@pytest.mark.parametrize("name", ["fdtd-2d", "jacobi-2d"])
def test_small_presets_run_on_one_thread(name):
    """Loops entered many times with little work each (a time step of a 60 x 80 grid) stay
    sequential: a fork/join per entry cost more than the work.  (doitgen's 30-element rows were
    such loops; `"auto"` now expands its temporary and runs one packed product:
    tests/schedule/test_expansion.py.)"""
    lk = _pb(name)
    f, sched = _compiled_and_checked(lk, "SMALL")
    assert not any("parallel" in m for m in _marks(sched).values()), sched
    assert "omp parallel" not in f.source


@pytest.mark.parametrize("n, l3, tiled", [(250, 32 << 20, False), (1100, 32 << 20, True), (250, 1 << 20, True)])
def test_jacobi_2d_is_time_tiled_only_past_half_the_last_level_cache(n, l3, tiled):
    """Time tiles pay only when a time step's sweep would stream from memory: past half the
    last-level cache (`auto_size.time_tiling_cache`).  MEDIUM (250 x 250 x 2 arrays = 1 MB) on a
    machine with a 32 MiB L3 runs untiled, with parallel rows; 1100 x 1100 (19 MB) is time-tiled;
    with a 1 MiB L3 the MEDIUM grid is too.  The target is fixed so the host does not matter."""
    lk = _pb("jacobi-2d")
    sizes = dict(lk.sizes["MEDIUM"], N=n)
    target = pc.Target.host().with_(l2=512 << 10, l3=l3, cores=2)
    sched = auto_schedule(lk.kernel, target, sizes=sizes)
    _proven(lk.kernel, sched)
    marks = _marks(sched)
    assert ("wave" in marks) is tiled, sched
    if not tiled:
        assert "parallel" in marks["i"], sched


def test_region_work_and_working_set_are_computed_at_the_sizes():
    lk = _pb("jacobi-2d")
    sched = auto_schedule(lk.kernel)
    small = dict(N=10, TSTEPS=3)
    program = lk.kernel.program
    assert working_set_bytes(program, [s.name for s in program.statements], small) == 2 * 10 * 10 * 8
    plain = pc.kernel("B[i, j] = A[i, j] + 1.0", A=pc.f64["N", "M"], B=pc.f64["N", "M"], name="plus1")
    s = plain.schedule()
    loops = {"S0": [p for p, d in enumerate(s.dims) if d.name is not None]}
    outer = loops["S0"][0]
    work = region_work(s, ["S0"], outer, loops, dict(N=100, M=50))
    assert work == pytest.approx(100 * 50 * 4, rel=0.5)  # instances x (load, add, constant, store)
    assert work < PARALLEL_REGION_WORK <= region_work(s, ["S0"], outer, loops, dict(N=1000, M=500))
    assert sched.auto_request is not None


def test_size_classes_are_powers_of_two():
    assert size_key(dict(N=120, T=40)) == size_key(dict(N=127, T=33)) != size_key(dict(N=128, T=40))


def test_a_transformed_automatic_schedule_is_never_redecided():
    lk = _pb("jacobi-2d")
    sched = auto_schedule(lk.kernel)
    request = sched.auto_request
    assert isinstance(request, AutoRequest) and request.applies_to(sched)
    changed = sched.with_dims(sched.dims, "a note the user added")
    assert not request.applies_to(changed)
    f = pc.compile(lk.kernel, changed, specialise=True)
    assert f.schedule_for(dict(lk.sizes["SMALL"])) == ("", changed)
    g = pc.compile(lk.kernel, auto_schedule(lk.kernel))  # explicit schedules do not specialise
    assert g.schedule_for(dict(lk.sizes["SMALL"]))[0] == ""


def test_work_that_the_sizes_leave_unbounded_counts_as_large():
    @pc.kernel
    def prefix_double(A: pc.f64["N"], B: pc.f64["N"], m: int):
        for i in range(m):
            B[i] = A[i] * 2.0

    s = prefix_double.schedule()
    loops = {"S0": [p for p, d in enumerate(s.dims) if d.name is not None]}
    assert region_work(s, ["S0"], loops["S0"][0], loops, {"N": 100}) == float("inf")
    assert region_work(s, ["S0"], loops["S0"][0], loops, {"N": 100, "m": 50}) < PARALLEL_REGION_WORK


def _every_polybench():
    out = []
    for m in ("blas", "datamining", "linear_algebra", "medley", "solvers", "stencils"):
        out.extend(importlib.import_module("kernels.polybench." + m).KERNELS)
    return {k.name: k for k in out}


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["MINI", "SMALL"])
@pytest.mark.parametrize("name", sorted(_every_polybench()))
def test_every_polybench_size_class_schedule_is_proven_and_correct(name, preset):
    lk = _every_polybench()[name]
    f, sched = _compiled_and_checked(lk, preset)
    _proven(f.kernel, sched)


@pytest.mark.parametrize("cores, n, tile", [(2, 600, 152), (2, 1200, 200), (1, 600, 256), (2, 512, 256),
                                            (4, 1200, 152)])
def test_the_parallel_tile_loop_splits_evenly_over_the_cores(cores, n, tile):
    """trmm's column tiles run in parallel: at N = 600 the cache model's 256 gives 3 tiles, 2 on one
    core and 1 on the other; 4 tiles of 152 keep both busy (1200: 5 tiles -> 6 of 200; on 4
    cores 8 of 152).  One core, or tiles that already split evenly (512: 2), keep 256."""
    from polyc.schedule.outline import outline_text
    lk = _pb("trmm")
    sizes = {"M": 40, "N": n}
    target = pc.Target.host().with_(cores=cores)
    sched = auto_schedule(lk.kernel, target, sizes=sizes)
    outline = outline_text(sched)
    assert f"floor((j)/{tile})" in outline, outline
    if cores > 1:
        assert "for j_tile [parallel]" in outline
        tiles = -(-n // tile)
        assert tiles % cores == 0
    _proven(lk.kernel, sched)
    inputs = lk.make_inputs(sizes)
    got, expected = _copy(inputs), _copy(inputs)
    pc.compile(lk.kernel, sched)(**got)
    pc.compile(lk.kernel)(**expected)
    np.testing.assert_allclose(got["B"], expected["B"], *lk.tol("f64"))
