"""`stop_gradient(x)`: the value `x` everywhere, a constant to `pc.grad`; and the gradient's
divisions by loop-invariant values, which become multiplications by a hoisted reciprocal."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import by_name
from polyc.ir import Binary, Const
from polyc.testing import check_grad

SOFTMAX = """
    m[i] max=! X[i, j]
    e[i, j] = exp(X[i, j] - stop_gradient(m[i]))
    s[i] +=! e[i, j]
    Y[i, j] = e[i, j] / s[i]
"""


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_stop_gradient_is_the_identity_in_the_forward(target):
    k = pc.kernel("Y[i] = stop_gradient(X[i]) * 2 + stop_gradient(K[i])", X=pc.tensor["N"], K=pc.i32["N"])
    x, kk = np.array([1.5, -2.0, np.nan]), np.array([3, -4, 5], dtype=np.int32)
    got = pc.compile(k, target=target)(X=x, K=kk)
    np.testing.assert_array_equal(got, x * 2 + kk)
    np.testing.assert_array_equal(k.reference(X=x, K=kk), x * 2 + kk)


def test_stop_gradient_in_a_loop_kernel_runs_as_python_and_compiles():
    def scaled(X: pc.f64["N"], Y: pc.f64["N"]):
        for i in range(N):   # noqa: F821
            Y[i] = X[i] * pc.stop_gradient(X[i])
    k = pc.kernel(scaled)
    x = np.array([1.0, -3.0, 0.5])
    # The reference runs the function as Python, where stop_gradient is the identity.
    np.testing.assert_array_equal(k.reference(X=x, Y=np.zeros(3)), x * x)
    np.testing.assert_array_equal(pc.compile(k)(X=x), x * x)
    # d/dx (x * const(x)) = const(x) = x, not 2x.
    np.testing.assert_array_equal(pc.grad(k, of="Y", wrt="X")(X=x, Y_grad=np.ones(3)), x)


def test_gradient_through_stop_gradient_treats_it_as_a_constant():
    k = pc.kernel("Y[i] = X[i] * stop_gradient(X[i]) + stop_gradient(exp(X[i]))")
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(pc.grad(k, of="Y", wrt="X")(X=x, Y_grad=np.ones(3)), x)
    only = pc.kernel("Y[i] = stop_gradient(X[i]) + 1.0")
    np.testing.assert_array_equal(pc.grad(only, of="Y", wrt="X")(Y_grad=np.ones(3)), np.zeros(3))   # reads no X


def test_softmax_with_a_stopped_maximum_carries_no_maximum_back():
    k = pc.kernel(SOFTMAX, name="softmax_sg")
    g = pc.grad(k, of="Y", wrt="X")
    names = {t.name for t in g.program.tensors}
    assert not names & {"m_grad", "m_ties"}, names      # no tie count, no adjoint of the maximum
    rng = np.random.default_rng(0)
    check_grad(k, "Y", "X", X=rng.standard_normal((6, 9)))
    x = np.array([[1.0, 3.0, 3.0, 2.0]])             # a tied maximum: the gradient is unchanged
    ybar = np.array([[0.3, -1.0, 2.0, 0.5]])
    y = np.exp(x - 3.0) / np.exp(x - 3.0).sum()
    np.testing.assert_allclose(g(X=x, Y_grad=ybar), y * (ybar - (ybar * y).sum()), rtol=1e-14)


def test_the_library_softmax_stops_its_maximum():
    g = pc.grad(by_name("softmax").kernel, of="Y", wrt=["X"])
    assert "m_ties" not in {t.name for t in g.program.tensors}


def _divisions(e):
    return [n for n in e.walk() if isinstance(n, Binary) and n.op == "/"]


def test_divisions_by_loop_invariants_become_reciprocals():
    k = pc.kernel("s[i] +=! X[i, j]\nY[i, j] = X[i, j] / s[i] + X[i, j] / X[i, j]", name="quotients")
    g = pc.grad(k, of="Y", wrt="X")
    adjoints = [s for s in g.program.statements if s.target.tensor.endswith("_grad") and s.update == "+"]
    for st in adjoints:
        for d in _divisions(st.value):
            # `seed / s[i]` became `seed * (1 / s[i])`; `X[i, j]` varies along both loops and stays.
            assert (isinstance(d.lhs, Const) and d.lhs.value == 1) or "X" in str(d.rhs), str(st.value)
    assert any(isinstance(d.lhs, Const) for st in adjoints for d in _divisions(st.value))
    check_grad(k, "Y", "X", X=np.random.default_rng(3).uniform(0.5, 2.0, (4, 5)))


def test_layernorm_gradient_matches_finite_differences_with_reciprocals():
    lk = by_name("layernorm")
    rng = np.random.default_rng(1)
    check_grad(lk.kernel, "Y", ["X", "gamma", "beta"], lk.make_inputs(lk.sizes["small"], "f64", rng))
