"""Size specialisation: one compiled variant per size class (sizes up to SMALL_SIZE fixed)."""
from __future__ import annotations

import warnings

import numpy as np

import kernels
import polyc as pc
from polyc.runtime.ckernel import SMALL_SIZE


def _conv():
    return kernels.by_name("conv2d")


def _call(f, lk, sizes, seed=0):
    inputs = lk.make_inputs(sizes, "f64", np.random.default_rng(seed))
    np.testing.assert_allclose(f(**inputs), lk.expected(inputs), rtol=1e-12, atol=1e-12)


def test_auto_compiles_small_sizes_in_as_constants():
    lk = _conv()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = pc.compile(lk.kernel, schedule="auto")
    _call(f, lk, dict(N=1, C=20, H=40, W=40, F=24, KH=3, KW=3))
    src = f.source
    assert "const int64_t n_KH = 3;" in src and "const int64_t n_N = 1;" in src
    # isl drops the loop over the single batch image; the packed code must still be used.
    assert "polyc_conv2d_S1_packed" in src
    assert "const int64_t n_C =" not in src          # 20 > SMALL_SIZE: stays symbolic
    assert SMALL_SIZE < 20


def test_one_variant_per_size_class():
    lk = _conv()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = pc.compile(lk.kernel, schedule="auto")
    big = dict(N=1, C=17, H=30, W=33, F=18, KH=3, KW=3)
    _call(f, lk, big)
    _call(f, lk, dict(big, C=19, H=31, W=40))           # same class: only large sizes differ
    assert len(f._variants) == 1
    _call(f, lk, dict(big, KH=2, KW=5))                  # another window: another variant
    assert len(f._variants) == 2


def test_explicit_schedules_specialise_only_when_asked():
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_spec")
    a, b = np.random.default_rng(1).random((5, 7)), np.random.default_rng(2).random((7, 3))
    plain = pc.compile(mm)
    plain(A=a, B=b)
    assert "const int64_t n_I" not in plain.source
    fixed = pc.compile(mm, specialise=True)
    np.testing.assert_allclose(fixed(A=a, B=b), a @ b, rtol=1e-12)
    assert "const int64_t n_I = 5;" in fixed.source and "const int64_t n_K = 7;" in fixed.source
