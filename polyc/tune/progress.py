"""A tqdm progress bar (terminal or Jupyter, via `tqdm.auto`) showing the best time so far."""
from __future__ import annotations

import time
from typing import Any, Optional


class Progress:
    def __init__(self, name: str, trials: Optional[int], seconds: float, enabled: bool = True):
        self.bar: Any = None
        self.start = time.monotonic()
        self.seconds = seconds
        if enabled:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=trials, desc=f"tuning {name}", unit="cand", leave=True)

    def update(self, trial: Any, best: Any) -> None:
        if self.bar is None:
            return
        self.bar.update(1)
        if best is not None:
            m = best.measurement
            self.bar.set_postfix(best=f"{m.seconds * 1e3:.3f} ms", vs_auto=f"{1 / m.ratio:.2f}x",
                                 left=f"{max(0.0, self.seconds - (time.monotonic() - self.start)):.0f} s")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
