"""Packed contractions that read their n-side factor in place (`polyc.codegen.c_packed_inplace`):
direct convolution, exact bit for bit like every packed code, across row tails, partial m panels,
k blocks, batches and threads."""
from __future__ import annotations

import numpy as np
import pytest

import kernels
import polyc as pc
from polyc.codegen.c_packed_inplace import INPLACE_KC
from polyc.schedule.packing_paths import reads_in_place
from polyc.schedule.packing import contraction_form, packing_plans

EXACT = ["-O3", "-march=native", "-ffp-contract=off"]
CONV = kernels.by_name("conv2d").kernel


def _in_place(text_or_kernel, statement="S1"):
    k = pc.kernel(text_or_kernel, name="probe") if isinstance(text_or_kernel, str) else text_or_kernel
    return reads_in_place(k.program.statement(statement), contraction_form(k.program, statement))


def test_only_sliding_windows_are_read_in_place():
    assert _in_place(CONV)
    assert _in_place("Y[n, f, w] +=! X[n, c, w + k] * K[f, c, k]")
    # A matrix product streams better from packed panels; a strided window has no unit-stride rows.
    assert not _in_place("C[i, j] +=! A[i, k] * B[k, j]")
    assert not _in_place("C[i, j] +=! A[i, k] * B[j, k]")
    assert not _in_place("Y[n, f, w] +=! X[n, c, 2 * w + k] * K[f, c, k]")


def _exact(kernel, sched, inputs):
    got = pc.compile(kernel, sched, flags=EXACT)(**{k: v.copy() for k, v in inputs.items()})
    want = pc.compile(kernel, flags=EXACT)(**{k: v.copy() for k, v in inputs.items()})
    np.testing.assert_array_equal(got, want)
    return got


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_direct_convolution_is_exact_across_every_edge(threads, dtype):
    sched = CONV.schedule().pack("S1")
    code = pc.codegen(CONV, sched, dtypes={"X": getattr(pc, dtype), "K": getattr(pc, dtype)})
    assert "_ukr_in(" in code and "read in place" in code and "_ukr_half_in(" in code
    rng = np.random.default_rng(3)
    plan = packing_plans(sched)["S1"]
    vector = plan.vector_bytes // (4 if dtype == "f32" else 8)
    lanes = plan.nv * vector   # one lane panel; tails of at most one vector run one vector wide
    cases = [
        dict(N=1, C=3, H=5, W=4, F=7, KH=3, KW=2),              # rows shorter than a lane panel: packed
        dict(N=2, C=4, H=6, W=lanes + 2, F=6, KH=3, KW=3),      # rows of exactly one panel
        dict(N=1, C=5, H=7, W=2 * lanes + 5, F=13, KH=2, KW=3),  # a tail panel, a partial m panel
        dict(N=1, C=31, H=5, W=lanes + 9, F=8, KH=3, KW=3),     # C*KH*KW = 279 > one k block
        dict(N=1, C=2, H=4, W=lanes + vector + 4, F=6, KH=1, KW=3),  # a tail wider than one vector
        # a tail of exactly one vector, read in place too: whole m panels store into Y directly,
        # the partial one (13 = 2 * 6 + 1) through the buffer
        dict(N=2, C=4, H=5, W=lanes + vector + 2, F=13, KH=3, KW=3),
        dict(N=1, C=3, H=4, W=lanes + vector + 1, F=12, KH=2, KW=2),  # whole m panels only
    ]
    assert 31 * 9 > INPLACE_KC
    lk = kernels.by_name("conv2d")
    for sizes in cases:
        inputs = lk.make_inputs(sizes, dtype, rng)
        got = _exact(CONV, sched, inputs)
        np.testing.assert_allclose(got, lk.reference(**inputs), rtol=1e-4 if dtype == "f32" else 1e-12,
                                   atol=1e-4 if dtype == "f32" else 1e-12)


def test_auto_convolution_reads_in_place_and_matches_the_reference():
    lk = kernels.by_name("conv2d")
    f = pc.compile(CONV, schedule="auto")
    inputs = lk.make_inputs(lk.sizes["typical"], "f32", np.random.default_rng(5))
    np.testing.assert_allclose(f(**inputs), lk.reference(**inputs), rtol=1e-4, atol=1e-4)
    assert "_ukr_in(" in pc.codegen(CONV, "auto", dtypes={"X": pc.f32, "K": pc.f32})


def test_conv1d_with_a_scalar_on_the_weights_is_exact():
    k = pc.kernel("Y[n, f, w] += alpha * K[f, c, t] * X[n, c, w + t]", name="conv1d_scaled",
                  X=pc.f64["N", "C", "W"], K=pc.f64["F", "C", "T"], Y=pc.f64["N", "F", "W - T + 1"])
    assert _in_place(k, "S0")
    rng = np.random.default_rng(9)
    x, w, y = rng.random((2, 5, 40)), rng.random((9, 5, 4)), rng.random((2, 9, 37))
    got = pc.compile(k, k.schedule().pack("S0"), flags=EXACT)(X=x, K=w, Y=y.copy(), alpha=0.5)
    want = pc.compile(k, flags=EXACT)(X=x, K=w, Y=y.copy(), alpha=0.5)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, y + 0.5 * np.einsum("fct,ncwt->nfw", w,
                                                         np.lib.stride_tricks.sliding_window_view(x, 4, axis=2)),
                               rtol=1e-12)


WEIGHT_GRAD = pc.kernel("Kg[f, c, kh, kw] +=! Yg[n, f, h, w] * X[n, c, h + kh, w + kw]", name="conv_weight_grad",
                        X=pc.f64["N", "C", "H", "W"], Yg=pc.f64["N", "F", "H - KH + 1", "W - KW + 1"],
                        Kg=pc.f64["F", "C", "KH", "KW"])


def test_a_window_packed_as_lanes_is_read_along_the_longer_loop(threads):
    """A convolution's weight gradient packs the input window `X[n, c, h + kh, w + kw]` as lanes
    (c, kh, kw) over k (n, h, w); it is laid out along kw and along w, and the packing reads it
    along whichever runs longer at these sizes (`c_packed._pack_n_side`): both ways exact."""
    sched = WEIGHT_GRAD.schedule().pack("S1")
    code = pc.codegen(WEIGHT_GRAD, sched)
    assert "each lane read along k" in code and "groups of panels" in code
    rng = np.random.default_rng(11)
    for sizes in (dict(N=2, C=5, H=20, W=21, F=7, KH=3, KW=3),   # runs of 19 along w: lane by lane
                  dict(N=1, C=3, H=6, W=5, F=4, KH=2, KW=4),     # runs of 2 along w, 4 along kw
                  dict(N=1, C=7, H=9, W=9, F=13, KH=1, KW=1)):   # 1 x 1: both runs of one
        N, C, H, W, F, KH, KW = (sizes[k] for k in "N C H W F KH KW".split())
        x, yg = rng.standard_normal((N, C, H, W)), rng.standard_normal((N, F, H - KH + 1, W - KW + 1))
        got = _exact(WEIGHT_GRAD, sched, dict(X=x, Yg=yg))
        want = np.einsum("nfhw,nchwpq->fcpq", yg, np.lib.stride_tricks.sliding_window_view(x, (KH, KW), axis=(2, 3)))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
