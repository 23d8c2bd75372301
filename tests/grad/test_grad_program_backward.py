"""`program.grad(of=..., wrt=...)`: the backward pass of an operator program as an operator program
(`polyc.program.backward`), run in fused groups with BLAS calls and a memory plan; it must give
what `pc.grad(program)` (the traced kernel differentiated as one kernel) gives."""
import numpy as np
import pytest

import polyc as pc
from kernels import programs as P
from kernels.program_ops import add, gelu, matmul_nt, scale
from kernels.linalg import matmul
from kernels.nn import softmax
from polyc.errors import GradError
from polyc.program.vendor import recognise_gemm

CASES = [(P.mlp, dict(B=6, D=5, H=7)), (P.ln_residual_gelu, dict(M=5, N=8)), (P.attention, dict(S=6, D=4)),
         (P.conv_bn_relu, dict(N=1, C=2, H=5, W=4, F=3))]


def _seed(prog, x, rng_seed=1):
    out = prog(**x)
    return np.random.default_rng(rng_seed).standard_normal(out.shape).astype(np.float32)


def _one_kernel(prog, x, ybar, wrt):
    g = pc.grad(prog, of="out", wrt=wrt)
    return pc.compile(g)(**x, out_grad=ybar)


@pytest.mark.parametrize("build, sizes", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_backward_program_matches_the_one_kernel_gradient(build, sizes):
    prog = build()
    x = P.inputs(prog, sizes)
    ybar = _seed(prog, x)
    back = prog.grad(of="out", wrt=list(prog.inputs))
    got = back(**x, out_grad=ybar)
    want = _one_kernel(prog, x, ybar, list(prog.inputs))
    assert set(got) == set(want) == {f"{name}_grad" for name in prog.inputs}
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6 * max(1.0, np.abs(want[name]).max()))


def test_names_options_and_reference():
    prog = P.mlp(target="cuda-emu", vendor=False)
    back = prog.grad(of="out", wrt=["w2", "x"])
    assert back.target == "cuda-emu" and back.vendor is False
    assert back.inputs == ("x", "w1", "b1", "w2", "out_grad")
    assert back.grad_names.seed == "out_grad" and dict(back.grad_names.wrt) == {"w2": "w2_grad", "x": "x_grad"}
    x = P.inputs(prog, dict(B=3, D=4, H=5))
    ybar = _seed(prog, x)
    got = back(**x, out_grad=ybar)
    ref = back.reference(**x, out_grad=ybar)     # the gradient kernels' own references, composed
    want = _one_kernel(prog, x, ybar, ["w2", "x"])
    for name in ("w2_grad", "x_grad"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ref[name], want[name], rtol=1e-5, atol=1e-6)


def test_adjoints_of_a_tensor_read_twice_add_up():
    """y = gelu(x) + x, then scaled: x's adjoint is the sum of the path through gelu and the direct
    one; `add`'s gradient only copies its seed, so it runs no kernel of its own."""
    @pc.program
    def twice(x: pc.f32["M", "N"]):
        return scale.kernel(X=add.kernel(A=gelu.kernel(X=x), B=x), alpha=3.0)

    back = twice.grad(of="out", wrt="x")
    assert not any(n.kernel.name.startswith("add_grad") for n in back.nodes)
    x = np.random.default_rng(0).uniform(-2, 2, (4, 6)).astype(np.float32)
    ybar = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    got = back(x=x, out_grad=ybar)["x_grad"]
    c, xd = 0.7978845608028654, x.astype(np.float64)
    u = c * (xd + 0.044715 * xd ** 3)
    dgelu = 0.5 * (1 + np.tanh(u)) + 0.5 * xd * (1 - np.tanh(u) ** 2) * c * (1 + 3 * 0.044715 * xd ** 2)
    np.testing.assert_allclose(got, 3.0 * ybar * (dgelu + 1.0), rtol=1e-5, atol=1e-5)


def test_a_rank_zero_tensor_read_twice():
    """s = sum(x), read by two operators: the adjoints of a rank-0 tensor add up as tensors."""
    total = pc.kernel("S +=! X[i]", name="total")
    scale_by = pc.kernel("Y[i] = X[i] * S", name="scale_by", S=pc.tensor[()])

    @pc.program
    def squared_sum_scale(x: pc.f32["N"]):
        s = total(X=x)
        return scale_by(X=scale_by(X=x, S=s), S=s)     # x * s**2

    x = np.arange(1, 4, dtype=np.float32)
    got = squared_sum_scale.grad(of="out", wrt="x")(x=x, out_grad=np.ones(3, np.float32))["x_grad"]
    np.testing.assert_allclose(got, 6.0 ** 2 + 2 * 6.0 * x.sum(), rtol=1e-6)


def test_an_input_the_output_does_not_read_gets_zeros():
    @pc.program
    def two(a: pc.f32["M", "N"], b: pc.f32["M", "N"]):
        return {"left": gelu.kernel(X=a), "right": gelu.kernel(X=b)}

    back = two.grad(of="left", wrt=["a", "b"])
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    b = np.full((3, 4), np.inf, np.float32)            # never read: no inf * 0 either
    got = back(a=a, b=b, left_grad=np.ones((3, 4), np.float32))
    assert np.array_equal(got["b_grad"], np.zeros((3, 4), np.float32))
    assert np.all(got["a_grad"] != 0)


def test_an_input_added_to_the_output_gets_the_seed_itself():
    """`f(x) + u`: u's adjoint is the seed, unchanged; the backward program returns a copy of it
    (for u alone, and for u and x, and for an input added twice: twice the seed)."""
    @pc.program
    def residual(x: pc.f64["M", "N"], u: pc.f64["M", "N"]):
        return add.kernel(A=scale.kernel(X=x, alpha=2.0), B=u)

    @pc.program
    def twice(u: pc.f64["M", "N"]):
        return add.kernel(A=u, B=u)

    x, u = np.ones((2, 3)), np.zeros((2, 3))
    seed = np.arange(6.0).reshape(2, 3)
    for wrt in (["u"], ["x", "u"]):
        got = residual.grad(of="out", wrt=wrt)(x=x, u=u, out_grad=seed)
        assert set(got) == {f"{w}_grad" for w in wrt}
        np.testing.assert_array_equal(got["u_grad"], seed)
        assert not np.shares_memory(got["u_grad"], seed)
        if "x" in wrt:
            np.testing.assert_array_equal(got["x_grad"], 2.0 * seed)
    np.testing.assert_array_equal(twice.grad(of="out", wrt="u")(u=u, out_grad=seed)["u_grad"], 2.0 * seed)


def test_vendor_products_read_operands_transposed_without_a_relayout():
    """h_grad = out_grad @ w2ᵀ reads w2 transposed: the program re-lays w2 out for generated code,
    but a BLAS call reads it transposed as it is, and the transpose is not run."""
    prog = P.mlp(vendor=True)
    back = prog.grad(of="out", wrt=["x", "w1", "b1", "w2"])
    x = P.inputs(prog, dict(B=6, D=5, H=7))
    ybar = _seed(prog, x)
    got = back(**x, out_grad=ybar)
    text = back.explain()
    assert "the BLAS call reads w2 transposed; its re-layout is not run" in text
    assert not any("relayout_transpose" in u.name or any(n.kernel.name == "relayout_transpose" for n in u.nodes)
                   for u in back.groups if hasattr(u, "nodes"))
    assert sum(1 for u in back.groups if not hasattr(u, "nodes")) == 5   # every product a BLAS call
    want = _one_kernel(prog, x, ybar, ["x", "w1", "b1", "w2"])
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=1e-5)


def test_forward_attention_with_blas_skips_its_relayout():
    prog = P.attention(vendor=True)
    x = P.inputs(prog, dict(S=6, D=4))
    np.testing.assert_allclose(prog(**x), prog.reference(**x), rtol=1e-5, atol=1e-6)
    assert "the BLAS call reads K transposed; its re-layout is not run" in prog.explain()


def test_gemm_recognised_with_its_operands_either_way_round():
    @pc.program
    def product(a: pc.f32["M", "K"], b: pc.f32["K", "N"]):
        return pc.kernel("C[i, j] +=! B[k, j] * A[i, k]", name="mm_ba")(A=a, B=b)

    gemm = recognise_gemm(product.nodes[0])
    assert gemm is not None and (gemm.a, gemm.b) == ("a", "b") and not gemm.transpose_a and not gemm.transpose_b


def test_softmax_gradient_reads_the_saved_row_sums_not_exp():
    """The backward calls softmax again keeping its row sums, so softmax's gradient kernel reads
    `Y` and `s` (e = Y * s) and computes no exponential; only the forward softmax does."""
    @pc.program
    def probs(x: pc.f32["M", "N"]):
        return softmax.kernel(X=x)

    back = probs.grad(of="out", wrt="x")
    grads = [n for n in back.nodes if n.kernel.name.startswith("softmax_grad")]
    assert len(grads) == 1
    assert not any("exp" in repr(st.value) for st in grads[0].kernel.program.statements)
    assert {t.name for t in grads[0].kernel.program.tensors if t.role == "input"} == {"Y", "s", "Y_grad"}
    x = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    ybar = np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)
    y = probs(x=x).astype(np.float64)
    want = y * (ybar - (ybar * y).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(back(x=x, out_grad=ybar)["x_grad"], want, rtol=1e-4, atol=1e-6)


def test_saved_forward_values_are_not_recomputed():
    prog = P.mlp()
    hidden = next(n for n in prog.trace_nodes if n.kernel.name == "gelu").outputs[0]
    back = prog.grad(of="out", wrt=["w2"], saved=[hidden])
    assert back.inputs == ("x", "w1", "b1", "w2", hidden, "out_grad")
    assert [n.kernel.name for n in back.nodes] == ["matmul_grad"]     # w2_grad = hiddenᵀ @ out_grad alone
    x = P.inputs(prog, dict(B=4, D=3, H=5))
    ybar = _seed(prog, x)
    hid = gelu.kernel.reference(X=x["x"] @ x["w1"] + x["b1"])
    got = back(**x, **{hidden: hid}, out_grad=ybar)["w2_grad"]
    np.testing.assert_allclose(got, hid.T.astype(np.float64) @ ybar, rtol=1e-5, atol=1e-5)


def test_memory_plan_of_a_backward_program():
    prog = P.ln_residual_gelu()
    back = prog.grad(of="out", wrt=list(prog.inputs))
    x = P.inputs(prog, dict(M=64, N=48))
    back(**x, out_grad=_seed(prog, x))
    assert back.memory.planned_peak < back.memory.unfused_peak


def test_requests_are_checked():
    prog = P.mlp()
    with pytest.raises(GradError, match="not an output"):
        prog.grad(of="h", wrt=["x"])
    with pytest.raises(GradError, match="not inputs"):
        prog.grad(of="out", wrt=["matmul0_C"])
    with pytest.raises(GradError, match="distinct inputs"):
        prog.grad(of="out", wrt=["x", "x"])
    with pytest.raises(GradError, match="not a tensor program"):
        prog.grad(of="out", wrt=["x"], saved=["x"])
    with pytest.raises(GradError, match="twice"):
        prog.grad(of="out", wrt=["x"], saved=["out", "out"])

    doubled = pc.kernel("Y[i] = X[i] * 2", name="doubled", X=pc.i32["N"], Y=pc.i32["N"])

    @pc.program
    def ints(x: pc.i32["N"]):
        return doubled(X=x)
    with pytest.raises(GradError, match="'x' of program 'ints' has the integer type"):
        ints.grad(of="out", wrt="x")


def test_operators_with_two_results_and_programs_with_two_outputs():
    """An operator whose two results both carry adjoints (a row sum and a square, both read later),
    differentiated for either of the program's two outputs."""
    two = pc.kernel("S[i] +=! X[i, j]\nY[i, j] = X[i, j] * X[i, j]", name="two_results")
    rowscale = pc.kernel("Z[i, j] = Y[i, j] * S[i]", name="rowscale")

    @pc.program
    def both(x: pc.f32["M", "N"]):
        r = two(X=x)
        z = rowscale(Y=r["Y"], S=r["S"])
        return z, scale.kernel(X=add.kernel(A=z, B=gelu.kernel(X=x)), alpha=2.0)

    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    ybar = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    for of in ("out0", "out1"):
        got = both.grad(of=of, wrt="x")(x=x, **{f"{of}_grad": ybar})["x_grad"]
        want = pc.compile(pc.grad(both, of=of, wrt="x"))(x=x, **{f"{of}_grad": ybar})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    xd, yd = x.astype(np.float64), ybar.astype(np.float64)     # out0 = x² · rowsum(x), by hand
    s = xd.sum(axis=1, keepdims=True)
    by_hand = 2 * xd * s * yd + (yd * xd * xd).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(both.grad(of="out0", wrt="x")(x=x, out0_grad=ybar)["x_grad"], by_hand,
                               rtol=1e-4, atol=1e-5)


def test_products_of_a_transposed_operand_in_generated_code():
    """attention's QKᵀ without BLAS: the backward reads K through its own products' gradients."""
    @pc.program(vendor=False)
    def qk(q: pc.f32["S", "D"], k: pc.f32["S", "D"], v: pc.f32["S", "D"]):
        return matmul.kernel(A=matmul_nt.kernel(A=q, B=k), B=v)

    back = qk.grad(of="out", wrt=["q", "k", "v"])
    x = {n: np.random.default_rng(i).standard_normal((5, 3)).astype(np.float32) for i, n in enumerate("qkv")}
    ybar = np.random.default_rng(9).standard_normal((5, 3)).astype(np.float32)
    got = back(**x, out_grad=ybar)
    q, k, v = (x[n].astype(np.float64) for n in "qkv")
    s_grad = ybar @ v.T
    np.testing.assert_allclose(got["v_grad"], (q @ k.T).T @ ybar, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["q_grad"], s_grad @ k, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["k_grad"], s_grad.T @ q, rtol=1e-5, atol=1e-5)
