"""`Schedule.pack`: contractions recognised from access relations, proven, and run as packed
BLAS-style code whose results equal the source order's bit for bit."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import kernels
import polyc as pc
from polyc.schedule.auto import auto_schedule
from polyc.errors import PackingDroppedWarning
from polyc.schedule.packing import Contraction, contraction_form, packing_plans

MATMUL = "C[i, j] +=! A[i, k] * B[k, j]"
#: Small blocks so that sizes of a few dozen cross every block and panel edge.
TINY = dict(mr=3, nv=1, kc=5, mc=6)


def _rand(rng, shape, dtype):
    return rng.random(shape).astype(dtype)


#: Without fused multiply-adds, whose use gcc decides per loop shape, equal evaluation orders give
#: equal bits.
EXACT = ["-O3", "-march=native", "-ffp-contract=off"]


def _copies(arrays):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in arrays.items()}


def _same_as_source(kernel, schedule, **arrays):
    """Packed result vs the source-order loops (both compiled without contraction)."""
    got = pc.compile(kernel, schedule, flags=EXACT)(**_copies(arrays))
    want = pc.compile(kernel, flags=EXACT)(**_copies(arrays))
    return got, want


# -- recognition -------------------------------------------------------------------------------

def test_recognises_matmul_from_its_accesses():
    form = contraction_form(pc.kernel(MATMUL, name="mm_form").program, "S1")
    assert isinstance(form, Contraction)
    assert (form.m, form.n, form.k, form.batch) == (("i",), ("j",), ("k",), ())


def test_recognises_batch_loops_and_scalar_factors():
    bm = pc.kernel("C[n, i, j] +=! A[n, i, k] * B[n, k, j]", name="bm_form")
    assert contraction_form(bm.program, "S1").batch == ("n",)
    g = pc.kernel("C[i, j] += alpha * A[i, k] * B[k, j]", name="gemm_form")
    form = contraction_form(g.program, "S0")
    assert form.m == ("i",) and "alpha" in repr(form.m_factor)


def test_lanes_follow_the_targets_unit_stride():
    # C is laid out along i here, so i is the SIMD (n-side) loop.
    k = pc.kernel("C[j, i] +=! A[i, k] * B[k, j]", name="mm_t_form")
    form = contraction_form(k.program, "S1")
    assert (form.m, form.n) == (("j",), ("i",))


@pytest.mark.parametrize("text, why", [
    ("y[i] +=! A[i, j] * x[j]", "not a contraction"),
    ("C[i, j] +=! A[i, k] + B[k, j]", "product"),
    ("C[i, j] max=! A[i, k] * B[k, j]", "accumulation"),
])
def test_other_statements_are_not_contractions(text, why):
    k = pc.kernel(text, name="not_mm")
    assert why in contraction_form(k.program, k.program.statements[-1].name)


def test_pack_refuses_non_contractions_and_reductions_over_a_triangle():
    mv = pc.kernel("y[i] +=! A[i, j] * x[j]", name="mv_pack")
    with pytest.raises(pc.PolycError, match="needs a contraction"):
        mv.schedule().pack("S1")
    # The range of k depends on i: no blocking of k is the same for every row.
    tri = pc.kernel("C[i, j] +=! A[i, k] * B[k, j] where k in 0:i+1", name="tri_pack",
                    A=pc.f64["N", "N"], B=pc.f64["N", "N"], C=pc.f64["N", "N"])
    with pytest.raises(pc.PolycError, match="region of loops i, j times a range of k"):
        tri.schedule().pack("S1")


def test_a_register_tile_too_large_for_registers_is_refused_at_once():
    """mr = nv = 64 is within each bound but is 4096 accumulators: gcc did not finish compiling its
    micro-kernel in five minutes.  Refused when asked, and when a saved schedule says so."""
    mm = pc.kernel(MATMUL, name="mm_regs")
    with pytest.raises(pc.errors.ScheduleArgumentError, match=r"64 x 64 vectors \(4096 accumulators\)"):
        mm.schedule().pack("S1", mr=64, nv=64)
    mm.schedule().pack("S1", mr=16, nv=4, mc=64, nc=1024)   # 64 accumulators: spills, compiles in a second
    saved = re.sub(r'"nv": \d+', '"nv": 64', re.sub(r'"mr": \d+', '"mr": 64', mm.schedule().pack("S1").to_json()))
    assert '"mr": 64' in saved and '"nv": 64' in saved
    with pytest.raises(pc.PolycError, match="4096 accumulators"):
        pc.Schedule.from_json(mm, saved)


def test_pack_that_would_break_a_dependence_is_refused_naming_it():
    @pc.kernel
    def chained(A: pc.f64["N", "N"], B: pc.f64["N", "N"], C: pc.f64["N", "N"]):
        for i in range(1, N):
            for k in range(N):
                A[i, k] = C[i - 1, k]
            for j in range(N):
                for k in range(N):
                    C[i, j] += A[i, k] * B[k, j]

    with pytest.raises(pc.IllegalScheduleError, match=r"dependence S\d -> S\d on [AC]"):
        chained.schedule().pack("S1")


# -- exact results ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sizes", [(1, 1, 1), (7, 13, 5), (37, 23, 41), (6, 5, 16)])
def test_packed_matmul_equals_the_source_order_bit_for_bit(dtype, sizes):
    mm = pc.kernel(MATMUL, name="mm_exact")
    I, K, J = sizes
    rng = np.random.default_rng(0)
    a, b = _rand(rng, (I, K), dtype), _rand(rng, (K, J), dtype)
    for sched in (mm.schedule().pack("S1", **TINY), mm.schedule().pack("S1")):
        assert "S1_packed(" in pc.codegen(mm, sched, dtypes={"A": pc.f64, "B": pc.f64})
        got, want = _same_as_source(mm, sched, A=a, B=b)
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5)


def test_parallel_packed_contraction_is_exact(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    mm = pc.kernel(MATMUL, name="mm_par")
    sched = mm.schedule().pack("S1", **TINY).parallel("i_block")
    rng = np.random.default_rng(1)
    a, b = _rand(rng, (50, 29), np.float64), _rand(rng, (29, 33), np.float64)
    got, want = _same_as_source(mm, sched, A=a, B=b)
    np.testing.assert_array_equal(got, want)
    assert "S1_packed_par(" in pc.codegen(mm, sched)


def test_the_n_side_factor_is_packed_in_the_order_of_its_memory(threads):
    """`B[k, j]` is read row by row in groups of panels, `B[j, k]` panel by panel (each in the
    order its elements lie in memory); both are exact across groups, partial groups and panels."""
    rng = np.random.default_rng(11)
    for text, b_shape, along_rows in ((MATMUL, (29, 203), True), ("C[i, j] +=! A[i, k] * B[j, k]", (203, 29), False)):
        mm = pc.kernel(text, name="mm_order_" + ("rows" if along_rows else "cols"))
        sched = mm.schedule().pack("S1", mr=3, nv=1, kc=7, mc=6).parallel("i_block")
        code = pc.codegen(mm, sched, dtypes={"A": pc.f64, "B": pc.f64})
        assert ("groups of panels" in code) == along_rows
        a, b = _rand(rng, (37, 29), np.float64), _rand(rng, b_shape, np.float64)
        got, want = _same_as_source(mm, sched, A=a, B=b)
        np.testing.assert_array_equal(got, want)


def test_whole_micro_tiles_update_the_target_in_place_where_its_rows_allow():
    """Whole tiles of a row-major target run the micro-kernel on the target itself (rows `ldc`
    apart); a convolution's target, whose lanes span several loops, goes through the tile buffer."""
    from polyc.codegen.c_packed import target_rows_direct
    cases = [(MATMUL, "S1", True), ("C[n, i, j] +=! A[n, i, k] * B[n, k, j]", "S1", True),
             ("C[j, i] +=! A[i, k] * B[k, j]", "S1", True)]
    for text, st_name, direct in cases:
        k = pc.kernel(text, name="direct_probe")
        form = contraction_form(k.program, st_name)
        assert target_rows_direct(k.program.statement(st_name), form) == direct, text
        assert ("pc_ldc" in pc.codegen(k, k.schedule().pack(st_name))) == direct
    conv = kernels.by_name("conv2d").kernel
    assert not target_rows_direct(conv.program.statement("S1"), contraction_form(conv.program, "S1"))


def test_accumulating_gemm_with_scalars_transposes_and_batches():
    rng = np.random.default_rng(2)
    g = pc.kernel("C[i, j] += alpha * A[k, i] * B[j, k]", name="gemm_tt")
    a, b, c = _rand(rng, (19, 23), np.float64), _rand(rng, (31, 19), np.float64), _rand(rng, (23, 31), np.float64)
    got, want = _same_as_source(g, g.schedule().pack("S0", **TINY), A=a, B=b, C=c, alpha=0.75)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, c + 0.75 * a.T @ b.T, rtol=1e-12)

    bm = pc.kernel("C[n, i, j] +=! A[n, i, k] * B[n, k, j]", name="bm_exact")
    a, b = _rand(rng, (3, 14, 9), np.float32), _rand(rng, (3, 9, 17), np.float32)
    got, want = _same_as_source(bm, bm.schedule().pack("S1", **TINY), A=a, B=b)
    np.testing.assert_array_equal(got, want)

    t = pc.kernel("C[j, i] +=! A[i, k] * B[k, j]", name="mm_t_exact")
    a, b = _rand(rng, (13, 11), np.float32), _rand(rng, (11, 21), np.float32)
    got, want = _same_as_source(t, t.schedule().pack("S1", **TINY), A=a, B=b)
    np.testing.assert_array_equal(got, want)


def test_triangular_target_region_is_packed_and_exact():
    """syrk: C[i, j] for j <= i only.  The packed code computes whole tiles of the bounding box but
    loads and stores only the triangle, and skips tiles outside it."""
    syrk = pc.kernel("C[i, j] += alpha * A[i, k] * A[j, k] where j in 0:i+1", name="syrk_tri",
                     A=pc.f64["N", "M"], C=pc.f64["N", "N"])
    sched = syrk.schedule().pack("S0", **TINY)
    assert packing_plans(sched)["S0"].mask is not None
    assert "S0_packed(" in pc.codegen(syrk, sched)
    rng = np.random.default_rng(7)
    for n, m in ((1, 1), (17, 9), (29, 40)):
        a, c = _rand(rng, (n, m), np.float64), _rand(rng, (n, n), np.float64)
        got, want = _same_as_source(syrk, sched, A=a, C=c, alpha=1.5)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.triu(got, 1), np.triu(c, 1))   # above the diagonal untouched


def test_convolution_packs_groups_of_loops_exactly():
    """conv2d: rows f, lanes (n, h, w), reduction (c, kh, kw), read as an implicit im2col."""
    lk = kernels.by_name("conv2d")
    form = contraction_form(lk.kernel.program, "S1")
    assert (form.m, form.n, form.k) == (("f",), ("n", "h", "w"), ("c", "kh", "kw"))
    sched = lk.kernel.schedule().pack("S1", **TINY)
    rng = np.random.default_rng(8)
    for sizes in (dict(N=1, C=2, H=5, W=6, F=3, KH=3, KW=3), dict(N=2, C=3, H=9, W=11, F=5, KH=2, KW=3)):
        inputs = lk.make_inputs(sizes, "f64", rng)
        got, want = _same_as_source(lk.kernel, sched, **inputs)
        np.testing.assert_array_equal(got, want)


def test_a_reduction_run_downwards_is_not_reordered():
    """Packing keeps each element's updates in increasing k: a source that sums downwards (whose
    rounding depends on that order) is refused."""
    @pc.kernel
    def down(A: pc.f64["I", "K"], B: pc.f64["K", "J"], C: pc.f64["I", "J"]):
        for i in range(I):
            for j in range(J):
                for k in range(K - 1, -1, -1):
                    C[i, j] += A[i, k] * B[k, j]

    with pytest.raises(pc.IllegalScheduleError, match=r"pack\(S0\) is illegal: the flow dependence S0 -> S0 on C"):
        down.schedule().pack("S0")


def test_empty_reduction_leaves_the_initial_values():
    mm = pc.kernel(MATMUL, name="mm_empty_k")
    a, b = np.zeros((4, 0), np.float32), np.zeros((0, 6), np.float32)
    np.testing.assert_array_equal(pc.compile(mm, mm.schedule().pack("S1"))(A=a, B=b), np.zeros((4, 6), np.float32))


# -- when the packed code is not used --------------------------------------------------------------

def test_integer_and_mixed_precision_contractions_run_the_plain_loops():
    ints = pc.kernel(MATMUL, name="mm_int", A=pc.i64["I", "K"], B=pc.i64["K", "J"], C=pc.i64["I", "J"])
    sched = ints.schedule().pack("S1", **TINY)
    assert "S1_packed" not in pc.codegen(ints, sched)
    rng = np.random.default_rng(3)
    a, b = rng.integers(-9, 9, (9, 7)), rng.integers(-9, 9, (7, 8))
    np.testing.assert_array_equal(pc.compile(ints, sched)(A=a, B=b), a @ b)

    mixed = pc.kernel(MATMUL, name="mm_mixed", A=pc.f32["I", "K"], B=pc.f32["K", "J"], C=pc.f64["I", "J"])
    src = pc.codegen(mixed, mixed.schedule().pack("S1"))
    assert "S1_packed" not in src


def test_a_later_primitive_on_the_packed_loops_disables_the_packed_code():
    mm = pc.kernel(MATMUL, name="mm_later")
    sched = mm.schedule().pack("S1", **TINY)
    assert packing_plans(sched)
    with pytest.warns(PackingDroppedWarning, match="interchange"):
        changed = sched.interchange("i_row", "j_lane")
    assert not packing_plans(changed)
    assert "S1_packed" not in pc.codegen(mm, changed)
    rng = np.random.default_rng(4)
    a, b = _rand(rng, (10, 12), np.float64), _rand(rng, (12, 9), np.float64)
    got, want = _same_as_source(mm, changed, A=a, B=b)
    np.testing.assert_array_equal(got, want)


def test_pack_replays_from_json():
    mm = pc.kernel(MATMUL, name="mm_json")
    sched = mm.schedule().pack("S1", kc=64).parallel("i_block")
    again = pc.Schedule.from_json(mm, sched.to_json())
    assert again.loop_names == sched.loop_names
    assert packing_plans(again)["S1"].kc == 64


# -- the automatic schedule ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["matmul", "batched_matmul", "conv2d"])
def test_auto_packs_library_contractions(name):
    lk = kernels.by_name(name)
    sched = auto_schedule(lk.kernel)
    assert packing_plans(sched), sched
    sizes = lk.sizes["small"]
    inputs = lk.make_inputs(sizes, "f64", np.random.default_rng(5))
    np.testing.assert_allclose(pc.compile(lk.kernel, sched)(**inputs), lk.expected(inputs), rtol=1e-12)


@pytest.mark.parametrize("name", ["gemm", "syrk"])
def test_auto_packs_polybench_contractions_and_keeps_them_exact(name):
    lk = kernels.by_name(name)
    sched = auto_schedule(lk.kernel)
    assert packing_plans(sched), sched
    inputs = lk.make_inputs(lk.sizes["MINI"], "f64", np.random.default_rng(6))
    expected = _copies(inputs)
    pc.compile(lk.kernel, sched)(**inputs)
    lk.kernel.reference(**expected)
    np.testing.assert_allclose(inputs["C"], expected["C"], rtol=1e-12)


def test_a_step_after_pack_that_drops_the_plan_warns():
    """A primitive that changes a packed statement's map after `pack` makes its plan stale: the
    statement would quietly run as ordinary loops; the user is told, naming the step."""
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_drop")
    packed = mm.schedule().pack("S1")
    with pytest.warns(PackingDroppedWarning, match=r"tile\(i=4\) changed the loops of packed statement S1"):
        tiled = packed.tile(i=4)
    assert "S1" not in packing_plans(tiled)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # marks keep the maps; automatic packing of 3mm drops nothing
        packing_plans(packed.parallel("i_block"))
        from kernels import by_name
        assert sorted(packing_plans(pc.compile(by_name("3mm").kernel, "auto").schedule)) == ["S1", "S3", "S5"]


def test_loops_of_a_packed_nest_cannot_be_unrolled():
    """The packing generator writes those loops itself: a full unroll of `j_panel` was accepted
    and every call then spent the whole isl budget generating loops."""
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_unroll")
    s = mm.schedule().pack("S1")
    for loop, factor in (("j_panel", None), ("i_row", 2)):
        with pytest.raises(pc.PolycError, match=f"cannot unroll loop '{loop}': it is a loop of the packed nest of S1"):
            s.unroll(loop, factor)
    a, b = np.ones((7, 13)), np.ones((13, 5))
    np.testing.assert_array_equal(pc.compile(mm, s.unroll("i", 2))(A=a, B=b), a @ b)   # outside the nest
