"""Gradients of programs at their edges: NaN through max, checkpoints, integer intermediates,
reductions written in part, and a tensor returned under two names."""
import numpy as np
import pytest

import polyc as pc
from polyc.errors import GradError

sq = pc.kernel("Y[i] = X[i] * X[i]", name="sq")


def test_a_nan_operand_of_max_takes_the_adjoint_so_the_gradient_shows_it():
    """max(x, 0) at x = NaN returns NaN; its gradient was 0 for both operands, so a NaN forward
    came back as a finite zero backward (torch.relu and torch.maximum pass the adjoint)."""
    relu = pc.kernel("Y[i] = max(X[i], 0.0)", name="relu")
    g = pc.compile(pc.grad(relu, of="Y", wrt="X"))
    np.testing.assert_array_equal(g(X=np.array([np.nan, 2.0, -1.0]), Y_grad=np.ones(3)), [1.0, 1.0, 0.0])
    fm = pc.kernel("Y[i] = fmax(X[i], W[i])", name="fm")     # fmax returns the other operand
    got = pc.compile(pc.grad(fm, of="Y", wrt=["X", "W"]))(X=np.array([np.nan]), W=np.array([1.0]), Y_grad=np.ones(1))
    assert got["X_grad"].tolist() == [0.0] and got["W_grad"].tolist() == [1.0]

    @pc.program
    def p(x: pc.f64["N"]):
        return sq(X=relu(X=x))
    x = np.array([1.0, np.nan, 2.0])
    for back in (p.grad(of="out", wrt="x")(x=x, out_grad=np.ones(3))["x_grad"],
                 pc.compile(pc.grad(p, of="out", wrt="x"))(x=x, out_grad=np.ones(3))):
        assert back[0] == 2.0 and np.isnan(back[1]) and back[2] == 4.0


def test_a_programs_gradient_takes_the_checkpoint_strategy():
    scan = pc.kernel("C[0] = X[0]\nC[i] = 0.5 * C[i - 1] + X[i] where i in 1:N", name="scan",
                     X=pc.tensor["N"], C=pc.tensor["N"])

    @pc.program
    def p(a: pc.f64["N"]):
        return sq(X=scan(X=sq(X=a)))
    with pytest.raises(GradError, match="checkpoint='no-such' is not a strategy"):
        pc.grad(p, of="out", wrt="a", checkpoint="no-such")
    a = np.random.default_rng(0).standard_normal(6)
    g = pc.compile(pc.grad(p, of="out", wrt="a", checkpoint="store"))(a=a, out_grad=np.ones(6))
    eps = 1e-6
    fd = [(p(a=a + eps * e).sum() - p(a=a - eps * e).sum()) / (2 * eps) for e in np.eye(6)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_an_integer_intermediate_gets_no_gradient_and_the_rest_does():
    count = pc.kernel("c[i] +=! select(X[i, j] > 0, 1, 0)", name="count", c=pc.i64["I"])
    scale = pc.kernel("Y[i, j] = X[i, j] / (c[i] + 1)", name="scale_by")

    @pc.program
    def p(X: pc.f64["I", "J"]):
        return scale(X=X, c=count(X=X))
    x = np.array([[1.0, -1.0, 2.0], [-1.0, -2.0, -3.0]])
    want = np.repeat(1.0 / (np.array([2, 0]) + 1.0), 3).reshape(2, 3)
    np.testing.assert_allclose(p.grad(of="out", wrt="X")(X=x, out_grad=np.ones((2, 3)))["X_grad"], want)
    np.testing.assert_allclose(pc.compile(pc.grad(p, of="out", wrt="X"))(X=x, out_grad=np.ones((2, 3))), want)


def test_a_reduction_written_in_part_differentiates_as_one_definition():
    rsum = pc.kernel("O[i] +=! A[i, j] where i in 1:I", name="rsum", A=pc.tensor["I", "J"], O=pc.tensor["I"])

    @pc.program
    def p(A: pc.f64["I", "J"]):
        return sq(X=rsum(A=A))
    a = np.random.default_rng(1).standard_normal((4, 3))
    want = np.repeat(2 * np.concatenate([[0.0], a[1:].sum(axis=1)]), 3).reshape(4, 3)
    np.testing.assert_allclose(pc.compile(pc.grad(p, of="out", wrt="A"))(A=a, out_grad=np.ones(4)), want)
    np.testing.assert_allclose(p.grad(of="out", wrt="A")(A=a, out_grad=np.ones(4))["A_grad"], want)


def test_a_tensor_returned_under_two_names_is_seeded_by_the_name_asked_for():
    @pc.program
    def p(x: pc.f64["N"]):
        y = sq(X=x)
        return {"a": y, "c": y}
    g = pc.grad(p, of="a", wrt="x")
    assert g.grad_names.seed == "a_grad"
    np.testing.assert_array_equal(pc.compile(g)(x=np.arange(3.0), a_grad=np.ones(3)), [0.0, 2.0, 4.0])
    with pytest.raises(GradError, match="of must be the name of one tensor"):
        pc.grad(p, of=["a"], wrt="x")


def test_an_output_named_unlike_a_parameter_is_refused_by_program_grad_only():
    from kernels.program_ops import gelu

    @pc.program
    def p(X: pc.f64["M", "N"]):
        return {"y-out": gelu.kernel(X=X)}

    with pytest.raises(pc.GradError, match="return it under a name like 'y_out'"):
        p.grad(of="y-out", wrt=["X"])
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    g = pc.compile(pc.grad(p, of="y-out", wrt=["X"]))(X=x, **{"y-out_grad": np.ones((2, 3))})
    assert g.shape == (2, 3) and np.isfinite(g).all()


def test_pc_grad_of_an_input_the_output_ignores_says_so():
    from kernels.program_ops import gelu

    @pc.program
    def indep(X: pc.f64["M", "N"], Y: pc.f64["M", "N"]):
        return gelu.kernel(X=X)

    with pytest.raises(GradError, match="'out' does not depend on input 'Y'.*zero"):
        pc.grad(indep, of="out", wrt=["X", "Y"])
    x = np.ones((2, 3))
    assert not indep.grad(of="out", wrt=["X", "Y"])(X=x, Y=x, out_grad=x)["Y_grad"].any()
