"""pc.tune's public surface: argument errors are typed, sizes come from arrays, the old call form works."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.errors import TuneError
from polyc.tune.tuner import _sizes_and_dtype

MM = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="tune_api_mm")


def test_pc_tune_is_the_module_and_the_function():
    import polyc.tune
    assert pc.tune is polyc.tune and callable(pc.tune) and callable(polyc.tune.tune)
    assert "tune" in pc.__all__


@pytest.mark.parametrize("args, kwargs, text", [
    ((MM, None), {}, "sizes to tune for"),
    ((MM, {"I": 8, "J": 8, "K": 8}), {"seconds": -1}, "seconds"),
    ((MM, {"I": 8, "J": 8, "K": 8}), {"dtype": "f16"}, "dtype"),
    ((MM, {"I": 8, "J": 8, "K": 8}), {"executor": "slurm", "trials": 1}, "executor"),
    ((MM, {"I": "big"}), {}, "neither an array nor an integer"),
    (("C[i] = A[i]", {"I": 8}), {}, "kernel made by pc.kernel"),
    # checked before any worker starts: a bad count or size reached the workers as "no candidate
    # could be measured ()" or "a tuning worker could not load the kernel"
    ((MM, {"I": 8, "J": 8, "K": 8}), {"trials": -1}, "trials must be a positive int, not -1"),
    ((MM, {"I": 8, "J": 8, "K": 8}), {"trials": 2, "rounds": 0}, "rounds must be a positive int"),
    ((MM, {"I": 8, "J": 8, "K": 8}), {"trials": 2, "batch": 1.5}, "batch must be a positive int"),
    ((MM, {"I": -8, "J": 8, "K": 8}), {"trials": 2}, "sizes must be positive to measure anything, not I=-8"),
    ((MM, {"I": 8, "J": 8}), {"trials": 2}, "needs the size K"),
    ((MM, {"I": 8, "J": 8, "k": 8}), {"trials": 2}, "needs the size K .*; 'k' is not among them"),
])
def test_bad_arguments_are_typed_errors(args, kwargs, text, db):
    with pytest.raises(TuneError, match=text):
        pc.tune(*args, progress=False, **kwargs)


def test_sizes_and_dtype_come_from_the_arrays():
    a, b = np.zeros((12, 7), np.float32), np.zeros((7, 5), np.float32)
    assert _sizes_and_dtype(MM, {"A": a, "B": b}, None) == ({"I": 12, "K": 7, "J": 5}, "f32")
    assert _sizes_and_dtype(MM, {"I": 3, "J": 4, "K": 5}, "f64") == ({"I": 3, "J": 4, "K": 5}, "f64")


def test_the_first_tuners_call_form_still_works():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((20, 10)), rng.standard_normal((10, 30))
    result = pc.tune(MM, repeat=1, A=a, B=b)
    assert result.label in {label for label, _ in result.trials}
    np.testing.assert_allclose(pc.compile(MM, result.schedule)(A=a, B=b), a @ b, rtol=1e-10)
