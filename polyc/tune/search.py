"""Evolutionary search guided by the learned cost model.

Generation 0 measures the seeds (`"auto"`, source order) and random genomes.  Every later
generation breeds children from the best genomes measured so far (mutation of single genes,
crossover of whole tile / pack groups), realises them (refused ones are counted and dropped),
ranks them with the cost model refitted on every measurement (plus earlier records) and measures
the most promising few, plus one random child for exploration.  Every random choice comes from
one `numpy` generator seeded with `seed`, so a run is reproducible given the same measurements.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import IslBudgetError, PolycError
from .measure import Measurement
from .model import CostModel
from .space import Candidate, Space

_REFUSALS = (PolycError, IslBudgetError)


@dataclass(frozen=True)
class Trial:
    candidate: Candidate
    measurement: Measurement
    features: Tuple[float, ...]
    schedule_json: str
    elapsed: float                      # seconds since the search started
    resumed: bool = False               # read from the records, not measured in this run


@dataclass
class SearchState:
    trials: Dict[str, Trial] = field(default_factory=dict)
    genomes: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    curve: List[Tuple[float, float, float]] = field(default_factory=list)   # (s, best time, best ratio)
    refused: int = 0
    proposed: List[str] = field(default_factory=list)                     # candidate keys, in order
    verified: set = field(default_factory=set)   # keys measured again at the end (best is among them)

    def best(self) -> Optional[Trial]:
        ok = [t for t in self.trials.values() if t.measurement.ok and (not self.verified or t.candidate.key()
                                                                        in self.verified)]
        return min(ok, key=lambda t: (t.measurement.ratio, t.measurement.seconds)) if ok else None


MeasureFn = Callable[[Sequence[Tuple[str, Dict[str, Any]]]], List[Measurement]]
FeatureFn = Callable[[Candidate, Any], List[float]]


def run_search(space: Space, measure: MeasureFn, feature_of: FeatureFn, *, seconds: float, seed: int = 0,
               trials: Optional[int] = None, batch: int = 4, state: Optional[SearchState] = None,
               warm: Tuple[Sequence[Sequence[float]], Sequence[float]] = ((), ()),
               on_trial: Optional[Callable[[Trial], None]] = None,
               reserve: Callable[[SearchState], float] = lambda state: 0.0) -> SearchState:
    """Search until `seconds` have passed or `trials` candidates were measured in this run.

    A batch is only started when the last batch's duration plus `reserve(state)` (time kept for
    what follows the search: re-measuring the finalists) still fits the budget."""
    rng = np.random.default_rng(seed)
    state = state or SearchState()
    model = CostModel(seed)
    start = time.monotonic()
    measured_now = 0
    generation = 0
    last_batch = 0.0
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= seconds or (trials is not None and measured_now >= trials):
            break
        if generation and trials is None and elapsed + last_batch + reserve(state) > seconds:
            break
        if generation == 0:
            genomes = [space.default(), space.source()] + [space.random(rng) for _ in range(batch * 2)]
            proposals = _realise(space, state, genomes, batch + 1)
        else:
            proposals = _breed(space, state, model, rng, batch, feature_of)
        if not proposals:
            if generation > 50:
                break
            generation += 1
            continue
        if trials is not None:
            proposals = proposals[:max(1, trials - measured_now)]
        began = time.monotonic()
        results = measure([(c.key(), c.to_dict()) for c, _, _ in proposals])
        last_batch = time.monotonic() - began
        by_key = {m.key: m for m in results}
        now = time.monotonic() - start
        for cand, genome, sched in proposals:
            m = by_key.get(cand.key())
            if m is None:
                continue
            trial = Trial(cand, m, tuple(feature_of(cand, sched)), sched.to_json(), now)
            state.trials[cand.key()] = trial
            state.genomes[cand.key()] = genome
            state.proposed.append(cand.key())
            measured_now += 1
            if on_trial is not None:
                on_trial(trial)
        best = state.best()
        if best is not None:
            state.curve.append((now, best.measurement.seconds, best.measurement.ratio))
        _fit(model, state, warm)
        generation += 1
    return state


def _realise(space: Space, state: SearchState, genomes: Sequence[Dict[str, Any]], limit: int) -> list:
    out, seen = [], set()
    for g in genomes:
        before = space.refused
        try:
            cand, sched = space.realize(g)
        except _REFUSALS:
            space.refused += 1
            state.refused += space.refused - before
            continue
        state.refused += space.refused - before
        key = cand.key()
        if key in state.trials or key in seen:
            continue
        seen.add(key)
        out.append((cand, g, sched))
        if len(out) >= limit:
            break
    return out


def _fit(model: CostModel, state: SearchState, warm) -> None:
    """Fit the cost model on this run's measurements and the warm start's, all with the features
    of this run (rows of another length, from records of another polyc, are left out)."""
    X = [list(x) for x in warm[0]]
    y = list(warm[1])
    for t in state.trials.values():
        if t.measurement.ok and math.isfinite(t.measurement.ratio) and t.measurement.ratio > 0:
            X.append(list(t.features))
            y.append(math.log(t.measurement.ratio))
    fresh = [len(t.features) for t in state.trials.values() if not t.resumed and t.features]
    width = fresh[-1] if fresh else (len(X[-1]) if X else 0)
    kept = [(x, v) for x, v in zip(X, y) if len(x) == width]
    model.fit([x for x, _ in kept], [v for _, v in kept])


def _breed(space: Space, state: SearchState, model: CostModel, rng: Any, batch: int, feature_of: FeatureFn) -> list:
    ranked = sorted((t for t in state.trials.values() if t.measurement.ok and t.candidate.key() in state.genomes),
                    key=lambda t: t.measurement.ratio)
    parents = [state.genomes[t.candidate.key()] for t in ranked[:5]] or [space.default()]
    children = []
    for _ in range(40):
        a = parents[int(rng.integers(len(parents)))]
        if len(parents) > 1 and rng.random() < 0.4:
            b = parents[int(rng.integers(len(parents)))]
            child = space.mutate(space.crossover(a, b, rng), rng, rate=0.1)
        else:
            child = space.mutate(a, rng)
        children.append(child)
    pool = _realise(space, state, children, 40)
    if not pool:
        return []
    if not model.trained:
        order = list(rng.permutation(len(pool)))
    else:
        scores = model.predict([feature_of(c, s) for c, _, s in pool])
        order = list(np.argsort(scores, kind="stable"))
    chosen = [pool[i] for i in order[:max(1, batch - 1)]]
    rest = [pool[i] for i in order[max(1, batch - 1):]]
    if rest:
        chosen.append(rest[int(rng.integers(len(rest)))])   # exploration
    return chosen
