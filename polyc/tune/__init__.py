"""Search-based autotuning (`pc.tune`): measured search over a space generated from the primitive
registry and the Target, guided by a learned cost model, with records that persist.

    result = pc.tune(mm, {"I": 1024, "J": 1024, "K": 1024}, dtype="f32", seconds=60)
    result.schedule                                # the best proven-legal Schedule found
    result.curve, result.table()                   # best time vs seconds; every trial vs auto
    f = pc.compile(mm, schedule="tuned")           # the best record, re-proved (else "auto" + TuningWarning)

Modules: `space` (genes and candidates), `search` (evolution + cost model), `model` (features and
gradient-boosted trees), `measure` (worker processes, interleaved timing), `executors` (local or
Ray), `records` (SQLite, JSON lines), `registry_view` (the one adapter onto the registry and the
Target).  `pc.tune` is this module, callable; `polyc.tune.tune` is the same function.  The first
tuner — `tune(kernel, A=a, B=b)` with keyword arrays, timing a few auto variants in this process —
still answers that call form (see `legacy`).
"""
from __future__ import annotations

import sys
import types
from typing import Any, Mapping, Optional

from .legacy import LegacyTuneResult, candidates, tune_variants
from .records import Records, RecordKey
from .tuner import TuneResult, describe, tuned_schedule
from ..api import NAMED_SCHEDULES

NAMED_SCHEDULES["tuned"] = tuned_schedule   # pc.compile(k, schedule="tuned")

__all__ = ["tune", "TuneResult", "Records", "RecordKey", "tuned_schedule", "describe", "candidates",
           "LegacyTuneResult", "tune_variants"]


def tune(kernel: Any, inputs_or_sizes: Optional[Mapping[str, Any]] = None, /, *args: Any, repeat: Optional[int] = None,
         options: Any = None, **kwargs: Any) -> Any:
    """`tune(kernel, inputs or sizes, *, target=, seconds=60, seed=0, executor=None, db=None, ...)`:
    see `polyc.tune.tuner.tune`.  Called with keyword arrays only (`tune(k, A=a, repeat=1)`), it is
    the first tuner (`legacy.tune_variants`)."""
    from . import tuner
    import numpy as np
    if inputs_or_sizes is None and (repeat is not None or options is not None
                                    or any(isinstance(v, np.ndarray) for v in kwargs.values())):
        return tune_variants(kernel, repeat=3 if repeat is None else repeat, options=options, **kwargs)
    return tuner.tune(kernel, inputs_or_sizes, *args, **kwargs)


class _CallableModule(types.ModuleType):
    """`pc.tune(...)` calls `tune`; `pc.tune.Records` etc. stay module attributes."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return tune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
