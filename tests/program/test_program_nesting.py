"""A program called inside another program's trace joins it: its operators become the caller's,
fused, planned and differentiated across the boundary, as if written there."""
import numpy as np
import pytest

import polyc as pc
from kernels.linalg import matmul
from kernels.program_ops import bias_add, gelu
from polyc.errors import ProgramError


@pc.program
def layer(x: pc.f32["B", "D"], w: pc.f32["D", "H"], b: pc.f32["H"]):
    return gelu.kernel(X=bias_add.kernel(X=matmul.kernel(A=x, B=w), b=b))


@pc.program
def mlp(x: pc.f32["B", "D"], w1: pc.f32["D", "H"], b1: pc.f32["H"], w2: pc.f32["H", "O"], b2: pc.f32["O"]):
    return layer(layer(x, w1, b1), w=w2, b=b2)


def _gelu(t):
    return 0.5 * t * (1 + np.tanh(np.float32(0.7978845608028654) * (t + np.float32(0.044715) * t ** 3)))


def test_a_program_of_programs_runs_as_one_program():
    rng = np.random.default_rng(0)
    x, w1, b1, w2, b2 = (rng.standard_normal(s).astype(np.float32) for s in ((8, 5), (5, 6), (6,), (6, 3), (3,)))
    want = _gelu(_gelu(x @ w1 + b1) @ w2 + b2)
    np.testing.assert_allclose(mlp(x, w1, b1, w2, b2), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mlp.reference(x=x, w1=w1, b1=b1, w2=w2, b2=b2), want, rtol=1e-5, atol=1e-6)
    assert len(mlp.nodes) == 6 and "fused" in mlp.explain()      # both layers' operators, fused across calls
    seed = np.ones((8, 3), np.float32)
    got = mlp.grad(of="out", wrt=["w1"])(x=x, w1=w1, b1=b1, w2=w2, b2=b2, out_grad=seed)["w1_grad"]
    kernel = pc.compile(pc.grad(mlp, of="out", wrt=["w1"]))
    np.testing.assert_allclose(got, kernel(x=x, w1=w1, b1=b1, w2=w2, b2=b2, out_grad=seed), rtol=1e-4, atol=1e-5)


def test_a_nested_call_is_checked_against_the_inner_programs_parameters():
    with pytest.raises(ProgramError, match="needs b.shape\\[0\\] = H, which another argument makes H, but "
                                           "b.shape\\[0\\] = K"):
        @pc.program
        def sizes(x: pc.f32["B", "D"], w: pc.f32["D", "H"], b: pc.f32["K"]):
            return layer(x, w, b)
    with pytest.raises(ProgramError, match="declares x as f32, but x is f64"):
        @pc.program
        def types(x: pc.f64["B", "D"], w: pc.f32["D", "H"], b: pc.f32["H"]):
            return layer(x, w, b)
    with pytest.raises(ProgramError, match="takes x, w, b; bias missing|takes x, w, b; bias given"):
        @pc.program
        def names(x: pc.f32["B", "D"], w: pc.f32["D", "H"], b: pc.f32["H"]):
            return layer(x=x, w=w, bias=b)


def _inner(extent):
    @pc.program
    def inner(x: pc.f64[extent, "C"]):
        return gelu.kernel(X=x)
    return inner


@pytest.mark.parametrize("inner, bad, good, message", [
    (3, "B", 3, r"needs x.shape\[0\] = 3, but x.shape\[0\] = B"),
    ("2*D", "E", "2*E", r"needs x.shape\[0\] = 2\*D, which x.shape\[0\] = E need not be"),
])
def test_a_nested_call_keeps_the_inner_programs_declared_extents(inner, bad, good, message):
    callee = _inner(inner)
    with pytest.raises(ProgramError, match=message):
        @pc.program
        def refused(x: pc.f64[bad, "C"]):
            return callee(x)

    @pc.program
    def fine(x: pc.f64[good, "C"]):
        return callee(x)
    assert fine(x=np.ones((6 if good != 3 else 3, 2))).shape[1] == 2


def test_a_nested_call_keeps_the_inner_programs_declared_types():
    @pc.program
    def f32_only(x: pc.f32["B", "D"]):
        return gelu.kernel(X=x)

    with pytest.raises(ProgramError, match="declares x as f32, but x is of a type the call chooses"):
        @pc.program
        def untyped(x: pc.tensor["B", "D"]):
            return f32_only(x)
