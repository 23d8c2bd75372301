"""The benchmark harness places every contender's arrays alike (`_harness.placed`): a ratio
between two workers must measure their code, not where numpy's allocator put the arrays."""
from __future__ import annotations

import numpy as np

from benchmarks import _harness as H


def test_copies_are_equal_contiguous_and_placed_at_staggered_page_offsets():
    rng = np.random.default_rng(0)
    inputs = {"A": rng.random((37, 5)), "n": 7, "B": rng.random(100).astype(np.float32)[::2],
              "C": np.arange(12, dtype=np.int32), "D": rng.random(3), "E": rng.random(9)}
    out = H.copied(inputs)
    assert out["n"] == 7
    arrays = [k for k, v in inputs.items() if isinstance(v, np.ndarray)]
    for index, name in enumerate(arrays):
        got = out[name]
        np.testing.assert_array_equal(got, inputs[name])
        assert got.dtype == inputs[name].dtype and got.flags.c_contiguous
        assert got.ctypes.data % 4096 == (index % 4) * H.PLACEMENT_STAGGER + (index // 4) * 64
        assert not np.shares_memory(got, inputs[name])


def test_refilled_restores_written_arrays_in_their_placed_copies():
    class _Statement:
        class target:
            tensor = "y"

    class _Kernel:
        class program:
            statements = [_Statement]

    inputs = {"x": np.ones(8), "y": np.zeros(8)}
    work, prepare = H.refilled(inputs, _Kernel)
    address = work["y"].ctypes.data
    work["y"][:] = 5.0
    prepare()
    assert work["y"].ctypes.data == address and not work["y"].any()
