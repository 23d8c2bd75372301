"""Saving schedules: JSON history round trips (also in a fresh process), re-proof on replay,
clear errors for damaged files or another kernel, and the human-readable text."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import polyc as pc
from polyc.errors import IllegalScheduleError, PolycError
from polyc.schedule import Schedule

matmul = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")
ROOT = Path(__file__).resolve().parents[2]


def rich_schedule():
    return (matmul.schedule().tile(i=4, j=8).parallel("i_outer").split("k", 2).unroll("k_inner")
            .interchange("j_inner", "k_outer"))


def test_json_round_trip_same_process():
    s = rich_schedule()
    doc = json.loads(s.to_json())
    assert doc["format"] == "polyc-schedule" and doc["replayable"]
    assert [st["primitive"] for st in doc["steps"]] == ["tile", "parallel", "split", "unroll", "interchange"]
    assert doc["steps"][0]["kwargs"] == {"i": 4, "j": 8}
    back = Schedule.from_json(matmul, s.to_json())
    assert back.maps == s.maps and back.dims == s.dims and back.packing == s.packing
    assert back.history == s.history
    assert Schedule.from_json(matmul.model, s.to_json()).maps == s.maps


def test_json_round_trip_in_a_new_process(tmp_path):
    s = rich_schedule()
    path = tmp_path / "sched.json"
    path.write_text(s.to_json())
    script = textwrap.dedent(f"""
        import numpy as np, polyc as pc
        from polyc.schedule import Schedule
        mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")
        s = Schedule.from_json(mm, open({str(path)!r}).read())
        A = np.arange(15.0).reshape(5, 3); B = np.arange(12.0).reshape(3, 4)
        assert np.allclose(pc.compile(mm, s)(A=A, B=B), A @ B)
        print(repr(s))
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "tile(i=4, j=8).parallel('i_outer')" in out.stdout


def test_replay_reproves_legality():
    s = matmul.schedule().parallel("i")
    doc = json.loads(s.to_json())
    doc["steps"][0]["args"] = ["k"]
    with pytest.raises(IllegalScheduleError, match="replaying step 1 .* loop 'k' carries"):
        Schedule.from_json(matmul, json.dumps(doc))


def test_other_kernel_is_refused():
    other = pc.kernel("B[i] = A[i] * 2.0", name="scale")
    with pytest.raises(PolycError, match="statements"):
        Schedule.from_json(other, rich_schedule().to_json())


def test_damaged_files_are_refused():
    with pytest.raises(PolycError, match="invalid JSON"):
        Schedule.from_json(matmul, "{not json")
    with pytest.raises(PolycError, match="not a saved polyc schedule"):
        Schedule.from_json(matmul, json.dumps({"steps": []}))
    doc = json.loads(rich_schedule().to_json())
    doc["steps"][0]["primitive"] = "__class__"
    with pytest.raises(PolycError, match="unknown primitive"):
        Schedule.from_json(matmul, json.dumps(doc))


def test_changed_kernel_detected_by_stored_maps():
    doc = json.loads(matmul.schedule().tile(i=4).to_json())
    doc["maps"]["S1"] = doc["maps"]["S1"].replace("4o", "8o").replace("-3 + i", "-7 + i")
    with pytest.raises(PolycError, match="different schedule"):
        Schedule.from_json(matmul, json.dumps(doc))


def test_schedule_without_primitive_history_is_saved_as_maps():
    s = matmul.schedule().tile(i=4)
    raw = s.with_mark("j", "parallel", "my_own_mark('j')")
    doc = json.loads(raw.to_json())
    assert doc["replayable"] is False
    back = Schedule.from_json(matmul, raw.to_json())
    assert back.maps == raw.maps and back.dims == raw.dims
    bad = json.loads(matmul.schedule().with_mark("k", "parallel", "x").to_json())
    with pytest.raises(IllegalScheduleError, match="loop 'k' carries"):
        Schedule.from_json(matmul, json.dumps(bad))


def test_to_text():
    text = rich_schedule().to_text()
    first = text.splitlines()[0]
    assert first == ("matmul.schedule().tile(i=4, j=8).parallel('i_outer').split('k', 2).unroll('k_inner')"
                     ".interchange('j_inner', 'k_outer')")
    assert "for i_outer" in text and "S1: C[i, j] += A[i, k] * B[k, j]" in text
