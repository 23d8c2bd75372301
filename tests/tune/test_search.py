"""The search is deterministic for a seed and is steered by the cost model."""
from __future__ import annotations

import math

import polyc as pc
from polyc.tune.measure import Measurement
from polyc.tune.model import FEATURES, CostModel, features
from polyc.tune.registry_view import target_view
from polyc.tune.search import run_search
from polyc.tune.space import Space

MM = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="tune_search_mm")
SIZES = {"I": 512, "J": 512, "K": 512}


def _fake(space):
    """A deterministic 'machine': packed code with big kc and mr*nr = 32 is fastest."""
    tv = space.target

    def feats(c, s):
        return features(MM, s, c.seed, SIZES, 4, tv)

    def cost(f):
        d = dict(zip(FEATURES, f))
        t = 10.0 - 4 * d["packed"] - 0.5 * d["kc"] + abs(d["mr"] * d["nr"] - 32) / 16 + 0.1 * d["unroll"]
        return max(0.1, t)

    auto = cost(feats(*space.realize(space.default())))

    def measure(batch):
        out = []
        for key, cand in batch:
            from polyc.tune.space import Candidate, build
            c = Candidate.from_dict(cand)
            t = cost(feats(c, build(MM, c, tv)))
            out.append(Measurement(key, True, t, t / auto, 0.0, (t,)))
        return out

    return measure, feats


def _run(seed, trials=14):
    space = Space(MM, target_view(), 4)
    measure, feats = _fake(space)
    return run_search(space, measure, feats, seconds=1e9, seed=seed, trials=trials, batch=4)


def test_search_is_deterministic_for_a_seed():
    a, b, c = _run(0, 8), _run(0, 8), _run(1, 8)
    assert a.proposed == b.proposed
    assert a.proposed != c.proposed
    assert [t.measurement.ratio for t in a.trials.values()] == [t.measurement.ratio for t in b.trials.values()]


def test_search_improves_on_auto_and_the_seeds_come_first():
    state = _run(0, trials=16)
    first = list(state.trials.values())[:2]
    assert [t.candidate.seed for t in first] == ["auto", "source"]
    best = state.best()
    assert best.measurement.ratio < 1.0 and best.candidate.steps[0][0] == "pack"
    assert state.curve == sorted(state.curve) and state.curve[-1][2] == best.measurement.ratio


def test_cost_model_learns_a_ranking():
    X = [[float(i), float(i % 3)] for i in range(20)]
    y = [math.log(1 + x[0]) for x in X]
    m = CostModel(seed=0).fit(X, y)
    assert m.trained
    p = m.predict([[1.0, 0.0], [18.0, 0.0]])
    assert p[0] < p[1]
    assert list(CostModel(seed=0).fit(X, y).predict(X)) == list(m.predict(X))   # deterministic


def test_a_batch_is_not_started_when_it_would_overrun_the_budget():
    import time
    space = Space(MM, target_view(), 4)
    measure, feats = _fake(space)

    def slow(batch):
        time.sleep(0.4)
        return measure(batch)

    state = run_search(space, slow, feats, seconds=1.0, seed=0, batch=2, reserve=lambda st: 0.3)
    # The first batch (the seeds and one random genome) always runs; after it, 0.4 s + 0.4 s for
    # another batch + 0.3 s reserved exceed the second left: no second batch.
    assert len(state.trials) == 3
