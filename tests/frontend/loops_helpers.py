"""Shared check for loop-kernel tests: the kernel's own Python run (`kernel.reference`) is the oracle."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

import polyc as pc

#: (schedule, target) pairs every construct is checked under.
VARIANTS = ((None, "c"), ("auto", "c"), (None, "cuda-emu"))


def _copy(args: Mapping[str, Any]) -> dict:
    return {n: (v.copy() if isinstance(v, np.ndarray) else v) for n, v in args.items()}


def check_loops(k: Any, args: Mapping[str, Any], expected: Mapping[str, Any] = None, rtol: float = 1e-12) -> None:
    """Run `k` in Python (the reference) and compiled under every variant; arrays must agree.

    `expected` (name -> array), when given, is numpy's independent answer for the reference too."""
    ref = _copy(args)
    k.reference(**ref)
    if expected:
        for name, e in expected.items():
            np.testing.assert_allclose(ref[name], e, rtol=rtol, err_msg=f"reference {name}")
    for schedule, target in VARIANTS:
        got = _copy(args)
        pc.compile(k, schedule, target=target)(**got)
        for name, v in ref.items():
            if isinstance(v, np.ndarray):
                assert got[name].dtype == v.dtype, (schedule, target, name)
                np.testing.assert_allclose(got[name], v, rtol=rtol, err_msg=f"{schedule} {target} {name}")
