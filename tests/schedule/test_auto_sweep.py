"""`schedule="auto"` runs the rows of in-place sweeps together, each lagging the one before
(auto_sweep): seidel-2d's chain of one point after another becomes eight independent chains."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import all_kernels
from polyc.schedule.auto import auto_schedule
from polyc.schedule.auto_sweep import ROWS, sweep_chains
from polyc.schedule.legality import carried_at

POLYBENCH = {k.name: k for k in all_kernels(suite="polybench")}


def _run(kernel, sched, inputs):
    got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    pc.compile(kernel, sched)(**got)
    return got


def _jams(sched):
    return [h for h in sched.history if h.startswith(("skew(", "unroll_and_jam("))]


@pytest.mark.parametrize("preset, steps", [
    ("SMALL", ["skew('j', 'i', 2)", f"unroll_and_jam('i', {ROWS})"]),
    # Tiled along t + i: the rows are grouped along the tile's coordinate, so groups fill tiles.
    ("LARGE", ["skew('i', 't', 1)", "skew('j', 'i', 2)", f"unroll_and_jam('i', {ROWS})"]),
])
def test_seidel_rows_advance_together_bit_for_bit(preset, steps):
    lk = POLYBENCH["seidel-2d"]
    sched = auto_schedule(lk.kernel, sizes=lk.sizes[preset])
    assert _jams(sched) == steps, sched.history
    # The jammed copies of the body depend on none of each other: independent chains.
    deps = lk.kernel.dependences()
    assert not carried_at(sched, deps, sched.dim_index("i_inner"))
    # The written order of every sum is kept: the result is the source order's, bit for bit.
    inputs = lk.make_inputs({"TSTEPS": 7, "N": 45}, "f64", np.random.default_rng(0))
    want, got = _run(lk.kernel, lk.kernel.schedule(), inputs), _run(lk.kernel, sched, inputs)
    assert np.array_equal(got["A"], want["A"])


def summed_area(A: pc.f64["N", "N"]):
    for i in range(1, N):
        for j in range(1, N):
            A[i, j] = A[i, j] + 0.5 * (A[i - 1, j] + A[i, j - 1])


def far_reaching(A: pc.f64["N", "N"]):
    for i in range(1, N):
        for j in range(1, N - 7):
            A[i, j] = 0.5 * (A[i - 1, j + 7] + A[i, j - 1])


def test_summed_area_table_rows_lag_by_one():
    """`A[i, j] += (A[i - 1, j] + A[i, j - 1]) / 2` in place: row i + 1 needs row i up to column j, so
    a lag of one column makes the jammed rows independent; the smallest lag is taken."""
    k = pc.kernel(summed_area)
    sched = auto_schedule(k, sizes={"N": 300})
    assert "skew('j', 'i', 1)" in sched.history and f"unroll_and_jam('i', {ROWS})" in sched.history, sched.history
    a = np.random.default_rng(1).random((61, 61))
    want, got = _run(k, k.schedule(), {"A": a}), _run(k, sched, {"A": a})
    assert np.array_equal(got["A"], want["A"])


def test_rows_that_need_a_longer_lag_keep_their_order():
    """Row i + 1 reads row i seven columns ahead: no lag tried makes jammed rows independent, and
    nothing is changed."""
    k = pc.kernel(far_reaching)
    sched = auto_schedule(k, sizes={"N": 300})
    assert not any(h.startswith("unroll_and_jam(") for h in sched.history), sched.history
    a = np.random.default_rng(2).random((50, 50))
    assert np.array_equal(_run(k, sched, {"A": a})["A"], _run(k, k.schedule(), {"A": a})["A"])


def test_dependences_from_one_column_only_are_no_sweep():
    """floyd-warshall's `j` carries dependences only from `j = k` (`split_pinned_loops` peels that
    column off instead); its rows are not jammed."""
    lk = POLYBENCH["floyd-warshall"]
    assert not sweep_chains(lk.kernel.schedule(), lk.kernel.dependences())
    assert not any(h.startswith("unroll_and_jam(") for h in auto_schedule(lk.kernel, sizes=lk.sizes["LARGE"]).history)


def two_sweeps(A: pc.f64["N", "N"], C: pc.f64["N", "N"]):
    for i in range(1, N - 1):
        for j in range(1, N - 1):
            A[i, j] = 0.25 * (A[i - 1, j] + A[i + 1, j] + A[i, j - 1] + C[i, j - 1])
            C[i, j] = 0.5 * (C[i, j - 1] + C[i - 1, j + 1]) + A[i, j]


def test_two_sweeps_sharing_their_loops_are_jammed_once():
    """Both statements carry a chain along `j`, each reading the other's (so they share `j`): the
    rows are jammed once, for both, with the lag both need, bit for bit the source order's result."""
    k = pc.kernel(two_sweeps)
    sched = auto_schedule(k, sizes={"N": 300})
    assert [h for h in sched.history if h.startswith("unroll_and_jam(")] == [f"unroll_and_jam('i', {ROWS})"], \
        sched.history
    rng = np.random.default_rng(3)
    inputs = {"A": rng.random((37, 37)), "C": rng.random((37, 37))}
    want, got = _run(k, k.schedule(), inputs), _run(k, sched, inputs)
    assert np.array_equal(got["A"], want["A"]) and np.array_equal(got["C"], want["C"])


def Seidel_(A_: pc.f64["N", "N"], STEPS: int):
    for T in range(STEPS):
        for I in range(1, N - 1):
            for J_ in range(1, N - 1):
                A_[I, J_] = (A_[I - 1, J_ - 1] + A_[I - 1, J_] + A_[I - 1, J_ + 1]
                             + A_[I, J_ - 1] + A_[I, J_] + A_[I, J_ + 1]
                             + A_[I + 1, J_ - 1] + A_[I + 1, J_] + A_[I + 1, J_ + 1]) / 9.0


def test_rows_align_with_tiles_whatever_the_iterators_are_called():
    """isl sees `J_` under another name: the tile's row coordinate is read with isl's names, so
    upper-case and underscored iterators get the same aligned groups as seidel-2d, NaN and inf
    passing through exactly as in the source order."""
    k = pc.kernel(Seidel_)
    sched = auto_schedule(k, sizes={"STEPS": 500, "N": 2000})
    assert _jams(sched) == ["skew('I', 'T', 1)", "skew('J_', 'I', 2)", f"unroll_and_jam('I', {ROWS})"], \
        sched.history
    a = np.random.default_rng(4).random((45, 45))
    a[3, 7], a[10, 10] = np.nan, np.inf
    want, got = _run(k, k.schedule(), {"A_": a, "STEPS": 7}), _run(k, sched, {"A_": a, "STEPS": 7})
    assert np.array_equal(got["A_"], want["A_"], equal_nan=True)
