"""The gradient kernel is an ordinary kernel: gathers (no scatter), schedulable, printable, runnable
on c and cuda-emu; ties of max/min; names that never clash; loop kernels."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import by_name
from polyc.testing import check_grad

CONV = by_name("conv2d")


def _conv_inputs(rng):
    return CONV.make_inputs(CONV.sizes["small"], "f64", rng)


def test_conv2d_input_gradient_is_a_gather_with_the_flipped_filter():
    for pad, gathers, read in ((False, 2, ("Y_grad", ["n", "f", "h - kh", "-kw + w"])),
                               (True, 1, ("Y_grad_padded", ["n", "f", "KH + h - kh - 1", "KW - kw + w - 1"]))):
        g = pc.grad(CONV.kernel, of="Y", wrt=["X"], pad_borders=pad)
        updates = [s for s in g.program.statements if s.update == "+"]
        # The interior and the border (tests/grad/test_grad_interior.py), or one gather over the box
        # reading the zero-padded adjoint (tests/grad/test_grad_padding.py).
        assert len(updates) == gathers
        for st in updates:
            # Written element named by its own loop indices (a gather): X_grad[n, c, h, w].
            assert [str(a) for a in st.target.indices] == ["n", "c", "h", "w"]
            assert set(st.reduction) == {"f", "kh", "kw"}
            reads = {a.tensor: [str(i) for i in a.indices] for a in st.value.accesses()}
            assert reads[read[0]] == read[1]
    dtypes = {"X": pc.f64, "K": pc.f64, "Y_grad": pc.f64}
    assert "atomic" not in pc.codegen(g, "auto", dtypes=dtypes)
    assert "atomic" not in pc.codegen(g, target="cuda", dtypes=dtypes)   # no atomicAdd on the GPU either


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_gradient_kernels_run_on_c_and_cuda_emu(target):
    rng = np.random.default_rng(0)
    for name in ("conv2d", "softmax"):
        lk = by_name(name)
        wrt = [t.name for t in lk.kernel.program.tensors if t.role == "input"]
        check_grad(lk.kernel, "Y", wrt, lk.make_inputs(lk.sizes["small"], "f64", rng), target=target)


def test_gradient_kernel_takes_hand_schedules_and_auto():
    lk = by_name("matmul")
    g = pc.grad(lk.kernel, of="C", wrt=["A"])
    inputs = lk.make_inputs(lk.sizes["small"], "f64", np.random.default_rng(0))
    ybar = np.random.default_rng(1).standard_normal((24, 20))
    expected = g.reference(B=inputs["B"], C_grad=ybar)
    np.testing.assert_allclose(expected, ybar @ inputs["B"].T, rtol=1e-12)
    s = g.schedule()
    assert s.loop_names[0] == "i"              # the gradient's loops carry the forward's index names
    for sched in (s.tile(i=8).parallel("i_outer"), "auto"):
        got = pc.compile(g, sched)(B=inputs["B"], C_grad=ybar)
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert "A_grad" in g._repr_html_()


def test_gathers_sweep_memory_in_the_forward_order_and_fold_pointwise_adjoints():
    g = pc.grad(by_name("layernorm").kernel, of="Y", wrt=["X", "gamma", "beta"])
    gamma = next(s for s in g.program.statements if s.target.tensor == "gamma_grad" and s.update == "+")
    assert gamma.iterators == ("i", "j") and gamma.reduction == ("i",)   # rows read contiguously
    x_grad = [s for s in g.program.statements if s.target.tensor == "X_grad"]
    assert len(x_grad) == 1 and x_grad[0].update is None     # one definition, no zeroing pass
    temps = {t.name for t in g.program.tensors if t.role == "temp"}
    assert "xc" not in temps and "xc_grad" not in temps       # cheap pointwise arrays inlined
    softmax = pc.grad(by_name("softmax").kernel, of="Y", wrt=["X"])
    assert not any("exp" in str(s.value) for s in softmax.program.statements if s.target.tensor == "X_grad")


def test_max_reduction_splits_the_adjoint_evenly_among_ties():
    k = pc.kernel("m[i] max=! X[i, j]")
    g = pc.grad(k, of="m", wrt="X")
    X = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 0.0, 5.0, 5.0]])
    got = g(X=X, m_grad=np.array([1.0, 6.0]))
    np.testing.assert_allclose(got, [[0, 0.5, 0.5, 0], [2.0, 0, 2.0, 2.0]])


def test_min_reduction_and_pointwise_max_ties():
    k = pc.kernel("m[i] min=! X[i, j]")
    got = pc.grad(k, of="m", wrt="X")(X=np.array([[2.0, 1.0, 4.0]]), m_grad=np.array([3.0]))
    np.testing.assert_allclose(got, [[0, 3.0, 0]])
    relu = pc.kernel("Y[i] = max(X[i], 0.0)")
    got = pc.grad(relu, of="Y", wrt="X")(X=np.array([-1.0, 0.0, 2.0]), Y_grad=np.ones(3))
    np.testing.assert_allclose(got, [0.0, 0.5, 1.0])      # torch.maximum's rule at the tie


@pytest.mark.parametrize("text", [
    "Y[i] = exp(X[i]) + log(X[i]) + sqrt(X[i]) + tanh(X[i])",
    "Y[i] = pow(X[i], 3.0) + pow(2.0, X[i]) + abs(X[i] - 1.0)",
    "Y[i] = X[i] / (1.0 + X[i] * X[i]) - sin(X[i]) * cos(X[i])",
    "Y[i] = select(X[i] > 1.0, X[i] * X[i], -X[i]) + min(X[i], 1.2) + max(X[i], 0.9)",
    "Y[i] = pow(X[i], X[i])",
])
def test_pointwise_derivatives(text):
    x = np.random.default_rng(2).uniform(0.5, 1.5, 11)
    check_grad(pc.kernel(text), "Y", "X", X=x, directions=4)


def test_the_product_rule_on_a_square_doubles_one_term():
    """`xc * xc` gives `2.0 * (seed * xc)`, not the same product added to itself (exact either way)."""
    g = pc.grad(pc.kernel("Y[i] = X[i] * X[i] * W[i]"), of="Y", wrt="X")
    (st,) = [s for s in g.program.statements if s.target.tensor == g.grad_names["X"]]
    value = st.value
    assert value.op == "*" and value.lhs == pc.ir.Const(2.0)
    x = np.random.default_rng(3).standard_normal(9)
    check_grad(pc.kernel("Y[i] = X[i] * X[i] * W[i]"), "Y", "X", X=x, W=x[::-1].copy())


def test_stencil_and_guarded_reads_become_gathers_with_border_guards():
    k = pc.kernel("B[i] = select(i >= 1, A[i - 1], 0.0) + 2.0 * A[i] + A[i + 1] where i in 0:N-1",
                  A=pc.tensor["N"])
    a = np.random.default_rng(1).standard_normal(9)
    check_grad(k, "B", "A", A=a)
    g = pc.grad(k, of="B", wrt="A")
    ones = g(B_grad=np.ones(8))    # linear in A: the gradient does not read A
    np.testing.assert_allclose(ones, [3.0] + [4.0] * 6 + [3.0, 1.0])   # A[0] is never A[i - 1]


def test_a_product_in_a_guarded_branch_is_differentiated_inside_the_guard():
    """`select(c, e * X, 0)` with `e` defined only where c holds: the adjoints read `e` and `X`
    only where the branch is taken (it was `select(c, seed, 0) * e`, refused as reading an
    uninitialized `e`); a shifted read under its guard stays in bounds the same way."""
    k = pc.kernel("e[i, j] = X[i, j] * X[i, j] where j in 0:i+1\n"
                  "Y[i, j] = select(j <= i, e[i, j] * X[i, j], 0.0)", X=pc.tensor["S", "S"], Y=pc.tensor["S", "S"])
    x = np.arange(9.0).reshape(3, 3)
    got = pc.compile(pc.grad(k, of="Y", wrt="X"))(X=x, Y_grad=np.ones((3, 3)))
    np.testing.assert_array_equal(got, np.tril(3 * x * x))
    check_grad(k, "Y", "X", X=np.random.default_rng(4).standard_normal((4, 4)))
    shifted = pc.kernel("B[i] = select(i >= 1, A[i - 1] * A[i], 0.0)", A=pc.tensor["N"], B=pc.tensor["N"])
    check_grad(shifted, "B", "A", A=np.random.default_rng(5).standard_normal(7))


def test_a_branch_not_taken_leaks_no_nan_into_the_gradient():
    k = pc.kernel("Y[i] = select(A[i] > 0.0, A[i] * W[i], 0.0)")
    a, w = np.array([1.0, -1.0, 2.0]), np.array([3.0, np.inf, 4.0])
    np.testing.assert_array_equal(pc.grad(k, of="Y", wrt="A")(A=a, W=w, Y_grad=np.ones(3)), [3.0, 0.0, 4.0])


def test_strided_windows_and_floor_division_reads_invert():
    # `2*h + r` is solved for the window index r; `i // 2` through its quotient index.
    rng = np.random.default_rng(0)
    pool = pc.kernel("Y[n, h] +=! X[n, 2*h + r] * K[r] where r in 0:3", X=pc.tensor["N", "2*H+1"])
    check_grad(pool, "Y", ["X", "K"], X=rng.standard_normal((2, 11)), K=rng.standard_normal(3))
    up = pc.kernel("Y[i] = X[i // 2] * 3.0 where i in 0:2*N", X=pc.tensor["N"])
    np.testing.assert_allclose(pc.grad(up, of="Y", wrt="X")(Y_grad=np.arange(8.0)), 3.0 * np.array([1, 5, 9, 13]))


def test_gradient_names_never_clash():
    k = pc.kernel("Y[i] = X[i] * X_grad[i] + Y_grad[i]")
    g = pc.grad(k, of="Y", wrt=["X", "X_grad"])
    assert g.grad_names.seed == "Y_grad2"
    assert g.grad_names["X"] == "X_grad2" and g.grad_names["X_grad"] == "X_grad_grad"
    rng = np.random.default_rng(0)
    x, xg = rng.standard_normal((2, 5))
    out = g(X=x, X_grad=xg, Y_grad2=np.ones(5))   # Y_grad has no part in the gradient
    np.testing.assert_allclose(out["X_grad2"], xg)
    np.testing.assert_allclose(out["X_grad_grad"], x)


def test_single_assignment_loop_kernel():
    @pc.kernel
    def smooth(A: pc.f64["N"], B: pc.f64["N"], W: pc.f64["N"]):
        for i in range(1, N - 1):   # noqa: F821
            B[i] = W[i] * (A[i - 1] + A[i] + A[i + 1])
    rng = np.random.default_rng(0)
    check_grad(smooth, "B", ["A", "W"], A=rng.standard_normal(10), W=rng.standard_normal(10),
               B=np.zeros(10))


def test_in_place_time_loop_is_refused_naming_array_statement_and_line():
    @pc.kernel
    def heat(A: pc.f64["N"], B: pc.f64["N"], C: pc.f64["N"], T: int):
        for t in range(T):
            for i in range(1, N - 1):   # noqa: F821
                B[i] = C[i] * (A[i - 1] + A[i + 1])
            for i in range(1, N - 1):   # noqa: F821
                A[i] = B[i]
    with pytest.raises(pc.GradError, match=r"overwrites") as err:
        pc.grad(heat, of="A", wrt=["C"])
    msg = str(err.value)
    assert "line" in msg and ("A" in msg or "B" in msg)


@pytest.mark.parametrize("text, wrt, match", [
    ("Y[i] = X[2 * i] where i in 0:N", "X", "strided"),
    ("Y[i] *=! X[i, j]", "X", "product reduction"),
    ("Y[i] = X[i] * 2.0", "Y", "writes"),
    ("Y[i] = X[i] * alpha", "alpha", "scalar"),
    ("Y[i] = X[i] * 2.0", "Z", "not a tensor"),
])
def test_refusals_are_typed_and_say_why(text, wrt, match):
    k = pc.kernel(text, X=pc.tensor["2*N"]) if "2 * i" in text else pc.kernel(text)
    with pytest.raises(pc.GradError, match=match):
        pc.grad(k, of="Y", wrt=[wrt])


def test_an_output_the_kernel_also_reads_gets_its_whole_adjoint():
    k = pc.kernel("""
        Y[i] = X[i] * X[i]
        Z[i] = Y[i] * 3.0
    """, outputs=["Y", "Z"])
    g = pc.grad(k, of="Z", wrt=["X"])
    x = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(g(X=x, Z_grad=np.ones(3)), 6.0 * x)
    check_grad(k, "Z", "X", X=x)
    # `of` read by another statement: its adjoint is the one supplied plus what that read adds.
    k2 = pc.kernel("""
        Y[i] = X[i] * X[i]
        Z[i] = Y[i] * 3.0
    """, outputs=["Y", "Z"])
    g2 = pc.grad(k2, of="Y", wrt=["X"])
    np.testing.assert_allclose(g2(X=x, Y_grad=np.ones(3)), 2.0 * x)


def test_check_grad_on_a_kernel_declared_float32():
    k = pc.kernel("Y[i, j] = tanh(X[i, j]) * W[j]", X=pc.f32["I", "J"], W=pc.f32["J"])
    rng = np.random.default_rng(4)
    result = check_grad(k, "Y", ["X", "W"], X=rng.standard_normal((5, 6)).astype(np.float32),
                        W=rng.standard_normal(6).astype(np.float32))
    assert result.rtol == 2e-3


def test_a_sum_may_start_from_a_computed_value():
    k = pc.kernel("""
        T[i] = exp(A[i])
        T[i] += B[i, j] * A[i]
        Y[i] = T[i] * T[i]
    """)
    rng = np.random.default_rng(2)
    check_grad(k, "Y", ["A", "B"], A=rng.standard_normal(4), B=rng.standard_normal((4, 5)))
    with pytest.raises(pc.GradError, match="identity"):
        pc.grad(pc.kernel("""
            M[i] = A[i]
            M[i] max= B[i, j]
        """), of="M", wrt=["A", "B"])


def test_of_must_be_written():
    with pytest.raises(pc.GradError, match="never written"):
        pc.grad(pc.kernel("Y[i] = X[i]"), of="X", wrt=["X"])


@pytest.mark.parametrize("op", ["max", "min"])
def test_a_nan_extreme_gives_its_row_a_nan_gradient_as_torch_amax(op):
    g = pc.grad(pc.kernel(f"m[i] {op}=! A[i, j]", name=f"nan_{op}"), of="m", wrt=["A"])
    a = np.array([[1.0, np.nan, 3.0], [1.0, 3.0, 3.0]])
    want = [[0.0, 0.5, 0.5]] if op == "max" else [[1.0, 0.0, 0.0]]
    for schedule in (None, "auto"):
        got = pc.compile(g, schedule)(A=a, m_grad=np.ones(2))
        assert np.isnan(got[0]).all() and got[1:].tolist() == want      # not a silent zero row
    assert np.isnan(g.reference(A=a, m_grad=np.ones(2))[0]).all()


@pc.kernel
def _blockwise(X: pc.f64["N"], Y: pc.f64["N"]):
    for i in range(N):
        base = (i // 4) * 4
        Y[i] = X[i] * X[base]


def test_a_strided_read_through_a_floor_division_is_refused_in_the_users_terms():
    with pytest.raises(pc.GradError) as e:
        pc.grad(_blockwise, of="Y", wrt="X")
    assert "of X (a floor division)" in str(e.value) and "_q" not in str(e.value)
