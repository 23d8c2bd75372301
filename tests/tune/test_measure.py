"""Measurement in worker processes: a crash or a hang costs one candidate; results are checked."""
from __future__ import annotations

import pytest

import polyc as pc
from polyc.tune import measure as M
from polyc.tune.registry_view import target_view
from polyc.tune.space import Space

MM = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="tune_measure_mm")
SIZES = {"I": 64, "J": 48, "K": 40}


def _setup(n=3):
    space = Space(MM, target_view(), 8)
    genomes = [space.default(), space.source(), dict(space.source(), **{"pack.S1.mr": 4}),
               dict(space.source(), **{"pack.S1.nv": 1})]
    cands = [space.realize(g)[0] for g in genomes[:n + 1]]
    assert len({c.key() for c in cands}) == len(cands)
    task = M.Task(M.kernel_blob(MM), tuple(SIZES.items()), "f64", tuple(M.check_sizes(SIZES).items()), 1)
    return [(c.key(), c.to_dict()) for c in cands], task


@pytest.fixture
def faults():
    yield M.FAULTS
    M.FAULTS.clear()


def test_a_crashing_candidate_costs_only_itself(faults):
    cands, task = _setup(2)
    faults[cands[1][0]] = "segfault"
    ch = M.LocalChannel(task)
    try:
        res = {m.key: m for m in M.measure_batch(ch, cands[0], cands[1:], rounds=2, min_s=0.0)}
    finally:
        ch.close()
    assert not res[cands[1][0]].ok and "signal 11" in res[cands[1][0]].error
    assert res[cands[0][0]].ok and res[cands[0][0]].ratio == 1.0
    ok = res[cands[2][0]]
    assert ok.ok and len(ok.samples) == 2 and ok.seconds > 0 and ok.ratio > 0


@pytest.mark.slow
def test_a_hanging_candidate_times_out(faults):
    cands, task = _setup(2)
    faults[cands[1][0]] = "hang"
    ch = M.LocalChannel(task)
    try:
        res = {m.key: m for m in M.measure_batch(ch, cands[0], cands[1:], rounds=2, min_s=0.0, prepare_timeout=8)}
    finally:
        ch.close()
    assert not res[cands[1][0]].ok and "no answer" in res[cands[1][0]].error
    assert res[cands[2][0]].ok and res[cands[0][0]].ok


def test_a_wrong_result_is_rejected_before_timing(monkeypatch):
    """The worker compares every candidate with the reference at a small size before timing it."""
    cands, task = _setup(1)
    state = M.WorkerState(task)
    assert state.handle(("prepare", cands[1][0], cands[1][1]))["ok"]
    # A reference that disagrees (as a miscompiled kernel would): the candidate is refused.
    monkeypatch.setattr(type(state.kernel), "reference", lambda self, **kw: {"C": kw["C"] + 1.0})
    reply = state.handle(("prepare", cands[0][0], cands[0][1]))
    assert not reply["ok"] and "does not match" in reply["error"]
    assert cands[0][0] not in state.compiled
