"""`schedule="auto"` turns statements that walk columns into statements that walk rows (auto_stride)."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import all_kernels
from polyc.schedule.auto import auto_schedule, real_loops
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
    assert not walkers & set(column_walkers(sched, real_loops)), sched.history
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
