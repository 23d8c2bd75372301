"""Typed schedule state: parsed isl maps, `LoopKind` kinds with a reduction flag, `Unroll` values,
the pack plans as a field, and AST build options derived from the dims in one place."""
import json
import pathlib
import warnings

import islpy as isl
import numpy as np
import pytest

import polyc as pc
from polyc.codegen.loop_ast import ast_build_options
from polyc.schedule import Dim, LoopKind, Schedule, Unroll
from polyc.schedule.auto import auto_schedule

DATA = pathlib.Path(__file__).parent / "data"
matmul = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")
rowsum = pc.kernel("s[i] +=! A[i, j]", name="rowsum")
total = pc.kernel("s +=! A[i, j]", name="total")


def _dim(s, loop):
    return s.dims[s.dim_index(loop)]


def _auto(kernel, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return auto_schedule(kernel, **kw)


def test_loop_kind_values_are_the_mark_names():
    assert [k.value for k in LoopKind] == ["serial", "parallel", "vector", "unroll", "block", "thread"]
    assert LoopKind.PARALLEL == "parallel" and isinstance(LoopKind.GPU_THREAD, str)


def test_unroll_is_a_typed_value():
    assert Unroll.none().is_none and Unroll.full().is_full and Unroll.by(4).hint == 4
    assert Unroll.full().hint is None and Unroll.none() == Unroll()
    assert [Unroll.from_legacy(v) for v in (0, -1, 3)] == [Unroll.none(), Unroll.full(), Unroll.by(3)]
    with pytest.raises(ValueError):
        Unroll("by", 0)


def test_dims_refuse_untyped_kinds_and_marks_on_scalar_dimensions():
    with pytest.raises(TypeError):
        Dim("i", frozenset({"parallel"}))
    with pytest.raises(TypeError):
        Dim(None, kinds=frozenset({LoopKind.PARALLEL}))
    with pytest.raises(TypeError):
        Dim("i", unroll=-1)


def test_maps_are_parsed_isl_maps_and_text_is_derived():
    s = matmul.schedule().tile(i=4)
    assert all(isinstance(m, isl.Map) for _, m in s.maps)
    assert s.map_texts["S1"] == str(s.statement_map("S1"))
    # Text given to the constructor is parsed once, at construction.
    again = Schedule(s.model, tuple(s.map_texts.items()), s.dims)
    assert all(isinstance(m, isl.Map) for _, m in again.maps) and again.maps == s.maps


def test_primitives_set_typed_kinds():
    s = matmul.schedule().tile(i=4, j=8).parallel("i_outer").split("k", 2).unroll("k_inner").unroll("j_inner", 4)
    assert _dim(s, "i_outer").kinds == {LoopKind.PARALLEL} and _dim(s, "i_outer").kind == LoopKind.PARALLEL
    assert _dim(s, "k_inner").unroll == Unroll.full() and _dim(s, "k_inner").kind == LoopKind.UNROLLED
    assert _dim(s, "j_inner").unroll == Unroll.by(4) and _dim(s, "j_inner").kind == LoopKind.SERIAL
    assert not any(d.reduction for d in s.dims)
    v = rowsum.schedule().vectorize("j", reduction=True)
    assert _dim(v, "j").kinds == {LoopKind.VECTORIZED} and _dim(v, "j").reduction
    assert _dim(v, "j").labels() == ("reduction_vector",)
    p = total.schedule().parallel("i", reduction=True)
    assert _dim(p, "i").runs(LoopKind.PARALLEL) and _dim(p, "i").reduction


def test_tiling_sends_parallel_kinds_out_and_keeps_unrolling_in():
    s = matmul.schedule().parallel("i").unroll("j", 2).tile(i=4, j=4)
    assert _dim(s, "i_outer").kinds == {LoopKind.PARALLEL} and not _dim(s, "i_inner").kinds
    assert _dim(s, "j_inner").unroll == Unroll.by(2) and _dim(s, "j_outer").unroll.is_none


def test_packing_is_a_field_with_the_plans():
    s = matmul.schedule().pack("S1")
    assert [p.statement for p in s.packing] == ["S1"]
    assert set(s.packing[0].loops) == s.packed_loops() and "[packed]" in s.tree
    assert "packed" in pc.codegen(matmul, s)


def test_ast_options_come_from_the_dims_alone():
    s = matmul.schedule().split("k", 4).unroll("k_inner")
    k = s.dim_index("k_inner")
    assert str(ast_build_options(s)) == str(isl.UnionMap(
        "{ [" + ", ".join(f"t{j}" for j in range(len(s.dims))) + f"] -> unroll[{k}] }}"))
    assert ast_build_options(matmul.schedule()) is None


def test_unroll_after_auto_keeps_the_register_lanes_unrolled_by_isl():
    """Bug: auto built its own AST options for the register lanes and any later primitive rebuilt
    them from the "unroll" marks only, so the lanes fell back to `#pragma GCC unroll 64` loops."""
    s = _auto(matmul, register_blocking=True, pack=False)
    lanes = [d.name for d in s.dims if d.is_loop and d.unroll.is_full]
    assert lanes
    other = next(d.name for d in s.dims if d.is_loop and d.unroll.is_none)
    later = s.unroll(other, 2)
    for sched in (s, later):
        src = pc.codegen(matmul, sched)
        assert "GCC unroll 64" not in src
        assert "unroll" in str(ast_build_options(sched))
    a, b = np.random.default_rng(0).standard_normal((2, 13, 13))
    np.testing.assert_allclose(pc.compile(matmul, later)(A=a, B=b), a @ b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name, kernel, expect", [
    ("v1_replay_matmul.json", matmul, {"i_outer": ({LoopKind.PARALLEL}, False, Unroll.none()),
                                       "j_inner": (set(), False, Unroll.by(4)),
                                       "k_inner": (set(), False, Unroll.full())}),
    ("v1_replay_rowsum.json", rowsum, {"j": ({LoopKind.VECTORIZED}, True, Unroll.none())}),
    ("v1_raw_matmul_lanes.json", matmul, {"i_tile": ({LoopKind.PARALLEL}, False, Unroll.none()),
                                          "j_1": ({LoopKind.VECTORIZED}, False, Unroll.none()),
                                          "k": (set(), False, Unroll.full())}),
    ("v1_raw_total.json", total, {"i": ({LoopKind.PARALLEL}, True, Unroll.none()),
                                  "j": ({LoopKind.VECTORIZED}, True, Unroll.none())}),
])
def test_schedule_files_saved_by_the_previous_version_load(name, kernel, expect):
    """Files written by polyc before the typed state (labels and 0 / -1 / n unroll integers)."""
    text = (DATA / name).read_text()
    s = Schedule.from_json(kernel, text)
    for loop, (kinds, reduction, unroll) in expect.items():
        d = _dim(s, loop)
        assert (d.kinds, d.reduction, d.unroll) == (kinds, reduction, unroll), loop
    # Saving again writes the dims as the old version did (a register lane, once a bare -1, is
    # now labelled "unroll" too: it is unrolled like any other fully unrolled loop).
    def plain(dims):
        return [dict(d, marks=[m for m in d["marks"] if m != "unroll"]) for d in dims]
    assert plain(json.loads(s.to_json())["dims"]) == plain(json.loads(text)["dims"])
    arrays = {t.name: np.random.default_rng(1).uniform(0, 1, (7, 9) if t.name == "A" else (9, 5))
              for t in kernel.program.tensors if t.name in ("A", "B")}
    got = pc.compile(kernel, s)(**arrays)
    want = pc.compile(kernel, kernel.schedule())(**arrays)
    np.testing.assert_allclose(got, want, rtol=1e-12)
