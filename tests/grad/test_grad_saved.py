"""`pc.grad(..., saved=[...])`: gradient kernels that read forward values the caller kept instead of
recomputing them, `pc.returning` (the forward that keeps them), and the saved division that gives
back its numerator (softmax's backward without `exp`)."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import by_name
from polyc.ir import Call
from polyc.testing import check_grad


def _calls(kernel) -> set:
    return {e.fn for st in kernel.program.statements for e in st.value.walk() if isinstance(e, Call)}


def _written(kernel) -> set:
    return {st.target.tensor for st in kernel.program.statements}


@pytest.fixture(scope="module")
def softmax():
    return by_name("softmax").kernel


def _softmax_inputs(shape=(13, 21), dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-4, 4, shape).astype(dtype), rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_softmax_saved_output_and_row_sums_computes_no_exp(softmax, target):
    g = pc.grad(softmax, of="Y", wrt="X", saved=["Y", "s"])
    assert g.grad_names.saved == ("Y", "s")
    assert "exp" not in _calls(g)                       # e = Y * s, not exp(X - m)
    assert not _written(g) & {"m", "e", "s"}            # nothing of the forward recomputed
    roles = {t.name: t.role for t in g.program.tensors}
    assert roles["Y"] == roles["s"] == "input" and "X" not in roles   # X is not even read
    x, ybar = _softmax_inputs()
    kept = pc.returning(softmax, "s")(X=x)
    got = pc.compile(g, "auto", target=target)(Y=kept["Y"], s=kept["s"], Y_grad=ybar)
    want = pc.grad(softmax, of="Y", wrt="X")(X=x, Y_grad=ybar)
    y = kept["Y"]
    np.testing.assert_allclose(got, y * (ybar - (ybar * y).sum(axis=1, keepdims=True)), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_softmax_saved_in_float32_agrees_with_recomputing_to_rounding(softmax):
    x, ybar = _softmax_inputs((64, 300), np.float32, seed=3)
    kept = pc.returning(softmax, "s")(X=x)
    got = pc.compile(pc.grad(softmax, of="Y", wrt="X", saved=["Y", "s"]), "auto")(
        Y=kept["Y"], s=kept["s"], Y_grad=ybar)
    want = pc.compile(pc.grad(softmax, of="Y", wrt="X"), "auto")(X=x, Y_grad=ybar)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6 * np.abs(want).max())


def test_check_grad_passes_saved_values_from_the_forward(softmax):
    x, _ = _softmax_inputs((5, 8))
    check_grad(softmax, "Y", "X", X=x, saved=["Y", "s"])
    lk = by_name("layernorm")
    rng = np.random.default_rng(1)
    check_grad(lk.kernel, "Y", ["X", "gamma", "beta"], saved=["mean", "var"], X=rng.standard_normal((4, 16)),
               gamma=rng.standard_normal(16), beta=rng.standard_normal(16), eps=1e-5)


def test_layernorm_saved_statistics_skip_both_reduction_passes():
    lk = by_name("layernorm")
    g = pc.grad(lk.kernel, of="Y", wrt=["X", "gamma", "beta"], saved=["mean", "var"])
    assert not _written(g) & {"mean", "var", "xc"}
    rng = np.random.default_rng(2)
    args = dict(X=rng.standard_normal((9, 32)), gamma=rng.standard_normal(32), eps=1e-5)
    ybar = rng.standard_normal((9, 32))
    stats = pc.returning(lk.kernel, "mean", "var")(**args, beta=rng.standard_normal(32))
    got = pc.compile(g, "auto")(**args, Y_grad=ybar, mean=stats["mean"], var=stats["var"])
    want = pc.grad(lk.kernel, of="Y", wrt=["X", "gamma", "beta"])(**args, Y_grad=ybar)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-14)


def test_a_division_whose_divisor_needs_the_numerator_gives_nothing_back(softmax):
    # Y alone: s = sum(e) needs e, so e = Y * s would go round in a circle: exp stays.
    g = pc.grad(softmax, of="Y", wrt="X", saved=["Y"])
    assert "exp" in _calls(g) and "e" in _written(g)
    assert {t.name: t.role for t in g.program.tensors}["Y"] == "input"   # taken, though unread
    x, ybar = _softmax_inputs((4, 6))
    y = softmax(X=x)
    np.testing.assert_allclose(g(X=x, Y=y, Y_grad=ybar), pc.grad(softmax, of="Y", wrt="X")(X=x, Y_grad=ybar),
                               rtol=1e-13)


def test_a_division_reading_part_of_the_numerator_gives_nothing_back():
    # Y reads e[i] for i < N - 1 only (w is one shorter): e's last element must still be computed.
    k = pc.kernel("""
        e[i] = exp(X[i])
        Y[i] = e[i] / w[i]
        Z[i] = e[i] * 2.0
    """, outputs=["Y", "Z"], X=pc.tensor["N"], w=pc.tensor["N - 1"])
    g = pc.grad(k, of="Z", wrt="X", saved=["Y"])
    assert "exp" in _calls(g)
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal(7), rng.uniform(1, 2, 6)
    check_grad(k, "Z", "X", X=x, w=w, saved=["Y"])
    # Over the whole of e, the same kernel gives it back.
    whole = pc.kernel("""
        e[i] = exp(X[i])
        Y[i] = e[i] / w[i]
        Z[i] = e[i] * 2.0
    """, outputs=["Y", "Z"], X=pc.tensor["N"], w=pc.tensor["N"])
    g = pc.grad(whole, of="Z", wrt="X", saved=["Y"])
    assert "exp" not in _calls(g)
    check_grad(whole, "Z", "X", X=x, w=rng.uniform(1, 2, 7), saved=["Y"])


@pytest.mark.parametrize("saved, message", [
    (["nope"], "not a tensor of the kernel"),
    (["X"], "is an input"),
    (["s", "s"], "twice"),
    ([3], "tensor names"),
])
def test_saved_names_are_checked(softmax, saved, message):
    with pytest.raises(pc.GradError, match=message):
        pc.grad(softmax, of="Y", wrt="X", saved=saved)


def test_saved_is_refused_with_store_checkpointing_and_for_arrays_updated_in_place(softmax):
    with pytest.raises(pc.GradError, match="checkpoint='store'"):
        pc.grad(softmax, of="Y", wrt="X", checkpoint="store", saved=["s"])

    def scale(A: pc.f64["N"], B: pc.f64["N"]):
        for i in range(N):   # noqa: F821
            B[i] = B[i] * 2.0 + A[i]
    with pytest.raises(pc.GradError, match="updated in place"):
        pc.grad(pc.kernel(scale), of="B", wrt="A", saved=["B"])


def test_returning_returns_intermediates_and_leaves_the_kernel_alone(softmax):
    x, _ = _softmax_inputs((3, 5))
    kept = pc.returning(softmax, "m", "s", "Y")
    out = kept(X=x)
    assert set(out) == {"m", "s", "Y"}
    np.testing.assert_array_equal(out["m"], x.max(axis=1))
    np.testing.assert_allclose(out["s"], np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1))
    np.testing.assert_allclose(out["Y"], softmax(X=x))
    assert isinstance(softmax(X=x), np.ndarray)          # the kernel given is unchanged
    assert {t.name: t.role for t in softmax.program.tensors}["s"] == "temp"


def test_returning_refuses_what_cannot_be_returned(softmax):
    with pytest.raises(pc.PolycError, match="is an input"):
        pc.returning(softmax, "X")
    with pytest.raises(pc.PolycError, match="intermediates are m, e, s"):
        pc.returning(softmax, "q")

    def total(A: pc.f64["N"], out: pc.f64[1]):
        acc = 0.0
        for i in range(N):   # noqa: F821
            acc += A[i]
        out[0] = acc
    with pytest.raises(pc.PolycError, match="local scalar"):
        pc.returning(pc.kernel(total), "acc")
    with pytest.raises(pc.PolycError, match="kernel made by pc.kernel"):
        pc.returning("softmax", "s")
