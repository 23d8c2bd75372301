"""Programs compose operators and run correctly against the composition of their references, on
the C target and the CUDA emulator, fused and contracted as the rules say."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import programs as P

TOL = dict(rtol=2e-4, atol=2e-5)


def test_attention_head_keeps_its_products_apart_by_default():
    """Fused row by row, the two products would lose their packed kernels (2x slower at S=1024):
    by default each product is a group of its own and scale + softmax fuse between them."""
    prog = P.attention()
    arrays = P.inputs(prog, dict(S=40, D=8))
    np.testing.assert_allclose(prog(**arrays), prog.reference(**arrays), **TOL)
    names = [[n.kernel.name for n in g.nodes] for g in prog.groups]
    assert names == [["relayout_transpose"], ["relayout_matmul"], ["scale", "softmax"], ["matmul"]]
    assert {t for t, _, _ in prog.groups[2].contracted} >= {"scale1_Y", "softmax2_e"}
    assert "kept apart" in prog.explain()


def test_attention_head_fuses_everything_and_contracts_to_rows():
    """`contract=True` asks for memory first: the products fuse row by row too."""
    prog = P.attention(contract=True)
    arrays = P.inputs(prog, dict(S=40, D=8))
    got = prog(**arrays)
    np.testing.assert_allclose(got, prog.reference(**arrays), **TOL)
    Q, K, V = arrays["Q"], arrays["K"], arrays["V"]
    s = Q @ K.T * np.float32(0.125)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, (e / e.sum(axis=1, keepdims=True)) @ V, **TOL)
    relayout, group = prog.groups     # K is transposed once, ahead of the fused group
    assert [n.kernel.name for n in relayout.nodes] == ["relayout_transpose"]
    assert [n.kernel.name for n in group.nodes] == ["relayout_matmul", "scale", "softmax", "matmul"]
    assert group.fused_schedule is not None
    shapes = {t.name: len(t.shape) for t in group.kernel.program.tensors if t.role == "temp"}
    # every full-size intermediate became a row (rank 1), every row statistic a scalar (rank 0)
    assert shapes == {"relayout_matmul5_C": 1, "scale1_Y": 1, "softmax2_Y": 1, "softmax2_e": 1,
                      "softmax2_m": 0, "softmax2_s": 0}
    assert prog.memory.ratio >= 4
    assert any("re-laid out" in n for n in prog.notes)


def test_attention_without_relayout_fuses_the_transposed_product():
    prog = P.attention(relayout=False, contract=True)
    arrays = P.inputs(prog, dict(S=24, D=8), seed=5)
    np.testing.assert_allclose(prog(**arrays), prog.reference(**arrays), **TOL)
    (group,) = prog.groups
    assert [n.kernel.name for n in group.nodes] == ["matmul_nt", "scale", "softmax", "matmul"]
    assert "matmul_nt0_C" in {t for t, _, _ in group.contracted}


@pytest.mark.parametrize("contract", [False, True])
def test_a_program_called_at_several_shapes_plans_each(contract):
    """Buffers are planned per call shape: a second, larger shape gets larger buffers (it crashed
    reshaping the first shape's buffer), and going back to the first reuses its plan."""
    prog = P.attention(contract=contract)
    plans = []
    for sizes in (dict(S=16, D=8), dict(S=40, D=8), dict(S=16, D=12), dict(S=16, D=8)):
        arrays = P.inputs(prog, sizes)
        np.testing.assert_allclose(prog(**arrays), prog.reference(**arrays), **TOL)
        plans.append(prog.plan(**arrays))
    assert plans[1].memory.planned_peak > plans[0].memory.planned_peak
    assert plans[1].sizes["S"] == 40 and plans[3] is plans[0]
    assert plans[1].units == plans[0].units      # the grouping does not depend on the sizes


def test_mlp_block_small_fuses_large_binds_blas():
    prog = P.mlp()
    small = P.inputs(prog, dict(B=12, D=6, H=10))
    np.testing.assert_allclose(prog(**small), prog.reference(**small), **TOL)
    # generated code for both products, each its own group; bias + GELU fused between them
    assert [len(g.nodes) for g in prog.groups] == [1, 2, 1] and not prog.explain().count("BLAS")
    lean = P.mlp(contract=True)
    np.testing.assert_allclose(lean(**small), prog.reference(**small), **TOL)
    assert len(lean.groups) == 1
    forced = P.mlp(vendor=True)
    np.testing.assert_allclose(forced(**small), prog.reference(**small), **TOL)
    kinds = [type(u).__name__ for u in forced.groups]
    assert kinds == ["VendorCall", "Group", "VendorCall"]
    assert "BLAS gemm" in forced.explain()
    # the bias + GELU group sits between two vendor calls: its result is handed on, in a planned buffer
    assert forced.memory.slot_bytes


def test_layernorm_residual_gelu():
    prog = P.ln_residual_gelu()
    arrays = P.inputs(prog, dict(M=9, N=33))
    np.testing.assert_allclose(prog(**arrays), prog.reference(**arrays), **TOL)
    (group,) = prog.groups
    assert len(group.nodes) == 3 and len(group.contracted) >= 4


def test_conv_batchnorm_relu():
    prog = P.conv_bn_relu()
    arrays = P.inputs(prog, dict(N=2, C=3, H=6, W=5, F=4))
    got = prog(**arrays)
    np.testing.assert_allclose(got, prog.reference(**arrays), **TOL)
    assert got.shape == (2, 4, 6, 5) and (got >= 0).all()
    (group,) = prog.groups
    assert {t for t, _, _ in group.contracted} == {"conv2d0_Y", "batchnorm1_Y"}


def test_unfused_program_is_the_same_function():
    fused, plain = P.attention(), P.attention(fuse=False)
    arrays = P.inputs(fused, dict(S=17, D=5), seed=3)
    np.testing.assert_allclose(fused(**arrays), plain(**arrays), **TOL)
    assert len(plain.groups) == 5 and all(not g.contracted for g in plain.groups)
    assert plain.memory.planned_peak > fused.memory.planned_peak


@pytest.mark.parametrize("contract", [False, True])
def test_cuda_emulator(contract):
    prog = P.attention(target="cuda-emu", contract=contract)
    arrays = P.inputs(prog, dict(S=20, D=4), seed=1)
    np.testing.assert_allclose(prog(**arrays), prog.reference(**arrays), **TOL)
    assert bool(prog.groups[-1].contracted) == contract


def test_gpu_arrays_are_refused_off_the_gpu():
    """A device array (anything with `__cuda_array_interface__`) passed to a program built for the
    C target is a typed error naming the argument, not a crash inside numpy."""
    class FakeDeviceArray:
        __cuda_array_interface__ = dict(shape=(4, 3), typestr="<f4", data=(0, False), version=3)

    prog = P.ln_residual_gelu()
    arrays = P.inputs(prog, dict(M=4, N=3))
    arrays["x"] = FakeDeviceArray()
    with pytest.raises(pc.ArgumentError, match="x is a GPU array.*target 'c'"):
        prog(**arrays)
