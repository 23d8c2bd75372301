"""The shape of time tiles (`schedule="auto"` on time-stepped stencils): one time step of a tile
fits the target's L1, the longest time tile among equally good ones, and a wavefront that runs
in groups of a few time tiles.  No timing assertions (the measurements are in
`benchmarks/README.md`)."""
import re
import warnings
from fractions import Fraction

import numpy as np

import polyc as pc
from kernels import by_name
from polyc.schedule import auto_decide
from polyc.schedule.auto import auto_schedule
from polyc.schedule.auto_cost import Footprint, tile_sizes
from polyc.testing import check_proven

JACOBI = by_name("jacobi-2d")
LARGE = dict(N=1300, TSTEPS=500)


def _target(**facts):
    base = dict(l1=48 * 1024, l2=1 << 20, l3=32 << 20, cores=1)
    base.update(facts)
    return pc.Target.host().with_(**base)


def _tile(sched, expr: str) -> int:
    """The size of the tile loop over `expr` (e.g. '2t + i'), read from the schedule's outline."""
    text = "\n".join(x for x in str(sched).splitlines() if "time_group" not in x)
    sizes = {int(m) for m in re.findall(r"floor\(\(" + re.escape(expr) + r"\)/(\d+)\)", text)}
    assert len(sizes) == 1, (expr, sizes, str(sched))
    return sizes.pop()


def _group(sched) -> int:
    line = next(x for x in str(sched).splitlines() if x.strip().startswith("for time_group"))
    return int(re.search(r"floor\(\(t\)/(\d+)\)", line).group(1))


def test_one_step_of_a_time_tile_fits_in_l1():
    """jacobi-2d reads A and B (float64): rows x columns x 2 x 8 bytes of one step within L1, rows
    of the vector loop at least `SKEWED_MIN_ROW` long; a larger L1 gets a larger step."""
    for l1 in (48 * 1024, 192 * 1024):
        sched = auto_schedule(JACOBI.kernel, _target(l1=l1), sizes=LARGE)
        rows, cols = _tile(sched, "2t + i"), _tile(sched, "2t + j")
        assert rows * cols * 2 * 8 <= l1, (l1, rows, cols)
        assert cols >= auto_decide.SKEWED_MIN_ROW
        assert rows * cols * 2 * 8 > l1 // 4, (l1, rows, cols)   # not needlessly small either
    small = auto_schedule(JACOBI.kernel, _target(), sizes=LARGE)
    large = auto_schedule(JACOBI.kernel, _target(l1=192 * 1024), sizes=LARGE)
    assert _tile(large, "2t + i") * _tile(large, "2t + j") > _tile(small, "2t + i") * _tile(small, "2t + j")


def test_time_tiles_are_the_longest_of_equally_good_ones():
    """At 16 x 128 points a step, 32 time steps (ratio 2.21) against 16 (2.25): within 5%, the
    longer tile wins."""
    sched = auto_schedule(JACOBI.kernel, _target(), sizes=LARGE)
    assert _tile(sched, "t") == 32, sched


def test_tile_sizes_honours_the_step_budget_and_falls_back_without_it():
    # a 2-D stencil's footprint in (t, 2t + i, 2t + j) tile coordinates: rows and columns grow by
    # 2 per time step
    rows = ((Fraction(-2), Fraction(1), Fraction(0)), (Fraction(-2), Fraction(0), Fraction(1)))
    fps = [Footprint("A", rows), Footprint("B", rows)]
    free = tile_sizes(fps, 3, 512 * 1024, 8, innermost=2, time_like=[0], min_inner=128)
    bounded = tile_sizes(fps, 3, 512 * 1024, 8, innermost=2, time_like=[0], min_inner=128,
                         step_budget_bytes=48 * 1024)
    assert free[1] * free[2] * 16 > 48 * 1024            # without it, the step is larger than L1
    assert bounded[1] * bounded[2] * 16 <= 48 * 1024, bounded
    # no tile fits a 1 KiB step with rows of 128: the budget is dropped rather than the search failing
    assert tile_sizes(fps, 3, 512 * 1024, 8, innermost=2, time_like=[0], min_inner=128,
                      step_budget_bytes=1024) == free


def test_the_wavefront_runs_in_groups_of_time_tiles():
    """Two time tiles per core in a group: 64 steps on one core, 128 on two; a time loop of fewer
    time tiles than two per core waves over every tile loop instead, without groups."""
    one = auto_schedule(JACOBI.kernel, _target(cores=1), sizes=LARGE)
    two = auto_schedule(JACOBI.kernel, _target(cores=2), sizes=LARGE)
    assert _group(one) == 2 * _tile(one, "t"), one
    assert _group(two) == 4 * _tile(two, "t"), two
    short = auto_schedule(JACOBI.kernel, _target(cores=2), sizes=dict(N=1300, TSTEPS=20))
    assert "time_group" not in str(short), short


def test_grouped_time_tiles_compute_the_reference():
    """Small tiles so that a call spans several groups, waves and partial tiles: the same values
    as the kernel's reference, and every step proven.  (A schedule for every size: at these sizes
    the data fits in cache and would not be time-tiled.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = auto_schedule(JACOBI.kernel, _target(cores=2), tile_sizes={"t": 4, "t0": 8, "t1": 8})
    assert _group(sched) == 16, sched
    check_proven(JACOBI.kernel, sched)
    inputs = JACOBI.make_inputs(dict(N=40, TSTEPS=30), "f64", np.random.default_rng(3))
    got = pc.compile(JACOBI.kernel, sched)(**{k: (v.copy() if isinstance(v, np.ndarray) else v)
                                              for k, v in inputs.items()})
    expected = JACOBI.expected(inputs)
    for name, e in expected.items():
        np.testing.assert_allclose(got[name], e, rtol=1e-12, atol=1e-12, err_msg=name)
