"""The learned cost model: features of a scheduled loop nest, and gradient-boosted trees on them.

Features are read from the *built schedule* (not from the genome), so records of other kernels
and other runs mean the same thing: tile sizes and their footprints against the Target's caches,
packing blocks and theirs, unroll factors, how many loops are parallel and vector, the iteration
count and the arithmetic intensity of the kernel at the tuned sizes.  The model predicts
log(time / time of auto); it is refitted after every batch of measurements and starts from the
records of earlier runs (this kernel first, then any kernel on the same Target).

LightGBM (`pip install polyc[tune]`) is used when present; otherwise a ridge regression on the
same features (deterministic, numpy only) stands in.
"""
from __future__ import annotations

import math
from typing import Any, List, Mapping, Sequence

import numpy as np

from ..schedule.state import LoopKind
from .tiles import tile_sizes

FEATURES = ("seed_auto", "tile0", "tile1", "tile2", "tile3", "tile_l1", "tile_l2", "tile_l3", "packed", "mr",
            "nr", "kc", "mc", "nc", "pack_l1", "pack_l2", "pack_l3", "unroll", "jam", "parallel", "vector",
            "loops", "log_iters", "intensity", "elem_bytes", "cores")


def _log2(v: float) -> float:
    return math.log2(v) if v and v > 0 else -1.0


def features(kernel: Any, schedule: Any, seed: str, sizes: Mapping[str, int], elem: int, target: Any) -> List[float]:
    """The feature vector (order: `FEATURES`) of `schedule` at `sizes`."""
    tiles = list(tile_sizes(schedule).values())[:4]
    tile_bytes = float(np.prod(tiles)) * elem if tiles else 0.0
    plans = schedule.packing
    lanes = max(1, target.vector_bytes // elem)
    if plans:
        p = plans[-1]
        mr, nr, kc, mc, nc = p.mr, p.nv * lanes, p.kc, p.mc, p.nc
        pack = (mr * kc + kc * nr) * elem, mc * kc * elem, kc * nc * elem
    else:
        mr = nr = kc = mc = nc = 0
        pack = (0, 0, 0)
    dims = [d for d in schedule.dims if d.name is not None]
    unroll = max([d.unroll.hint for d in dims if d.unroll.hint] or [0])
    jam = sum(1 for d in dims if d.unroll.is_full)
    program = kernel.program
    volume = 1.0
    for v in sizes.values():
        volume *= max(1, v)
    data = 0.0
    for t in program.tensors:
        try:
            data += float(np.prod([max(1, int(e.evaluate(dict(sizes)))) for e in (t.shape or ())]))
        except (KeyError, TypeError, ValueError):
            continue
    row = [1.0 if seed == "auto" else 0.0] + [_log2(x) for x in tiles] + [-1.0] * (4 - len(tiles))
    row += [tile_bytes / target.l1, tile_bytes / target.l2, tile_bytes / max(1, target.l3)]
    row += [1.0 if plans else 0.0, mr, nr, _log2(kc), _log2(mc), _log2(nc)]
    row += [pack[0] / target.l1, pack[1] / target.l2, pack[2] / max(1, target.l3)]
    row += [unroll, jam, sum(LoopKind.PARALLEL in d.kinds for d in dims), sum(LoopKind.VECTORIZED in d.kinds for d in dims), len(dims)]
    row += [_log2(volume), _log2(volume) - _log2(max(1.0, data)), elem, target.cores]
    return [float(x) for x in row]


class CostModel:
    """Predicts log(time / auto time) from `features`; `fit` on everything measured so far."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.booster: Any = None
        self.ridge: Any = None
        self.n = 0

    @staticmethod
    def available() -> bool:
        try:
            import lightgbm  # noqa: F401
        except ImportError:
            return False
        return True

    def fit(self, X: Sequence[Sequence[float]], y: Sequence[float]) -> "CostModel":
        X_ = np.asarray(X, dtype=float)
        y_ = np.asarray(y, dtype=float)
        self.n = len(y_)
        if self.n < 4:
            return self
        if self.available():
            import lightgbm
            params = {"objective": "regression", "learning_rate": 0.1, "num_leaves": 8, "min_data_in_leaf": 2,
                      "min_data_in_bin": 1, "seed": self.seed, "deterministic": True, "force_row_wise": True,
                      "num_threads": 1, "verbose": -1}
            self.booster = lightgbm.train(params, lightgbm.Dataset(X_, y_, params={"verbose": -1}),
                                          num_boost_round=80)
        else:
            mu, sd = X_.mean(axis=0), X_.std(axis=0) + 1e-9
            Z = np.hstack([(X_ - mu) / sd, np.ones((len(X_), 1))])
            w = np.linalg.solve(Z.T @ Z + 1.0 * np.eye(Z.shape[1]), Z.T @ y_)
            self.ridge = (mu, sd, w)
        return self

    @property
    def trained(self) -> bool:
        return self.booster is not None or self.ridge is not None

    def predict(self, X: Sequence[Sequence[float]]) -> np.ndarray:
        X_ = np.asarray(X, dtype=float)
        if self.booster is not None:
            return np.asarray(self.booster.predict(X_), dtype=float)
        if self.ridge is not None:
            mu, sd, w = self.ridge
            return np.hstack([(X_ - mu) / sd, np.ones((len(X_), 1))]) @ w
        return np.zeros(len(X_))
