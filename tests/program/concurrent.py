"""Calling one program from several Python threads at once (its buffers are kept per thread)."""
from __future__ import annotations

import threading
from typing import Any, List, Mapping, Sequence, Tuple

import numpy as np


def mismatches_from_threads(prog: Any, cases: Sequence[Tuple[Mapping[str, Any], Any]], threads: int = 4,
                            repeats: int = 5, **tol: float) -> List[str]:
    """Run `prog` from `threads` threads at once, thread k calling it `repeats` times on
    `cases[k % len(cases)]` (inputs, expected result); each result that is not close to its
    expected one (`np.testing.assert_allclose` with `tol`), as a message naming its thread."""
    found: List[str] = []

    def run(k: int) -> None:
        inputs, expected = cases[k % len(cases)]
        try:
            for _ in range(repeats):
                np.testing.assert_allclose(prog(**inputs), expected, **tol)
        except AssertionError as e:          # pragma: no cover - reported by the caller
            found.append(f"thread {k}: {e}")

    workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return found
