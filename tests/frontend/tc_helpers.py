"""Shared check for the Tensor Comprehensions idiom tests: one kernel, numpy's answer, every target."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

import polyc as pc

#: (schedule, target) pairs every construct is checked under.
VARIANTS = ((None, "c"), ("auto", "c"), (None, "cuda-emu"))


def check_all(k: Any, args: Mapping[str, Any], expected: Any, rtol: float = 1e-6) -> None:
    """Compile `k` under every variant, call it on copies of `args`, compare with `expected`."""
    for schedule, target in VARIANTS:
        f = pc.compile(k, schedule, target=target)
        got = f(**{n: (v.copy() if isinstance(v, np.ndarray) else v) for n, v in args.items()})
        if isinstance(expected, dict):
            assert isinstance(got, dict) and set(got) == set(expected), (schedule, target, got)
            for name, e in expected.items():
                np.testing.assert_allclose(got[name], e, rtol=rtol, err_msg=f"{schedule} {target} {name}")
        else:
            assert got is not None, f"{schedule} {target}: nothing returned"
            np.testing.assert_allclose(got, expected, rtol=rtol, err_msg=f"{schedule} {target}")
