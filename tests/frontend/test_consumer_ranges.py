"""A definition whose own reads bound none of its indices (Halide's `kernel[x] = exp(-x * x)`, a
clamped read) covers what later statements read of it, as Halide computes a function where its
consumers need it; without readers it is still refused."""
import numpy as np
import pytest

import polyc as pc
from polyc.errors import OutOfBoundsError, ShapeInferenceError


def test_a_table_takes_its_extent_from_its_readers():
    k = pc.kernel("""
        w[x] = exp(-x * x / 2.0)
        B[i] = w[0] * A[i] + w[1] * A[max(i - 1, 0)] + w[2] * A[max(i - 2, 0)]
    """, A=pc.f64["N"], name="lut_blur", outputs=["B"])
    assert dict((t.name, str(t.shape[0])) for t in k.program.tensors)["w"] == "3"
    a = np.random.default_rng(0).standard_normal(6)
    w = np.exp(-np.arange(3) ** 2 / 2.0)
    i = np.arange(6)
    want = w[0] * a + w[1] * a[np.maximum(i - 1, 0)] + w[2] * a[np.maximum(i - 2, 0)]
    for schedule in (None, "auto"):
        np.testing.assert_allclose(pc.compile(k, schedule)(A=a), want, rtol=1e-12)
    np.testing.assert_allclose(k.reference(A=a), want, rtol=1e-12)


def test_a_chain_of_definitions_resolves_from_the_last_reader_back():
    k = pc.kernel("""
        r[x] = x * 0.5
        s[x] = r[x] + r[x + 1]
        C[i] = s[i + 1] * A[i]
    """, A=pc.f64["N"], name="ramp", outputs=["C"])
    shapes = {t.name: str(t.shape[0]) for t in k.program.tensors}
    assert shapes["s"] == "N + 1" and shapes["r"] == "N + 2"
    a = np.arange(1.0, 6.0)
    want = ((np.arange(5) + 1) * 0.5 + (np.arange(5) + 2) * 0.5) * a
    np.testing.assert_allclose(pc.compile(k)(A=a), want)


def test_without_readers_a_definition_is_still_refused():
    with pytest.raises(ShapeInferenceError, match="range of index 'x'"):
        pc.kernel("w[x] = exp(-x * x / 2.0)", name="lonely")


def test_an_intermediate_read_below_zero_is_stored_shifted():
    """`g[i - 1]` at i = 0 needs g[-1]: the intermediate covers -1..N-1, stored from index 0."""
    k = pc.kernel("""
        g[x] = A[min(max(x, 0), N - 1)] * 2.0
        B[i] = g[i - 1] + g[i]
    """, A=pc.f64["N"], B=pc.f64["N"], name="below_zero", outputs=["B"])
    assert {t.name: str(t.shape[0]) for t in k.program.tensors}["g"] == "N + 1"
    a = np.arange(1.0, 6.0)
    want = 2 * a[np.maximum(np.arange(5) - 1, 0)] + 2 * a
    for schedule in (None, "auto"):
        np.testing.assert_allclose(pc.compile(k, schedule)(A=a), want)
    np.testing.assert_allclose(pc.compile(k, target="cuda-emu")(A=a), want)
    np.testing.assert_allclose(k.reference(A=a), want)


def test_an_output_read_below_zero_is_refused():
    """A returned tensor keeps the user's indices: no shift, so its reader is out of bounds."""
    with pytest.raises((OutOfBoundsError, ShapeInferenceError)):
        pc.kernel("""
            g[x] = A[min(max(x, 0), N - 1)]
            B[i] = g[i - 1] + g[i]
        """, A=pc.f64["N"], B=pc.f64["N"], name="below_zero_out", outputs=["B", "g"])


@pytest.mark.parametrize("pad", ["KW / 2", "KW // 2", "(KW - 1) / 2", "KW"])
def test_a_padded_producer_starts_below_zero_by_a_floor_of_a_size(pad):
    # Halide's "same" convolution (apps/depthwise_separable_conv): the producer's region starts at
    # -floor(KW / 2), a size computed at call time; its storage is shifted by it
    k = pc.kernel(f"""
        ib[x] = a[min(max(x, 0), W - 1)]
        o[x] +=! f[rx] * ib[x + rx - {pad}]
    """, outputs=["o"], a=pc.f64["W"], f=pc.f64["KW"], o=pc.f64["W"])
    rng = np.random.default_rng(1)
    for width, taps in ((7, 3), (9, 5), (4, 4), (5, 1)):     # one tap: floor((KW - 1) / 2) = 0
        a, f = rng.standard_normal(width), rng.standard_normal(taps)
        shift = taps if pad == "KW" else (taps // 2 if "-" not in pad else (taps - 1) // 2)
        want = np.array([sum(f[r] * a[min(max(x + r - shift, 0), width - 1)] for r in range(taps))
                         for x in range(width)])
        for target, schedule in (("c", None), ("c", "auto"), ("cuda-emu", None)):
            np.testing.assert_allclose(pc.compile(k, schedule, target=target)(a=a, f=f), want, rtol=1e-12)
        np.testing.assert_allclose(k.reference(a=a, f=f), want, rtol=1e-12)


@pytest.mark.parametrize("kw, kh", [(3, 3), (3, 1), (1, 3), (1, 1), (5, 2)])
def test_a_two_dimensional_padded_producer_takes_one_wide_filters(kw, kh):
    # floor(1 / 2) = 0 is a fine shift; only the sizes a call passes must be at least 1
    k = pc.kernel("""
        ib[x, y] = a[min(max(x, 0), W - 1), min(max(y, 0), H - 1)]
        o[x, y] +=! f[rx, ry] * ib[x + rx - KW / 2, y + ry - KH / 2]
    """, outputs=["o"], a=pc.f64["W", "H"], f=pc.f64["KW", "KH"], o=pc.f64["W", "H"])
    rng = np.random.default_rng(2)
    a, f = rng.standard_normal((5, 6)), rng.standard_normal((kw, kh))
    want = np.array([[sum(f[r, s] * a[min(max(x + r - kw // 2, 0), 4), min(max(y + s - kh // 2, 0), 5)]
                          for r in range(kw) for s in range(kh)) for y in range(6)] for x in range(5)])
    np.testing.assert_allclose(pc.compile(k)(a=a, f=f), want, rtol=1e-12)
