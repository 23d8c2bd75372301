"""Every mark goes through one proof, `legality.check_mark`: the primitives, the CPU scheduler's
marks (`auto.add_marks`) and the CUDA mapping (`gpu.default_gpu_mapping`) cannot set a mark on a
loop that carries a dependence, whatever their own analyses conclude."""
from __future__ import annotations

import pytest

import polyc as pc
from polyc.errors import IllegalScheduleError
from polyc.schedule import auto, gpu
from polyc.schedule.legality import check_mark, with_proven_dims, with_proven_mark
from polyc.schedule.state import LoopKind


def matmul():
    return pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_marks")


def test_check_mark_refuses_concurrent_marks_on_a_carrying_loop():
    k = matmul()
    s = k.schedule()
    for mark in ("parallel", "vector", "block", "thread"):
        with pytest.raises(IllegalScheduleError, match="carries the flow dependence S1 -> S1"):
            with_proven_mark(s, "k", mark, f"mark {mark}")
    assert "thread" in with_proven_mark(s, "j", "thread", "ok").dims[s.dim_index("j")].marks


def test_reduction_marks_allow_only_reduction_dependences():
    k = matmul()
    s = k.schedule()
    with_proven_mark(s, "k", "reduction_parallel", "ok")     # only the sum's own chain
    prefix = pc.kernel("B[i] = B[i - 1] + A[i] where i in 1:N", A=pc.f64["N"], B=pc.f64["N"])
    with pytest.raises(IllegalScheduleError):
        with_proven_mark(prefix.schedule(), "i", "reduction_parallel", "not a reduction")


def test_a_cuda_tree_reduction_is_a_thread_loop_that_may_carry_its_reduction():
    source = matmul().schedule()
    s = with_proven_mark(source, "k", LoopKind.PARALLEL, "tree_reduce()", reduction=True)
    check_mark(s.with_mark("k", LoopKind.GPU_THREAD, "map_to_threads('k')"), s.model.dependences, "k")
    with pytest.raises(IllegalScheduleError):     # without the reduction strategy k carries S1 -> S1
        check_mark(source.with_mark("k", LoopKind.GPU_THREAD, "map_to_threads('k')"), s.model.dependences, "k")
    with pytest.raises(IllegalScheduleError):
        with_proven_mark(source, "k", LoopKind.VECTORIZED, "vector('k')")


def test_the_cuda_mapping_cannot_mark_a_loop_its_analysis_wrongly_calls_parallel(monkeypatch):
    k = matmul()
    real = gpu.loop_tree

    def wrong(schedule, deps, reassociate=True):      # an analysis that overlooks the k chain
        roots = real(schedule, deps, reassociate)
        for n in gpu._walk(roots):
            n.parallel, n.reducible = True, False
        return roots
    monkeypatch.setattr(gpu, "loop_tree", wrong)
    with pytest.raises(IllegalScheduleError, match=r"loop 'k\w*' carries the flow dependence S1 -> S1"):
        # (the nests stay apart: fused with its start value, k would not be mapped at all)
        gpu.default_gpu_mapping(k.schedule(), row_fusion=False, keep={"S0", "S1"})


def test_the_cpu_scheduler_cannot_mark_a_loop_its_analysis_wrongly_proves(monkeypatch):
    k = pc.kernel("B[i] = B[i - 1] + A[i] where i in 1:N", A=pc.f64["N"], B=pc.f64["N"])
    monkeypatch.setattr(auto, "_proves", lambda *a, **kw: True)
    with pytest.raises(IllegalScheduleError, match="loop 'i' carries"):
        auto.add_marks(k.schedule(), k.dependences())


def test_with_proven_dims_proves_only_new_marks():
    s = matmul().schedule()
    j = s.dim_index("j")
    dims = list(s.dims)
    dims[j] = dims[j].with_kind(LoopKind.VECTORIZED)
    out = with_proven_dims(s, dims, "vector(j)")
    assert "vector" in out.dims[j].marks
