"""A saved automatic schedule reloads as the same schedule: same C, pack plans, CUDA contraction
plans and auto request (re-derived by this polyc, never trusted from the file)."""
from __future__ import annotations

import json
import pathlib

import pytest

import polyc as pc
from polyc.errors import IllegalScheduleError, ScheduleFileError
from polyc.schedule import Schedule
from polyc.schedule.auto import auto_schedule

from kernels import all_kernels

DATA = pathlib.Path(__file__).parent / "data"
mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")
_MM_AUTO = auto_schedule(mm)
_MM_TEXT = _MM_AUTO.to_json()

#: A fast subset of the library (packed contraction, stencil, reductions).
FAST = ("gemm", "jacobi-2d", "atax")


def _roundtrip_same_code(kernel) -> None:
    a = auto_schedule(kernel)
    b = Schedule.from_json(kernel, a.to_json())
    assert pc.codegen(kernel, b) == pc.codegen(kernel, a)
    assert len(b.packing) == len(a.packing)
    assert len(b.gpu_contractions) == len(a.gpu_contractions)
    assert b.auto_request == a.auto_request
    assert b.history == a.history


def test_a_saved_auto_matmul_reloads_packed_with_its_request():
    b = Schedule.from_json(mm, _MM_TEXT)
    assert len(_MM_AUTO.packing) == 1 and len(b.packing) == 1
    assert b.packing[0].loops == _MM_AUTO.packing[0].loops
    assert b.auto_request == _MM_AUTO.auto_request and b.auto_request.applies_to(b)
    assert pc.codegen(mm, b) == pc.codegen(mm, _MM_AUTO)
    assert "auto_request" in json.loads(_MM_TEXT)


@pytest.mark.parametrize("name", FAST)
def test_library_kernels_auto_roundtrip_fast(name):
    k = next(lk for lk in all_kernels() if lk.name == name)
    _roundtrip_same_code(k.kernel)


@pytest.mark.slow
@pytest.mark.parametrize("lk", all_kernels(), ids=lambda lk: lk.name)
def test_every_library_kernel_auto_roundtrip(lk):
    _roundtrip_same_code(lk.kernel)


def _tampered(**changes) -> str:
    doc = json.loads(_MM_TEXT)
    doc["auto_request"].update(changes)
    return json.dumps(doc)


@pytest.mark.parametrize("field, value, where", [
    ("tile", "yes", "auto_request.tile"),
    ("pack", 1, "auto_request.pack"),
    ("budget", -5, "auto_request.budget"),
    ("budget", 1.5, "auto_request.budget"),
    ("deadline", 1e9, "auto_request.deadline"),
    ("tile_sizes", [["i", 0]], "auto_request.tile_sizes[0][1]"),
    ("tile_sizes", [["__import__('os')", 4]], "auto_request.tile_sizes[0][0]"),
    ("tile_sizes", "i=4", "auto_request.tile_sizes"),
    ("history", [3], "auto_request.history[0]"),
    ("evil", True, "auto_request.evil"),
    ("target", {"kind": "nonsense"}, "auto_request.target"),
])
def test_tampered_auto_request_fields_are_refused(field, value, where):
    with pytest.raises(ScheduleFileError) as e:
        Schedule.from_json(mm, _tampered(**{field: value}))
    assert e.value.where.startswith(where)


def test_a_request_without_a_field_is_refused():
    doc = json.loads(_MM_TEXT)
    del doc["auto_request"]["jam_rows"]
    with pytest.raises(ScheduleFileError) as e:
        Schedule.from_json(mm, json.dumps(doc))
    assert e.value.where == "auto_request.jam_rows"


def test_a_request_that_does_not_reproduce_the_maps_gives_the_proven_raw_schedule():
    """pack=False re-derives another schedule: the stored maps are kept (proven), no plan is
    trusted, and no request is attached (the runtime must not re-decide someone else's schedule)."""
    b = Schedule.from_json(mm, _tampered(pack=False))
    assert b.packing == () and b.auto_request is None


def test_tampered_maps_with_a_request_are_still_proven():
    doc = json.loads(_MM_TEXT)
    assert "-> [0, i, j," in doc["maps"]["S0"]
    doc["maps"]["S0"] = doc["maps"]["S0"].replace("-> [0, i, j,", "-> [2, i, j,")   # init after the sums
    with pytest.raises(IllegalScheduleError):
        Schedule.from_json(mm, json.dumps(doc))


def test_a_replayable_file_with_a_request_is_refused():
    doc = json.loads(Schedule.source_order(mm.model).tile(i=4).to_json())
    doc["auto_request"] = json.loads(_MM_TEXT)["auto_request"]
    with pytest.raises(ScheduleFileError) as e:
        Schedule.from_json(mm, json.dumps(doc))
    assert e.value.where == "auto_request"


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("v1_*.json")))
def test_files_saved_by_the_previous_version_still_load(name):
    doc = json.loads((DATA / name).read_text())
    kernel = {"matmul": mm, "rowsum": pc.kernel("s[i] +=! A[i, j]", name="rowsum"),
              "total": pc.kernel("s +=! A[i, j]", name="total")}[doc["kernel"]]
    s = Schedule.from_json(kernel, json.dumps(doc))
    assert s.auto_request is None and pc.codegen(kernel, s)


# -- CUDA contraction plans -----------------------------------------------------------------------

def _gpu_text() -> str:
    from polyc.schedule.auto_gpu import auto_gpu_schedule
    return auto_gpu_schedule(mm.schedule(), pc.Target.resolve("cuda")).to_json()


def test_a_saved_cuda_schedule_reloads_with_its_contraction_plan():
    from polyc.schedule.auto_gpu import auto_gpu_schedule
    a = auto_gpu_schedule(mm.schedule(), pc.Target.resolve("cuda"))
    b = Schedule.from_json(mm, a.to_json())
    assert len(a.gpu_contractions) == 1 and len(b.gpu_contractions) == 1
    assert b.gpu_contractions[0].tile == a.gpu_contractions[0].tile
    assert pc.codegen(mm, b, target="cuda") == pc.codegen(mm, a, target="cuda")


@pytest.mark.parametrize("change, where", [
    (lambda p: p.update(tile=[64, 64, 8, 8]), "gpu_contractions[0].tile"),
    (lambda p: p.update(tile=[64, 64, 8, 8, True]), "gpu_contractions[0].tile"),
    (lambda p: p.update(statement="system('x')"), "gpu_contractions[0].statement"),
    (lambda p: p.update(init="S9"), "gpu_contractions[0].init"),
    (lambda p: p.update(code="evil"), "gpu_contractions[0]"),
])
def test_tampered_cuda_plans_are_refused(change, where):
    doc = json.loads(_gpu_text())
    change(doc["gpu_contractions"][0])
    with pytest.raises(ScheduleFileError) as e:
        Schedule.from_json(mm, json.dumps(doc))
    assert e.value.where == where


def test_a_cuda_plan_this_polyc_would_not_make_is_not_trusted():
    doc = json.loads(_gpu_text())
    doc["gpu_contractions"][0]["tile"] = [32, 32, 8, 4, 4]
    b = Schedule.from_json(mm, json.dumps(doc))
    assert b.gpu_contractions == ()


def test_an_auto_schedule_with_split_pieces_and_a_hand_primitive_reloads():
    """The saved maps' ordering dimension is `{ [0] }` with leftover existentials of the split
    pieces, which isl's `is_bounded` called unbounded: polyc refused the file it wrote."""
    import numpy as np
    k = pc.kernel("p[i] *=! A[i, j]", name="prodred")
    s = auto_schedule(k, sizes={"I": 2, "J": 1}).skew("i_outer", "i_inner", 3)
    back = Schedule.from_json(k, s.to_json())
    assert back.map_texts == s.map_texts
    a = np.random.default_rng(0).uniform(0.5, 1.5, (19, 5))
    np.testing.assert_allclose(pc.compile(k, back)(A=a), a.prod(axis=1), rtol=1e-12)
