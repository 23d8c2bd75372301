"""Alignment peeling (`polyc.codegen.c_align`): a vector loop that reads whole rows starts its
vector part on a cache line of its matrix; the peeled loop computes what the plain one does, for
every offset of the array in memory, rows shorter than the peel, `max=!` with NaN, and float64."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels.polybench.stencils import KERNELS as STENCILS
from kernels.linalg import matvec
from polyc.codegen import c_align


def _at_offset(a: np.ndarray, offset: int) -> np.ndarray:
    """A C-contiguous copy of `a` starting `offset` bytes past a cache line."""
    raw = np.empty(a.nbytes + 128, dtype=np.uint8)
    start = (-raw.ctypes.data % 64) + offset
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def test_a_reading_loop_over_whole_rows_is_peeled_and_others_are_not():
    f = pc.compile(matvec.kernel, schedule="auto")
    f(A=np.ones((64, 64), np.float32), x=np.ones(64, np.float32))
    assert "pc_align_peel(&t_A[" in f.source               # the matrix, not the vector
    copy = pc.compile(pc.kernel("B[i, j] = A[i, j] * 2.0"), schedule="auto")
    copy(A=np.ones((64, 64), np.float32))
    assert "pc_align_peel(&" not in copy.source            # it writes a row too
    lk = next(k for k in STENCILS if k.name == "jacobi-2d")
    tiled = pc.compile(lk.kernel, schedule="auto")
    tiled(**lk.make_inputs(dict(N=300, TSTEPS=40), "f64"))
    assert "pc_align_peel(&" not in tiled.source           # time tiles: rows inside tiles, written


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(37, 3), (19, 100), (8, 1000)])
def test_peeled_reductions_match_at_every_offset(dtype, shape):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape).astype(dtype)
    x = rng.standard_normal(shape[1]).astype(dtype)
    f = pc.compile(matvec.kernel, schedule="auto")
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for offset in range(0, 64, np.dtype(dtype).itemsize):
        got = f(A=_at_offset(a, offset), x=x)
        np.testing.assert_allclose(got, a @ x, rtol=rtol, atol=rtol * shape[1])


def test_a_row_max_sees_a_nan_in_the_peeled_part():
    k = pc.kernel("m[i] max=! X[i, j]")
    f = pc.compile(k, schedule="auto")
    x = np.arange(4 * 300, dtype=np.float32).reshape(4, 300)
    x[1, 2] = np.nan                                        # inside the peel for offsets 4..
    x[2, 299] = np.nan                                      # in the vector part
    for offset in (0, 4, 16, 52):
        got = f(X=_at_offset(x, offset))
        assert np.isnan(got[1]) and np.isnan(got[2])
        np.testing.assert_array_equal(got[[0, 3]], x[[0, 3]].max(axis=1))


def test_peeled_and_plain_code_agree(monkeypatch):
    """The peel moves where the vector part starts, nothing else: both sums hold every element
    (they differ by rounding only, as any reassociated sum)."""
    a = np.random.default_rng(2).standard_normal((16, 777)).astype(np.float32)
    x = np.ones(777, np.float32)
    peeled = pc.compile(matvec.kernel, schedule="auto")(A=_at_offset(a, 16), x=x)
    monkeypatch.setattr(c_align, "ENABLED", False)
    plain_kernel = pc.compile(matvec.kernel, schedule="auto")
    plain = plain_kernel(A=_at_offset(a, 16), x=x)
    assert "pc_align_peel(&" not in plain_kernel.source
    np.testing.assert_allclose(peeled, plain, rtol=1e-5, atol=1e-4)
