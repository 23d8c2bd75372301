"""`schedule="auto"` turns statements that walk columns into statements that walk rows (auto_stride)."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import all_kernels
from polyc.schedule.auto import auto_schedule
from polyc.schedule.auto_loops import real_loops
from polyc.schedule.auto_stride import column_walkers

POLYBENCH = {k.name: k for k in all_kernels(suite="polybench")}


def _agrees_with_source_order(kernel, sched, inputs):
    got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    pc.compile(kernel, sched)(**got)
    pc.compile(kernel)(**want)
    for name, value in want.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_allclose(got[name], value, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("name, walkers", [("gramschmidt", {"S5", "S6"}), ("deriche", {"S17", "S20"})])
def test_polybench_column_walks_become_row_walks(name, walkers):
    """gramschmidt's `R[k, j] += Q[i, k] * A[i, j]` over i, and deriche's column sweeps: their
    loops are distributed and interchanged (proven primitives) so the inner loop walks a row."""
    lk = POLYBENCH[name]
    sched = auto_schedule(lk.kernel, sizes=lk.sizes["LARGE"])
    assert any(h.startswith("interchange(") for h in sched.history), sched.history
    assert not walkers & set(column_walkers(sched)), sched.history
    if name == "gramschmidt":   # each nest marked on its own: both row updates run in parallel
        from polyc.schedule.schedule import LoopKind
        _, loops_of = real_loops(sched)
        for st in ("S5", "S6"):
            assert any(sched.dims[p].runs(LoopKind.PARALLEL) for p in loops_of[st]), (st, sched.history)
    dtype = lk.dtypes[0]
    _agrees_with_source_order(lk.kernel, sched, lk.make_inputs(lk.sizes["SMALL"], dtype, np.random.default_rng(0)))


def test_rows_that_already_walk_rows_are_left_alone():
    lk = POLYBENCH["gemver"]
    sched = auto_schedule(lk.kernel, sizes=lk.sizes["LARGE"])
    assert not any(h.startswith("interchange(") for h in sched.history), sched.history


def _order(schedule):
    """Every ordered pair of statement instances (a runs before b), per pair of statements."""
    maps = {n: schedule.statement_map(n).intersect_domain(schedule.model.domains[n]) for n in schedule.statements}
    return {(a, b): ma.lex_lt_map(mb) for a, ma in maps.items() for b, mb in maps.items()}


@pytest.mark.parametrize("name", ["gramschmidt", "2mm", "deriche", "fdtd-2d"])
def test_own_loops_per_nest_rename_loops_and_keep_every_instance_order(name):
    """`own_loops` gives each nest its own loop dimensions, so marks are proven per nest; it is a
    renaming: the order of every pair of instances stays exactly as it was."""
    from polyc.schedule.auto_stride import own_loops
    from polyc.schedule.nesting import scalar_key, scalar_positions
    from polyc.schedule.rewrite import statement_varies
    k = POLYBENCH[name].kernel
    s = k.schedule()
    if name == "gramschmidt":
        s = s.distribute("c1").interchange("c1", "i")
    own = own_loops(s)
    assert len(own.dims) > len(s.dims)
    for p, d in enumerate(own.dims):     # one nest per loop dimension
        if d.is_loop:
            outside = scalar_positions(own, 0, p)
            nests = {scalar_key(own, n, outside) for n in own.statements if statement_varies(own, n, p)}
            assert len(nests) <= 1, (d.name, nests)
    before, after = _order(s), _order(own)
    for pair, rel in before.items():
        assert rel.is_equal(after[pair]), pair


def test_independent_recurrences_run_side_by_side_in_strips():
    """adi solves one tridiagonal system per row `i` along `j` (`p[i, j] = -c / (a * p[i, j - 1] + b)`,
    a division per step): `"auto"` runs `j` outside and `i` inside, in strips whose loop is outermost,
    so a strip's systems advance together as SIMD lanes; the results are those of the source order."""
    from polyc.schedule.auto_stride import recurrence_walkers
    lk = POLYBENCH["adi"]
    deps = list(lk.kernel.dependences())
    source = lk.kernel.schedule()
    assert {"S16", "S17", "S19", "S23", "S24", "S26"} <= set(recurrence_walkers(source, deps))
    for preset in ("LARGE", "SMALL"):
        sched = auto_schedule(lk.kernel, sizes=lk.sizes[preset])
        assert any(h.startswith("split(") for h in sched.history), sched.history
        assert not recurrence_walkers(sched, deps), sched.history
    _agrees_with_source_order(lk.kernel, sched, lk.make_inputs(lk.sizes["SMALL"], "f64", np.random.default_rng(0)))


def row_prefix(A: pc.f64["N", "M"], s: pc.f64["N"]):
    for i in range(N):  # noqa: F821
        for j in range(1, M):  # noqa: F821
            A[i, j] = A[i, j - 1] * 0.5 + A[i, j]
            s[i] += A[i, j]


def test_accumulations_are_left_to_the_reduction_strategies_and_recurrences_repaired():
    """A row sum (`s[i] += ...`: one element all along `j`) is no recurrence to turn; the prefix
    recurrence beside it is (and the sum follows it out of the shared loop only if proven)."""
    from polyc.schedule.auto_stride import recurrence_walkers
    k = pc.kernel(row_prefix)
    walkers = recurrence_walkers(k.schedule(), list(k.dependences()))
    assert set(walkers) == {"S0"}, walkers
    sched = auto_schedule(k, sizes={"N": 300, "M": 500})
    rng = np.random.default_rng(2)
    _agrees_with_source_order(k, sched, {"A": rng.standard_normal((300, 500)), "s": rng.standard_normal(300)})
