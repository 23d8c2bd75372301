"""Programs over kernels whose inputs are declared as multiples of a size (`2*H`: pooling, strides).

A kernel that reads `X[2*h + r]` takes only extents `2*H`; called inside a program on a tensor
of extent `H - 2` (a convolution's result), the program's own size must become `2*H_2 + 2`.
"""
import numpy as np
import pytest

import polyc as pc
from polyc.errors import ArgumentError, ProgramError
from kernels.nn import avgpool2d, conv2d
from kernels.program_ops import relu4d

rng = np.random.default_rng(11)


def conv(x, k):
    n, c, h, w = x.shape
    f, _, kh, kw = k.shape
    y = np.zeros((n, f, h - kh + 1, w - kw + 1))
    for a in range(kh):
        for b in range(kw):
            y += np.einsum("nchw,fc->nfhw", x[:, :, a:a + h - kh + 1, b:b + w - kw + 1], k[:, :, a, b])
    return y


def pool(y):
    n, c, h, w = y.shape
    return y[:, :, :h // 2 * 2, :w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).mean(axis=(3, 5))


@pc.program
def conv_relu_pool(X: pc.f64["N", "C", "H", "W"], K: pc.f64["F", "C", 3, 3]):
    return avgpool2d.kernel(X=relu4d.kernel(X=conv2d.kernel(X=X, K=K)))


@pc.program
def pool_twice(X: pc.f64["N", "C", "H", "W"]):
    return avgpool2d.kernel(X=avgpool2d.kernel(X=X))


def test_a_pooled_convolution_result_runs_and_matches_numpy():
    for h, w in [(10, 14), (4, 6), (12, 4)]:
        x = rng.standard_normal((2, 3, h, w))
        k = rng.standard_normal((4, 3, 3, 3))
        want = pool(np.maximum(conv(x, k), 0.0))
        np.testing.assert_allclose(conv_relu_pool(X=x, K=k), want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(conv_relu_pool.reference(X=x, K=k), want, rtol=1e-12, atol=1e-12)


def test_the_program_input_extent_says_it_must_fit_the_pooling():
    assert "H" not in conv_relu_pool.sizes and "H_2" in conv_relu_pool.sizes
    assert [str(d) for d in conv_relu_pool.handles["X"].shape[2:]] == ["2*H_2 + 2", "2*W_2 + 2"]
    with pytest.raises(ArgumentError, match=r"X.shape\[2\] is 11, but .* 2\*H_2 \+ 2"):
        conv_relu_pool(X=rng.standard_normal((1, 3, 11, 10)), K=rng.standard_normal((4, 3, 3, 3)))


def test_pooling_twice_needs_multiples_of_four():
    assert pool_twice.sizes == ("N", "C", "H_4", "W_4")
    x = rng.standard_normal((1, 2, 8, 12))
    np.testing.assert_allclose(pool_twice(X=x), pool(pool(x)), rtol=1e-12)
    with pytest.raises(ArgumentError, match="4\\*H_4"):
        pool_twice(X=rng.standard_normal((1, 2, 6, 12)))


def test_an_input_declared_as_a_multiple_binds_without_rescaling():
    @pc.program
    def p(X: pc.f64["N", "C", "2*H", "2*W"]):
        return avgpool2d.kernel(X=X)
    assert p.sizes == ("N", "C", "H", "W")
    x = rng.standard_normal((2, 3, 8, 6))
    np.testing.assert_allclose(p(X=x), pool(x), rtol=1e-12)


def test_an_extent_that_can_never_be_a_multiple_is_refused_at_the_call():
    with pytest.raises(ProgramError, match="multiple of 2") as e:
        @pc.program
        def p(X: pc.f64["N", "C", "2*H + 1", "W"]):
            return avgpool2d.kernel(X=X)
    assert "avgpool2d.kernel(X=X)" in str(e.value)


def test_gradients_through_convolution_and_pooling_match_the_adjoint():
    """conv2d's input gradient is sized by its seed and weights (`H - KH + 1` with KH known): the
    trace binds a size from a dimension once the other sizes in it are known."""
    grad = conv_relu_pool.grad("out", ["X", "K"])
    x = rng.standard_normal((2, 3, 10, 8))
    k = rng.standard_normal((4, 3, 3, 3))
    seed = rng.standard_normal((2, 4, 4, 3))
    got = grad(X=x, K=k, out_grad=seed)
    y = conv(x, k)
    dy = np.repeat(np.repeat(seed, 2, axis=2), 2, axis=3) / 4.0 * (y > 0)
    dx = np.zeros_like(x)
    dk = np.zeros_like(k)
    for a in range(3):
        for b in range(3):
            dx[:, :, a:a + 8, b:b + 6] += np.einsum("nfhw,fc->nchw", dy, k[:, :, a, b])
            dk[:, :, a, b] = np.einsum("nfhw,nchw->fc", dy, x[:, :, a:a + 8, b:b + 6])
    np.testing.assert_allclose(got["X_grad"], dx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["K_grad"], dk, rtol=1e-10, atol=1e-12)


def test_pooling_one_input_by_two_and_by_three_needs_a_multiple_of_six():
    pool3 = pc.kernel("P[n, c, h, w] +=! X[n, c, 3*h + r, 3*w + s] / 9.0 where r in 0:3, s in 0:3",
                      name="pool3", X=pc.tensor["N", "C", "3*H", "3*W"])

    @pc.program
    def both(X: pc.f64["N", "C", "H", "W"]):
        return {"a": avgpool2d.kernel(X=X), "b": pool3(X=X)}
    assert [str(d) for d in both.handles["X"].shape[2:]] == ["6*H_6", "6*W_6"]
    x = rng.standard_normal((1, 2, 12, 6))
    got = both(X=x)
    np.testing.assert_allclose(got["a"], pool(x), rtol=1e-12)
    np.testing.assert_allclose(got["b"], x.reshape(1, 2, 4, 3, 2, 3).mean(axis=(3, 5)), rtol=1e-12)


_POOL2 = pc.kernel("O[h] max=! I[2*h + k] where k in 0:2", name="pool2")
_POOL3 = pc.kernel("O[h] max=! I[2*h + k] where k in 0:3", name="pool3")
_RELU = pc.kernel("Y[i] = max(X[i], 0.0)", name="relu1d")


@pytest.mark.parametrize("pool, extent", [(_POOL2, 6), (_POOL3, 5)])
def test_a_kernel_whose_size_is_a_floor_takes_an_input_declared_a_multiple(pool, extent):
    # `O[h] max=! I[2*h + k]` computes its extent floor(.. / 2) at call time; on an input declared
    # `2*N` that floor is affine in the program's sizes
    @pc.program
    def net(X: pc.f32["2*N"]):
        return pool(I=_RELU(X=X))

    x = np.random.default_rng(0).standard_normal(12).astype(np.float32)
    want = pool.reference(I=np.maximum(x, 0))
    got = net(X=x)
    assert got.shape == (extent,)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(net.reference(X=x), want)
    seed = np.arange(extent, dtype=np.float32)
    backward = net.grad(of="out", wrt=["X"])(X=x, out_grad=seed)["X_grad"]
    np.testing.assert_array_equal(backward, pc.compile(pc.grad(net, of="out", wrt=["X"]))(X=x, out_grad=seed))


def test_a_floor_size_that_is_not_affine_in_the_programs_sizes_says_what_to_declare():
    with pytest.raises(ProgramError, match=r"floor\(\(N\) / 2\) here.*pc.f32\[\"2\*H\"\]"):
        @pc.program
        def net(X: pc.f32["N"]):
            return _POOL2(I=_RELU(X=X))
