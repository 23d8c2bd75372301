"""`max`/`min` propagate NaN as numpy's `maximum`/`minimum` do, in every back end.

C's `fmax` (what polyc printed before) drops NaN: a row `[1, nan, 3]` reduced with `max=!` gave 3
where numpy and `kernel.reference` give nan.  `np.fmax`/`np.fmin` in a loop kernel keep their
NaN-ignoring meaning.
"""
# ruff: noqa: F821
# flake8: noqa: F821
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc

NAN = np.nan
ROWS = np.array([[1, NAN, 3], [4, 5, 6], [NAN, -np.inf, 2], [-np.inf, -np.inf, -np.inf],
                 [np.inf, NAN, 1], [2, 7, NAN]])


def _same(got, expected):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
@pytest.mark.parametrize("op, ufunc", [("max", np.maximum), ("min", np.minimum)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_einsum_row_reduction_propagates_nan(target, op, ufunc, dtype):
    k = pc.kernel(f"m[i] {op}=! M[i, j]")
    a = ROWS.astype(dtype)
    expected = ufunc.reduce(a, axis=1)
    _same(pc.compile(k, target=target)(M=a), expected)
    _same(k.reference(M=a), expected)


@pytest.mark.parametrize("schedule", [None, "auto"])
def test_einsum_column_reduction_and_calls_propagate_nan(schedule):
    k = pc.kernel("m[j] max=! M[i, j]\nC[i, j] = min(M[i, j], 2.5) + max(0.0, M[i, j])")
    a = ROWS.astype(np.float32)
    f = pc.compile(k, schedule=schedule) if schedule else pc.compile(k)
    out = f(M=a)
    _same(out["m"], np.maximum.reduce(a, axis=0))
    _same(out["C"], np.minimum(a, 2.5) + np.maximum(0.0, a))
    ref = k.reference(M=a)
    _same(ref["C"], out["C"])


def test_cuda_source_uses_nan_propagating_helpers():
    k = pc.kernel("m[i] max=! M[i, j]\nC[i, j] = min(M[i, j], 1.0)")
    src = pc.codegen(k, k.schedule(), target="cuda")
    assert "fmax" not in src and "fmin" not in src.replace("pc_min_", "")
    assert "pc_max_f32(" in src and "pc_min_f32(" in src


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_max_identity_is_the_type_minimum(dtype, target):
    k = pc.kernel("m[i] max=! M[i, j]\nn[i] min=! M[i, j]")
    info = np.iinfo(dtype)
    a = np.array([[-5, -7], [info.min, info.min], [info.max, 3]], dtype=dtype)
    f = pc.compile(k, target=target)
    out = f(M=a)
    assert out["m"].dtype == dtype
    _same(out["m"], a.max(axis=1))
    _same(out["n"], a.min(axis=1))
    ref = k.reference(M=a)
    _same(ref["m"], a.max(axis=1))
    _same(ref["n"], a.min(axis=1))
    if target == "c":
        assert ("INT32_MIN" if dtype == np.int32 else "INT64_MIN") in f.source


def loop_max(A: pc.f64["N", "M"], m: pc.f64["N"], c: pc.f64["N", "M"]):
    for i in range(N):
        m[i] = A[i, 0]
        for j in range(1, M):
            m[i] = np.maximum(m[i], A[i, j])
    for i in range(N):
        for j in range(M):
            c[i, j] = max(A[i, j], 0.5) - np.minimum(A[i, j], -0.5)


def loop_fmax(A: pc.f64["N", "M"], m: pc.f64["N"]):
    for i in range(N):
        m[i] = -np.inf
        for j in range(M):
            m[i] = np.fmax(m[i], A[i, j])


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_loop_kernel_max_min_propagate_nan_like_the_reference(target):
    k = pc.kernel(loop_max)
    a = ROWS.astype(np.float64)
    m, c = np.zeros(len(a)), np.zeros_like(a)
    m2, c2 = m.copy(), c.copy()
    pc.compile(k, target=target)(A=a, m=m, c=c)
    with np.errstate(invalid="ignore"):
        k.reference(A=a, m=m2, c=c2)
    _same(m, m2)
    _same(m, np.maximum.reduce(a, axis=1))
    # builtin max(x, 0.5) with x NaN first is NaN in Python too
    _same(c, c2)


def test_loop_kernel_fmax_still_ignores_nan():
    k = pc.kernel(loop_fmax)
    a = ROWS.astype(np.float64)
    m, m2 = np.zeros(len(a)), np.zeros(len(a))
    pc.compile(k)(A=a, m=m)
    k.reference(A=a, m=m2)
    _same(m, np.fmax.reduce(a, axis=1))
    _same(m, m2)
