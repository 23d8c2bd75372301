"""Factors constant along a gradient's sum taken out of it (`polyc.grad.factor`): layernorm's
backward sums its rows in one pass, the rewrite is exact where rows are empty or triangular, and
sums it would not help are left alone."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import by_name
from polyc.api import Kernel
from polyc.grad.analysis import as_updates
from polyc.grad.factor import factor_sums
from polyc.ir import Binary


def _layernorm_backward(X, gamma, Yb, eps):
    """The closed form of layernorm's input, scale and shift gradients (float64)."""
    X, gamma, Yb = (np.asarray(a, np.float64) for a in (X, gamma, Yb))
    mean = X.mean(axis=1, keepdims=True)
    r = 1.0 / np.sqrt(((X - mean) ** 2).mean(axis=1, keepdims=True) + eps)
    xhat = (X - mean) * r
    g = Yb * gamma
    dX = r * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
    return dX, (Yb * xhat).sum(axis=0), Yb.sum(axis=0)


@pytest.mark.parametrize("saved", [(), ("mean", "var")])
def test_layernorm_backward_sums_each_row_in_one_pass(saved):
    lk = by_name("layernorm")
    g = pc.grad(lk.kernel, of="Y", wrt=["X", "gamma", "beta"], saved=saved)
    sums = [st for st in g.program.statements if st.reduction and st.target.tensor.startswith("mean_grad")]
    # No sum into mean_grad reads var_grad (another sum's result): the factor went out of the sum.
    assert sums and not any("var_grad" in {a.tensor for a in st.value.accesses()} for st in sums)
    # The centred row stays centred inside its sum (a product of sums is never multiplied out).
    assert any(isinstance(st.value, Binary) and st.value.op == "-" for st in sums)
    f = pc.compile(g, "auto")
    rng = np.random.default_rng(0)
    M, N = 9, 200
    X = rng.standard_normal((M, N)).astype(np.float32)
    gamma = rng.standard_normal(N).astype(np.float32)
    Yb = rng.standard_normal((M, N)).astype(np.float32)
    args = dict(X=X, gamma=gamma, Y_grad=Yb, eps=1e-5)
    if saved:
        kept = pc.returning(lk.kernel, *saved)(X=X, gamma=gamma, beta=gamma, eps=1e-5)
        args.update({t: kept[t] for t in saved})
    got = f(**{k: v for k, v in args.items() if k in {t.name for t in g.program.tensors} | {"eps"}})
    # The row's sums (var_grad's and mean_grad's) share one SIMD loop, one accumulator each.
    assert "reduction(+:pc_acc) reduction(+:pc_acc1) reduction(+:pc_acc2)" in f.source
    for name, want in zip(("X_grad", "gamma_grad", "beta_grad"), _layernorm_backward(X, gamma, Yb, 1e-5)):
        np.testing.assert_allclose(got[name], want, rtol=2e-4, atol=2e-4 * np.abs(want).max())


def _factored(source: str, target: str):
    k = pc.kernel(source, name="k")
    return k, factor_sums(as_updates(k.program), {target})


def test_factored_triangular_sum_adds_nothing_to_empty_rows_even_times_inf():
    """`j in 0:i` leaves row 0 empty: the factored sum's last statement runs where a row has
    elements (isl's projection), so row 0 keeps its zero although its factor is infinite."""
    k, (program, temps) = _factored("""
        s[i] +=! A[i, j]
        T[i] +=! c[i] / s[i] * (A[i, j] - m[i]) + B[i, j] where j in 0:i
    """, "T")
    assert temps == {"T_sum"}
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((6, 6)), rng.standard_normal((6, 6))
    c, m = rng.standard_normal(6), rng.standard_normal(6)
    A[0] = 0.0                        # s[0] = 0: c[0] / s[0] is infinite
    with np.errstate(divide="ignore"):
        want = np.array([((c[i] / A[i].sum()) * (A[i, :i] - m[i]) + B[i, :i]).sum() for i in range(6)])
    got = Kernel(program)(A=A, B=B, c=c, m=m)
    assert got[0] == 0.0
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got, k(A=A, B=B, c=c, m=m), rtol=1e-12)


def test_sums_whose_factors_read_no_other_sum_are_left_alone():
    """A factor that reads only inputs  saves one
    multiplication per element, which does not pay for another array and pass (avgpool's `/ 4.0`)."""
    _, (program, temps) = _factored("T[i] +=! c[i] * A[i, j] / 4.0", "T")
    assert temps == set() and [st.value for st in program.statements][-1] == \
        as_updates(pc.kernel("T[i] +=! c[i] * A[i, j] / 4.0", name="k").program).statements[-1].value
    g = pc.grad(by_name("avgpool2d").kernel, of="P", wrt="X")
    assert not any(t.name.endswith(("_sum", "_sum2")) for t in g.program.tensors)


def test_a_term_constant_along_the_sum_leaves_the_sum_alone():
    _, (_, temps) = _factored("""
        s[i] +=! A[i, j]
        T[i] +=! s[i] * A[i, j] + s[i]
    """, "T")
    assert temps == set()


def test_an_exhausted_isl_budget_leaves_the_sum_as_written(monkeypatch):
    """Factoring is an optimisation: where isl's budget runs out projecting a sum, the gradient is
    still built, with that sum unchanged."""
    import contextlib
    import importlib

    from polyc.errors import IslBudgetError
    factor = importlib.import_module("polyc.grad.factor")     # `pc.grad` the function shadows the package

    @contextlib.contextmanager
    def exhausted(what, budget=None):
        raise IslBudgetError(f"{what}: budget")
        yield

    monkeypatch.setattr(factor, "isl_budget", exhausted)
    lk = by_name("layernorm")
    g = pc.grad(lk.kernel, of="Y", wrt=["X"], saved=("mean", "var"))
    assert not any(t.name.startswith("mean_grad_sum") for t in g.program.tensors)
    rng = np.random.default_rng(4)
    X = rng.standard_normal((5, 40))
    check = pc.returning(lk.kernel, "mean", "var")(X=X, gamma=np.ones(40), beta=np.zeros(40), eps=1e-5)
    Yb = rng.standard_normal((5, 40))
    got = pc.compile(g, "auto")(X=X, gamma=np.ones(40), mean=check["mean"], var=check["var"], Y_grad=Yb, eps=1e-5)
    np.testing.assert_allclose(got, _layernorm_backward(X, np.ones(40), Yb, 1e-5)[0], rtol=1e-9, atol=1e-12)


def test_a_sum_of_many_terms_is_taken_apart_without_deep_recursion():
    """A left-deep sum of 1,500 terms (deeper than Python's recursion limit) is split iteratively."""
    terms = " + ".join(f"A[i, j] * {k}.0" for k in range(1, 1500))
    _, (program, temps) = _factored(f"""
        s[i] +=! A[i, j]
        T[i] +=! s[i] * A[i, j] + {terms}
    """, "T")
    assert temps == {"T_sum"}
    kept = [st for st in program.statements if st.target.tensor == "T" and st.reduction]
    assert len(kept) == 1 and len(list(kept[0].value.walk())) > 4000    # the literal terms, as they were
