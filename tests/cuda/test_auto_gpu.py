"""The CUDA schedule is the scheduler's: `auto_gpu_schedule` maps every loop and plans the tiled
contractions, and code generation prints what the schedule says (issue 15, item 2)."""
from __future__ import annotations

from dataclasses import replace

import islpy as isl
import numpy as np
import pytest

import kernels
import polyc as pc
from polyc.codegen.cuda import generate_cuda
from polyc.codegen.typing import resolve_typing
from polyc.schedule.auto_gpu import auto_gpu_schedule, gpu_contraction_plans
from polyc.schedule.gpu import is_mapped
from polyc.schedule.outline import outline_text

REPRESENTATIVE = ("matmul", "batched_matmul", "softmax", "jacobi-2d", "conv2d", "matvec")


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_auto_codegen_equals_generating_from_the_returned_schedule(name):
    k = kernels.by_name(name).kernel
    s = auto_gpu_schedule(k.schedule())
    typing = resolve_typing(k.program, {}, require_inputs=False)
    assert pc.codegen(k, "auto", target="cuda") == generate_cuda(s, typing).source
    assert pc.codegen(k, target="cuda") == generate_cuda(s, typing).source   # the default is "auto" on a GPU


def test_the_schedule_shows_its_block_and_thread_mapping():
    k = pc.kernel("B[i, j] = A[i, j] * 2.0", name="scale")
    s = auto_gpu_schedule(k.schedule())
    assert is_mapped(s)
    marks = {m for d in s.dims for m in d.marks}
    assert {"block", "thread"} <= marks
    text = outline_text(s)
    assert "block" in text and "thread" in text


def test_the_contraction_choice_is_recorded_in_the_schedule():
    mm = kernels.by_name("matmul").kernel
    s = auto_gpu_schedule(mm.schedule())
    plans = gpu_contraction_plans(s)
    assert len(plans) == 1
    (plan,) = plans.values()
    assert plan.init is not None and plan.threads == 256
    assert (plan.contraction.i, plan.contraction.j) == (("i",), ("j",))
    assert any("tiled_contraction" in h for h in s.history)
    mv = kernels.by_name("matvec").kernel
    assert not gpu_contraction_plans(auto_gpu_schedule(mv.schedule()))


def test_code_generation_decides_nothing():
    """Without the scheduler, an unmapped schedule is printed as it is: one thread, no tiled kernel."""
    mm = kernels.by_name("matmul").kernel
    typing = resolve_typing(mm.program, {}, require_inputs=False)
    plain = generate_cuda(mm.schedule(), typing)
    assert not any(kk.private for kk in plain.launch.kernels)
    assert all(g is None for kk in plain.launch.kernels for g in kk.grid + kk.block)
    a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    # ... and the same holds end to end when the user maps it differently:
    s = mm.schedule().map_to_blocks("i")
    f = pc.compile(mm, s, target="cuda-emu")
    np.testing.assert_allclose(f(A=a, B=b), a @ b)
    assert not any(kk.private for kk in f.generated.launch.kernels)


def test_a_plan_whose_statement_changed_is_not_printed():
    """A plan holds for the statement's map when planned; a later change disables it (as packing)."""
    mm = kernels.by_name("matmul").kernel
    s = auto_gpu_schedule(mm.schedule())
    (plan,) = gpu_contraction_plans(s).values()
    # the planned statement one step later in its first (sequence) dimension: a different map
    maps = tuple((n, isl.Map(text.replace("-> [", "-> [1 + ", 1)) if n == plan.statement else m)
                 for (n, m), text in zip(s.maps, s.map_texts.values()))
    assert s.map_texts[plan.statement] != replace(s, maps=maps).map_texts[plan.statement]
    changed = replace(s, maps=maps)
    assert changed.gpu_contractions == s.gpu_contractions
    assert not gpu_contraction_plans(changed)


def test_a_user_mapping_is_kept():
    k = pc.kernel("B[i, j] = A[i, j] + 1.0", name="inc")
    s = k.schedule().map_to_blocks("i").map_to_threads("j")
    assert auto_gpu_schedule(s) is s


def test_passing_the_returned_schedule_gives_the_same_code():
    mm = kernels.by_name("matmul").kernel
    s = auto_gpu_schedule(mm.schedule())
    assert pc.codegen(mm, s, target="cuda") == pc.codegen(mm, "auto", target="cuda")


def test_tiled_contractions_are_planned_only_where_they_fit_the_targets_limits():
    """The per-block limits of the Target decide (in the scheduler) whether a contraction runs as the
    shared-memory tiled kernel: 8 KiB of shared memory cannot hold its A and B tiles."""
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", A=pc.f32["M", "K"], B=pc.f32["K", "N"])
    roomy = pc.Target.cuda("sm_90")
    tight = roomy.with_(shared_memory_bytes=8 * 1024)
    assert "pc_As" in pc.codegen(k, target=roomy)
    assert "pc_As" not in pc.codegen(k, target=tight)
    f64 = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", A=pc.f64["M", "K"], B=pc.f64["K", "N"])
    # Both element sizes stage 33,280 bytes (f64 halves the K step); f64 needs twice the registers.
    assert "pc_As" not in pc.codegen(k, target=roomy.with_(shared_memory_bytes=2 * (16 * 132 + 16 * 128) * 4 - 1))
    just_f32 = roomy.with_(registers_per_block=40_000)
    assert "pc_As" in pc.codegen(k, target=just_f32) and "pc_As" not in pc.codegen(f64, target=just_f32)


@pc.kernel
def _rowsum(A: pc.f32["I", "J"], y: pc.f32["I"]):
    for i in range(I):
        for j in range(J):
            y[i] += A[i, j]


def test_reductions_are_tree_reduced_only_where_the_cpu_would_reassociate_them():
    """A loop kernel keeps its written order on the GPU too unless `reassociate=True`; an
    Einstein sum may be reassociated.  The sum below loses 1.0s against 1e8 in float32, so the
    order shows in the result."""
    def tree_reduced(s):
        return any("reduction_parallel" in d.marks for d in s.dims)

    assert not tree_reduced(auto_gpu_schedule(_rowsum.schedule()))
    assert not tree_reduced(auto_gpu_schedule(_rowsum.schedule(), reassociate=False))
    assert tree_reduced(auto_gpu_schedule(_rowsum.schedule(), reassociate=True))
    einstein = pc.kernel("y[i] +=! A[i, j]")
    assert tree_reduced(auto_gpu_schedule(einstein.schedule()))
    assert not tree_reduced(auto_gpu_schedule(einstein.schedule(), reassociate=False))
    a = np.zeros((2, 300), np.float32)
    a[:, 0], a[:, 1::2], a[:, 2] = 1e8, 1.0, -1e8
    want = np.zeros(2, np.float32)
    _rowsum.reference(A=a, y=want)
    for options in ({}, {"reassociate": False}):
        got = np.zeros(2, np.float32)
        pc.compile(_rowsum, "auto", target="cuda-emu", **options)(A=a, y=got)
        np.testing.assert_array_equal(got, want)
    got = pc.compile(einstein, "auto", target="cuda-emu", reassociate=False)(A=a)
    np.testing.assert_array_equal(got, einstein.reference(A=a))


def test_launch_extents_of_skewed_tiles_are_computed_without_exact_minima():
    """Exact minima over the projected tiles of this schedule cost isl minutes (the CUDA path
    spun for 685 s before the budget error); a launch extent may over-approximate its loop."""
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="skewed_mm")
    s = mm.schedule().skew("i", "k", 1).tile(i=4, k=4).skew("k_outer", "j", 1)
    assert "__global__" in pc.codegen(mm, s, target="cuda")
    a, b = np.random.default_rng(0).standard_normal((7, 13)), np.random.default_rng(1).standard_normal((13, 5))
    np.testing.assert_allclose(pc.compile(mm, s, target="cuda-emu")(A=a, B=b), a @ b, rtol=1e-12)


def test_printing_a_schedule_keeps_its_contraction_plans():
    """isl prints a map differently once other questions have normalised it: the plans, matched
    by their maps' text, were lost after `print(s)` and the tiled kernel silently with them."""
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="printed_mm")
    before = pc.codegen(mm, auto_gpu_schedule(mm.schedule()), target="cuda")
    s = auto_gpu_schedule(mm.schedule())
    str(s)
    assert list(gpu_contraction_plans(s)) == ["S1"]
    assert pc.codegen(mm, s, target="cuda") == before == pc.codegen(mm, "auto", target="cuda")
