"""The Einstein reference interpreter enumerates a statement's points in chunks: results equal the
whole-domain evaluation in every case (reductions, assignments, guards, recurrences), and its
memory no longer grows with the size of the iteration box."""
import tracemalloc

import numpy as np
import pytest

import polyc as pc
from polyc.runtime import interpreter


@pytest.fixture(params=[1, 7, 1 << 20], ids=["chunk1", "chunk7", "whole"])
def chunk(request, monkeypatch):
    monkeypatch.setattr(interpreter, "POINTS_PER_CHUNK", request.param)
    return request.param


def test_matmul_in_chunks(chunk):
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 6)), rng.standard_normal((6, 4))
    np.testing.assert_allclose(k.reference(A=a, B=b), a @ b, rtol=1e-12)


def test_max_reduction_and_guarded_domain_in_chunks(chunk):
    k = pc.kernel("M[i] max=! A[i, j] where j in 1:J\nS[i] +=! A[i, j] * A[i, j]", name="rows",
                  outputs=["M", "S"])
    a = np.random.default_rng(1).standard_normal((4, 9))
    got = k.reference(A=a)
    np.testing.assert_array_equal(got["M"], a[:, 1:].max(axis=1))
    np.testing.assert_allclose(got["S"], (a * a).sum(axis=1), rtol=1e-12)


def test_recurrence_in_chunks(chunk):
    k = pc.kernel("B[i] = A[i]\nB[i] += B[i - 1] where i in 1:N", name="prefix", A=pc.f64["N"], B=pc.f64["N"])
    a = np.arange(1.0, 11.0)
    np.testing.assert_allclose(k.reference(A=a, B=np.zeros(10)), np.cumsum(a))


def test_memory_does_not_grow_with_the_box(monkeypatch):
    """96^3 points: one index grid per iterator over the whole box took ~20 MB (8 bytes x 3 x 884,736);
    in chunks of 4,096 points the interpreter's peak stays under 2 MB above its arrays."""
    monkeypatch.setattr(interpreter, "POINTS_PER_CHUNK", 4096)
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm")
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((96, 96)), rng.standard_normal((96, 96))
    k.reference(A=a, B=b)   # warm: model, typing and isl objects built once
    tracemalloc.start()
    try:
        got = k.reference(A=a, B=b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(got, a @ b, rtol=1e-10)
    assert peak < 2_000_000, f"peak {peak / 1e6:.1f} MB"
