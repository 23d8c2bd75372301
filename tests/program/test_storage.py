"""Array contraction is proven with isl and refused where an element outlives its iteration; the
memory planner reuses buffers by liveness; the vendor matcher takes only plain matrix products."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels.linalg import matmul
from kernels.program_ops import bias_add, gelu, matmul_nt
from polyc.program.contraction import contractible_dim
from polyc.program.memory import Step, plan_buffers
from polyc.program.vendor import recognise_gemm


def test_contraction_refused_when_an_element_is_read_in_another_iteration():
    k = pc.kernel("""
        T[i, j] = A[i, j] * 2.0
        B[i, j] = T[i, j] + T[N - 1 - i, j]
    """, A=pc.f32["N", "M"])
    s = k.schedule()
    with pytest.raises(pc.IllegalScheduleError):   # reading row N-1-i: fusing on rows is illegal
        s.fuse("S0", "S1", loop=s.dims[1].name)
    row = pc.kernel("""
        T[i, j] = A[i, j] * 2.0
        B[i, j] = T[i, j] + T[i, M - 1 - j]
    """, A=pc.f32["N", "M"])
    s = row.schedule()
    f = s.fuse("S0", "S1", loop=s.dims[1].name)
    assert contractible_dim(row.model, f, "T", 2, 1) == 0        # rows: yes
    assert contractible_dim(row.model, s, "T", 2, 1) is None     # unfused: T lives across rows


def test_planner_reuses_dead_buffers():
    steps = [Step("a", ("x",), (), 0), Step("b", ("y",), ("x",), 0), Step("c", ("z",), ("y",), 0),
             Step("d", ("out",), ("z",), 0)]
    sizes = {"x": 100, "y": 100, "z": 100, "out": 100}
    plan = plan_buffers(steps, sizes, ["out"], steps)
    assert plan.slot_of["z"] == plan.slot_of["x"] and len(plan.slot_bytes) == 2
    assert plan.planned_peak == 200 and plan.no_reuse_bytes == 300


def test_vendor_matcher():
    @pc.program(vendor=True, relayout=False)
    def prog(a: pc.f32["M", "K"], b: pc.f32["N", "K"], c: pc.f32["N"]):
        return bias_add.kernel(X=matmul_nt.kernel(A=a, B=b), b=c)
    gemm = recognise_gemm(prog.nodes[0])
    assert gemm is not None and gemm.transpose_b and not gemm.transpose_a
    assert recognise_gemm(prog.nodes[1]) is None
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((5, 3), (4, 3), (4,)))
    np.testing.assert_allclose(prog(a=a, b=b, c=c), a @ b.T + c, rtol=1e-5, atol=1e-6)
    tri = pc.kernel("C[i, j] +=! A[i, k] * B[k, j] where k in 0:i", A=pc.f32["N", "N"])

    @pc.program(vendor=True)
    def triangular(a: pc.f32["N", "N"], b: pc.f32["N", "N"]):
        return gelu.kernel(X=tri(A=a, B=b))
    assert recognise_gemm(triangular.nodes[0]) is None
    a, b = (rng.standard_normal((6, 6)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(triangular(a=a, b=b), triangular.reference(a=a, b=b), rtol=1e-5, atol=1e-6)
    assert type(triangular.groups[0]).__name__ == "Group"
    _ = matmul
