"""The first tuner, kept for its callers: time a handful of variants of the auto schedule in
this process (`tune(kernel, A=a, B=b)`, keyword arrays).  `pc.tune` is the search-based tuner."""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .tiles import tile_sizes

__all__ = ["LegacyTuneResult", "tune_variants", "candidates"]


@dataclass
class LegacyTuneResult:
    schedule: Any
    label: str
    seconds: float
    trials: List[Tuple[str, float]] = field(default_factory=list)

    def __repr__(self) -> str:
        rows = "\n".join(f"  {t * 1e3:10.3f} ms  {label}" for label, t in sorted(self.trials, key=lambda x: x[1]))
        return f"<TuneResult best={self.label!r} ({self.seconds * 1e3:.3f} ms)\n{rows}>"


def _tile_loops(schedule) -> Dict[str, int]:
    """Tile sizes of an automatic schedule by loop name (see `tiles.tile_sizes`)."""
    return tile_sizes(schedule)


def candidates(kernel, scales=(0.5, 2.0)) -> List[Tuple[str, Any]]:
    """(label, schedule) pairs: the auto schedule and its variants (see the module docstring)."""
    from ..schedule.auto import auto_schedule
    out: List[Tuple[str, Any]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = auto_schedule(kernel)
        out.append(("auto", base))
        sizes = _tile_loops(base)
        for scale in scales:
            if sizes:
                scaled = {k: max(4, int(v * scale)) for k, v in sizes.items()}
                out.append((f"auto tiles x{scale:g}", auto_schedule(kernel, tile_sizes=scaled)))
        for rb in (True, False):
            out.append((f"auto register blocking {'on' if rb else 'off'}",
                        auto_schedule(kernel, register_blocking=rb)))
        out.append(("auto untiled", auto_schedule(kernel, tile=False)))
    out.append(("source order", kernel.schedule()))
    seen, unique = set(), []
    for label, s in out:
        key = (tuple(s.map_texts.items()), s.dims, tuple((p.statement, p.mr, p.nv, p.kc, p.mc, p.nc) for p in s.packing))
        if key not in seen:
            seen.add(key)
            unique.append((label, s))
    return unique


def _measure(f, inputs: Dict[str, Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
        t = time.perf_counter()
        f(**args)
        best = min(best, time.perf_counter() - t)
    return best


def tune_variants(kernel, repeat: int = 3, options: Optional[List[Tuple[str, Any]]] = None, **inputs: Any) -> LegacyTuneResult:
    """Compile and time every candidate on `inputs` (copied per call); return the fastest."""
    from ..api import compile as compile_kernel
    trials: List[Tuple[str, float]] = []
    best: Optional[Tuple[str, Any, float]] = None
    for label, sched in (options or candidates(kernel)):
        f = compile_kernel(kernel, sched)
        f(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()})  # warm-up
        t = _measure(f, inputs, repeat)
        trials.append((label, t))
        if best is None or t < best[2]:
            best = (label, sched, t)
    assert best is not None
    return LegacyTuneResult(best[1], best[0], best[2], trials)
