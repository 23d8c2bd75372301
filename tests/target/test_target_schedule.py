"""`schedule="auto"` decides for the Target it is given, whatever machine runs it."""
import json
import re

import numpy as np
import pytest

import polyc as pc
import polyc.target as target_module
from polyc.errors import ScheduleFileError
from polyc.schedule.auto import auto_schedule
from polyc.target import Target

MATMUL = "C[i, j] +=! A[i, k] * B[k, j]"


@pytest.fixture(scope="module")
def mm():
    return pc.kernel(MATMUL, name="matmul")


def _other_machine():
    """Facts of a machine unlike any test machine: tiny caches, SSE only, 3 cores, no libmvec."""
    return {"isa": "x86_64", "vector_bytes": 16, "l1": 16 * 1024, "l2": 128 * 1024, "l3": 2 << 20, "cores": 3,
            "features": frozenset({"sse4_2"}), "libmvec": ()}


def _decisions(s):
    """What a schedule decided, without the Target it records."""
    doc = json.loads(s.to_json())
    doc.pop("target", None)
    return doc


def test_an_explicit_target_gives_the_same_schedule_on_another_machine(mm, monkeypatch):
    t = Target.host().with_(l2=256 * 1024, l3=8 << 20, vector_bytes=32, cores=8)
    here = auto_schedule(mm, t)
    here_unpacked = auto_schedule(mm, t, pack=False)
    monkeypatch.setattr(target_module, "_host_facts", _other_machine)
    assert Target.host().l2 == 128 * 1024            # the probe now describes another machine ...
    assert auto_schedule(mm, Target.host()).to_json() != here.to_json()
    there = auto_schedule(mm, t)                     # ... and the explicit Target's schedule is unchanged
    assert _decisions(there) == _decisions(here) and there.target == t
    assert _decisions(auto_schedule(mm, t, pack=False)) == _decisions(here_unpacked)


def test_the_scheduler_reads_no_host_fact_for_an_explicit_target(mm, monkeypatch):
    def no_probe():
        raise AssertionError("the host was probed")
    t = Target.host().with_(l2=512 * 1024)
    monkeypatch.setattr(target_module, "_host_facts", no_probe)
    s = auto_schedule(mm, t)
    assert s.target == t
    src = pc.codegen(mm, "auto", target=t)
    assert "pc_" in src or "void" in src


def test_cache_sizes_change_tile_sizes(mm):
    h = Target.host()
    maps = {l2: auto_schedule(mm, h.with_(l2=l2), pack=False).map_texts["S1"] for l2 in (64 << 10, 1 << 20)}
    assert maps[64 << 10] != maps[1 << 20]
    tiles_i_by_64 = re.compile(r"-63 \+ i <= 64o\d+ <= i")   # isl's spelling of floor(i / 64)
    assert tiles_i_by_64.search(maps[1 << 20]) and not tiles_i_by_64.search(maps[64 << 10])


def test_vector_width_and_caches_change_packing(mm):
    h = Target.host()
    wide = auto_schedule(mm, h.with_(vector_bytes=64, l2=1 << 20))
    narrow = auto_schedule(mm, h.with_(vector_bytes=16, l2=128 << 10))
    plan_wide, plan_narrow = wide.packing[-1], narrow.packing[-1]
    assert (plan_wide.vector_bytes, plan_narrow.vector_bytes) == (64, 16)
    assert plan_wide.mc > plan_narrow.mc
    # The j panels are nv * lanes wide: 2 * 16 floats with 64-byte vectors, 2 * 4 with 16-byte ones.
    assert re.search(r"-31 \+ j <= 32o\d+ <= j", wide.map_texts["S1"])
    assert re.search(r"-7 \+ j <= 8o\d+ <= j", narrow.map_texts["S1"])


def test_one_core_leaves_the_packed_block_loop_serial(mm):
    h = Target.host()
    assert "parallel" in auto_schedule(mm, h.with_(cores=4)).history[-1]
    assert not any("i_block" in d.name and "parallel" in d.marks
                   for d in auto_schedule(mm, h.with_(cores=1)).dims if d.name)


@pytest.mark.parametrize("vector_bytes", [16, 32])
def test_a_schedule_for_a_narrower_machine_computes_the_right_thing(mm, vector_bytes):
    t = Target.host().with_(vector_bytes=vector_bytes, l2=256 * 1024)
    f = pc.compile(mm, "auto", target=t)
    assert f.target == t and f.schedule.packing[-1].vector_bytes == vector_bytes
    rng = np.random.default_rng(0)
    a, b = rng.random((37, 45), dtype=np.float32), rng.random((45, 70), dtype=np.float32)
    np.testing.assert_allclose(f(A=a, B=b), a @ b, rtol=1e-5)


def test_auto_schedule_records_its_target_in_json(mm):
    t = Target.host().with_(l2=256 * 1024, vector_bytes=32, cores=8)
    s = auto_schedule(mm, t)
    doc = json.loads(s.to_json())
    assert doc["target"] == t.to_dict()
    back = pc.Schedule.from_json(mm, s.to_json())
    assert back.target == t and back.maps == s.maps
    assert "target" not in json.loads(mm.schedule().tile(i=8).to_json())


def test_a_tampered_target_in_a_schedule_file_is_refused(mm):
    doc = json.loads(auto_schedule(mm, Target.host()).to_json())
    doc["target"]["flags"] = ["-O2", "-o", "/tmp/x.so"]
    with pytest.raises(ScheduleFileError) as e:
        pc.Schedule.from_json(mm, json.dumps(doc))
    assert e.value.where == "target.flags"
    doc["target"] = "c"
    with pytest.raises(ScheduleFileError) as e:
        pc.Schedule.from_json(mm, json.dumps(doc))
    assert e.value.where == "target.target"


def test_pack_records_the_blocking_it_used_so_replay_is_machine_independent(mm, monkeypatch):
    avx2 = Target.host().with_(isa="x86_64", vector_bytes=32, l2=256 * 1024,
                               features=Target.host().features - {"avx512f"})
    s = mm.schedule().pack("S1", target=avx2)
    step = s.steps[-1]
    # 16 ymm registers: a 6 x 2 register tile, and m blocks a multiple of its 6 rows.
    assert dict(step.kwargs)["vector_bytes"] == 32 and dict(step.kwargs)["mr"] == 6
    assert dict(step.kwargs)["mc"] == 60
    text = s.to_json()
    monkeypatch.setattr(target_module, "_host_facts", _other_machine)
    again = pc.Schedule.from_json(mm, text)
    assert again.maps == s.maps and again.packing[-1].vector_bytes == 32


def test_string_targets_still_work(mm):
    assert auto_schedule(mm, "c").target == Target.host()
    assert pc.compile(mm, "auto", target="c").target == Target.host()
    with pytest.raises(pc.TargetError, match="unknown target kind 'opencl'"):
        pc.compile(mm, target="opencl")


@pytest.mark.parametrize("description, registers, mr", [
    ("c isa=x86_64 vector_bytes=32 -avx512f", 16, 6),     # AVX2: 12 accumulators + 2 + 1 of 16
    ("c isa=x86_64 vector_bytes=16 -avx512f -avx2 -avx", 16, 6),
    ("c isa=x86_64 vector_bytes=64 +avx512f", 32, 8),     # AVX-512: 16 + 2 + 1 of 32
    ("c isa=aarch64 vector_bytes=16 -avx512f", 32, 8),
])
def test_the_register_tile_fits_the_targets_simd_registers(mm, description, registers, mr):
    t = Target.from_description(description)
    assert t.vector_registers == registers
    step = mm.schedule().pack("S1", target=t).steps[-1]
    kw = dict(step.kwargs)
    assert kw["mr"] == mr and kw["nv"] == 2
    assert kw["mr"] * kw["nv"] + kw["nv"] + 1 <= registers   # accumulators, panel vectors, broadcast
    assert kw["mc"] % mr == 0
