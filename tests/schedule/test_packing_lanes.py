"""Packed products whose m-side factor is read in place through offsets
(`polyc.codegen.c_packed_arows`: a pointer per tile row, an offset per k position), and `pack`'s
`lanes` choice, which turns a convolution's weight gradient round so that its big factor is that
m side.  Exact bit for bit against the source order (same products, same order); an offset table
that skipped a position, or row pointers off by one row, would change every result."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.schedule.packing_paths import MAX_LANES
from polyc.schedule.auto import auto_schedule

EXACT = ["-O3", "-march=native", "-ffp-contract=off"]
SMALL = dict(mr=3, nv=1, kc=5, mc=6)     # m panels of 3 rows, m blocks of 6, k blocks of 5

#: A convolution's weight gradient, as `pc.grad` writes it: rows f, lanes (c, kh, kw) by the
#: target's layout, k (n, h, w).
WEIGHT_GRAD = "K_grad[f, c, kh, kw] +=! Y_grad[n, f, h, w] * X[n, c, h + kh, w + kw]"


def _weight_grad():
    return pc.kernel(WEIGHT_GRAD, name="conv_wgrad", X=pc.f64["N", "C", "HO + KH - 1", "WO + KW - 1"], Y_grad=pc.f64["N", "F", "HO", "WO"],
                     K_grad=pc.f64["F", "C", "KH", "KW"])


def _wgrad_inputs(rng, n=2, c=5, f=7, ho=6, wo=9, kh=3, kw=2, dtype=np.float64):
    x = rng.standard_normal((n, c, ho + kh - 1, wo + kw - 1)).astype(dtype)
    y = rng.standard_normal((n, f, ho, wo)).astype(dtype)
    return x, y, (f, c, kh, kw)


def _reference(x, y, shape):
    f, c, kh, kw = shape
    _, _, ho, wo = y.shape
    out = np.zeros(shape)
    for a in range(kh):
        for b in range(kw):
            out[:, :, a, b] = np.einsum("nfhw,nchw->fc", y, x[:, :, a:a + ho, b:b + wo])
    return out


def _check(kernel, sched, **arrays):
    got = pc.compile(kernel, sched, flags=EXACT)(**arrays)
    np.testing.assert_array_equal(got, pc.compile(kernel, flags=EXACT)(**arrays))
    return got


def test_weight_gradient_with_lanes_along_the_output_channels_equals_the_source_order(threads):
    k = _weight_grad()
    sched = k.schedule().pack("S1", lanes="Y_grad", **SMALL)
    plan = sched.packing[-1]
    assert plan.contraction.n == ("f",) and plan.contraction.m == ("c", "kh", "kw")
    assert "_ukr_aoff(" in pc.codegen(k, sched)
    rng = np.random.default_rng(3)
    # k blocks of 5 over (n, h, w) cut across rows and images; 30 rows in panels of 3 and blocks of 6
    x, y, shape = _wgrad_inputs(rng)
    got = _check(k, sched, X=x, Y_grad=y)
    np.testing.assert_allclose(got, _reference(x, y, shape), rtol=1e-12)
    # a partial last panel (rows not a multiple of mr) and a single image
    x, y, shape = _wgrad_inputs(rng, n=1, c=4, f=3, ho=5, wo=4, kh=2, kw=2)
    np.testing.assert_allclose(_check(k, sched, X=x, Y_grad=y), _reference(x, y, shape), rtol=1e-12)


def test_the_default_orientation_reads_a_windowed_m_factor_at_offsets():
    """A 1-D convolution by rows: weights W[f, c, kh] are the m side, its k loops (c, kh) two, so
    not one linear run: read through offsets while the lanes are few, packed past the switch."""
    conv = pc.kernel("O[f, p] +=! W[f, c, kh] * I[c, p + kh]", name="conv1d_rows", W=pc.f32["F", "C", "KH"],
                     I=pc.f32["C", "P"])
    sched = conv.schedule().pack("S1", **SMALL)
    assert "_ukr_aoff(" in pc.codegen(conv, sched)
    rng = np.random.default_rng(4)
    for f, c, kh, lanes in ((8, 3, 4, 13), (7, 2, 3, MAX_LANES), (5, 3, 2, MAX_LANES + 3)):
        w = rng.standard_normal((f, c, kh)).astype(np.float32)
        i = rng.standard_normal((c, lanes + kh - 1)).astype(np.float32)
        got = _check(conv, sched, W=w, I=i)
        want = sum(np.einsum("fc,cp->fp", w[:, :, a], i[:, a:a + lanes]) for a in range(kh))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_auto_turns_the_weight_gradient_round_at_its_sizes_only():
    k = _weight_grad()
    sizes = dict(N=1, C=32, F=32, KH=3, KW=3, HO=54, WO=54)
    plan = auto_schedule(k, sizes=sizes).packing[-1]
    assert plan.contraction.n == ("f",), plan.contraction
    assert plan.kc == 54 * 54     # the whole reduction in one block: each tile through its buffer once
    # few input channels: still turned (its reduction is long and 32 output channels fill lanes)
    assert auto_schedule(k, sizes=dict(sizes, C=4)).packing[-1].contraction.n == ("f",)
    # without sizes, or with few lanes either way (the default reads its rows in place), it stays
    assert auto_schedule(k).packing[-1].contraction.n == ("c", "kh", "kw")
    few = dict(sizes, C=4, F=4)
    assert auto_schedule(k, sizes=few).packing[-1].contraction.n == ("c", "kh", "kw")
    # plain products are left as they are
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_lanes")
    assert auto_schedule(mm, sizes=dict(I=64, K=512, J=4096)).packing[-1].contraction.n == ("j",)


def test_auto_weight_gradient_of_the_library_convolution_is_exact():
    from kernels import by_name
    lk = by_name("conv2d")
    g = pc.grad(lk.kernel, of="Y", wrt=["K"])
    rng = np.random.default_rng(5)
    sizes = dict(N=1, C=32, H=20, W=21, F=3, KH=3, KW=3)
    inputs = lk.make_inputs(sizes, "f32", rng)
    y_grad = rng.standard_normal((1, 3, 18, 19)).astype(np.float32)
    args = {"X": inputs["X"], g.grad_names.seed: y_grad}
    f = pc.compile(g, "auto", flags=EXACT)
    got = f(**args)
    assert f.schedule_for(sizes)[1].packing[-1].contraction.n == ("f",)   # the call's size class
    np.testing.assert_array_equal(got, pc.compile(g, flags=EXACT)(**args))


def test_lanes_must_name_a_tensor_of_exactly_one_factor_and_survive_a_saved_schedule():
    k = _weight_grad()
    for bad, why in (("K_grad", "neither factor"), ("Q", "neither factor")):
        with pytest.raises(pc.PolycError, match=f"lanes='{bad}'.*{why}"):
            k.schedule().pack("S1", lanes=bad)
    sq = pc.kernel("C[i, j] +=! A[i, k] * A[k, j]", name="square_lanes")
    with pytest.raises(pc.PolycError, match="both factors"):
        sq.schedule().pack("S1", lanes="A")
    with pytest.raises(pc.PolycError, match="lanes"):
        k.schedule().pack("S1", lanes="not a name")
    sched = k.schedule().pack("S1", lanes="Y_grad")
    again = pc.Schedule.from_json(k, sched.to_json())
    assert again.packing[-1].contraction.n == ("f",)
    assert "lanes='Y_grad'" in str(again)
    tampered = sched.to_json().replace('"lanes": "Y_grad"', '"lanes": "n"')
    with pytest.raises(pc.errors.ScheduleFileError, match="must name a tensor of the kernel"):
        pc.Schedule.from_json(k, tampered)


def test_a_k_block_too_long_for_an_offset_table_packs_the_factor_instead():
    """`pack(kc=...)` past `MAX_K_OFFSETS`: the offsets would not fit a thread's stack, so the
    m side is packed (same result)."""
    from polyc.schedule.packing_paths import MAX_K_OFFSETS
    conv = pc.kernel("O[f, p] +=! W[f, c, kh] * I[c, p + kh]", name="conv1d_long_k", W=pc.f64["F", "C", "KH"],
                     I=pc.f64["C", "P"])
    assert "_ukr_aoff(" not in pc.codegen(conv, conv.schedule().pack("S1", kc=MAX_K_OFFSETS + 1))
    sched = conv.schedule().pack("S1", kc=MAX_K_OFFSETS)
    assert "_ukr_aoff(" in pc.codegen(conv, sched)
    rng = np.random.default_rng(6)
    w, i = rng.standard_normal((9, 5, 3)), rng.standard_normal((5, 40))
    _check(conv, sched, W=w, I=i)


def test_auto_turns_a_forward_convolution_with_many_channels_and_a_long_reduction():
    """Lanes along the output channels, rows along the output pixels (their windows read in place),
    where the channels fill two vectors and (c, kh, kw) is long; the direct convolution otherwise."""
    from kernels import by_name
    conv = by_name("conv2d").kernel
    lanes = pc.Target.host().vector_bytes // 4
    wide = dict(N=1, C=64, H=56, W=56, F=max(64, 2 * lanes), KH=3, KW=3)
    assert auto_schedule(conv, sizes=wide).packing[-1].contraction.n == ("f",)
    for narrow in (dict(wide, C=3), dict(wide, F=lanes // 2)):   # a short reduction, too few channels
        assert auto_schedule(conv, sizes=narrow).packing[-1].contraction.n == ("n", "h", "w")


def test_a_forward_convolution_turned_round_equals_the_source_order(threads):
    conv = pc.kernel("Y[n, f, h, w] +=! X[n, c, h + kh, w + kw] * K[f, c, kh, kw]", name="conv_turned",
                     X=pc.f32["N", "C", "HO + KH - 1", "WO + KW - 1"], K=pc.f32["F", "C", "KH", "KW"])
    sched = conv.schedule().pack("S1", lanes="K", **SMALL)
    assert sched.packing[-1].contraction.n == ("f",)
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
    k = rng.standard_normal((5, 3, 2, 3)).astype(np.float32)
    got = _check(conv, sched, X=x, K=k)
    want = np.zeros((2, 5, 6, 7), np.float32)
    for a in range(2):
        for b in range(3):
            want += np.einsum("nchw,fc->nfhw", x[:, :, a:a + 6, b:b + 7], k[:, :, a, b])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_convolution_of_a_tensor_with_itself_is_still_packed():
    """Both factors read X: `lanes` cannot name one of them, so "auto" keeps the default form
    (and still packs) rather than asking for a turn `pack` refuses."""
    auto_corr = pc.kernel("R[f, c, kh, kw] +=! X[n, f, h, w] * X[n, c, h + kh, w + kw]", name="autocorr",
                          X=pc.f32["N", "C", "H", "W"])
    sizes = dict(N=1, C=32, H=40, W=40, KH=3, KW=3)
    sched = auto_schedule(auto_corr, sizes=sizes)
    assert sched.packing and sched.packing[-1].contraction.n == ("c", "kh", "kw")
