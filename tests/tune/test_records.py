"""Records: pc.tune end to end, schedule="tuned", resuming, JSON-lines export/import (untrusted)."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import polyc as pc
from polyc.errors import TuneRecordError, TuningWarning
from polyc.tune import Records

MM = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="tune_records_mm")
SIZES = {"I": 48, "J": 40, "K": 32}


def _tune(db, trials):
    return pc.tune(MM, SIZES, dtype="f64", seconds=120, trials=trials, rounds=2, min_sample_s=0.0, db=db,
                   progress=False, batch=2)


@pytest.mark.slow
def test_tune_records_resumes_and_compiles_tuned(db):
    with pytest.warns(TuningWarning):
        pc.compile(MM, schedule="tuned")                 # nothing recorded yet: auto, with a warning
    first = _tune(db, 3)
    rows = Records(db).rows()
    assert len({r["candidate"] for r in rows}) >= 3 and all(r["ok"] for r in rows)
    assert first.table()[0]["ok"] and first.curve
    a, b = np.random.default_rng(0).standard_normal((48, 32)), np.random.default_rng(1).standard_normal((32, 40))
    np.testing.assert_allclose(pc.compile(MM, first.schedule)(A=a, B=b), a @ b, rtol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningWarning)
        tuned = pc.compile(MM, schedule="tuned")
    np.testing.assert_allclose(tuned(A=a, B=b), a @ b, rtol=1e-10)
    best = Records(db).best()
    assert dict(tuned.schedule.map_texts) == json.loads(best["schedule"])["maps"]
    # A second run resumes: what was measured is not measured again.
    measured = {r["candidate"] for r in rows}
    second = _tune(db, 2)
    fresh = [t for t in second.trials if not t.resumed]
    assert fresh and not {t.candidate.key() for t in fresh} & measured


def test_export_import_and_tampered_records(db, tmp_path):
    _tune(db, 2)
    out = tmp_path / "records.jsonl"
    n = Records(db).export_jsonl(out)
    other = Records(tmp_path / "other.sqlite")
    assert other.import_jsonl(out) == n and len(other.rows()) == n
    line = json.loads(out.read_text().splitlines()[0])

    def bad(change, tag):
        doc = dict(line, **change)
        p = tmp_path / f"bad-{tag}.jsonl"
        p.write_text(json.dumps(doc) + "\n")
        with pytest.raises(TuneRecordError):
            other.import_jsonl(p)

    bad({"ok": "yes"}, "ok")
    bad({"ratio": -1}, "ratio")
    bad({"candidate": json.dumps({"seed": "auto", "knobs": {}, "steps": [
        {"primitive": "__import__", "args": ["os"], "kwargs": {}}]})}, "primitive")
    bad({"candidate": json.dumps({"seed": "rm -rf", "knobs": {}, "steps": []})}, "seed")
    bad({"schedule": json.dumps({"format": "pickle"})}, "schedule")
    bad({"extra": 1}, "fields")


def test_a_tampered_schedule_is_a_typed_error_at_use(db):
    _tune(db, 2)
    records = Records(db)
    best = records.best()
    saved = json.loads(best["schedule"])
    name = next(iter(saved["maps"]))
    saved["maps"][name] = saved["maps"][name].replace("->", "-> ", 1).replace("[", "[ ", 1) + " "
    import sqlite3
    with sqlite3.connect(str(records.path)) as c:
        c.execute("UPDATE records SET schedule = ? WHERE id = ?", (json.dumps(saved), best["id"]))
    with pytest.raises(pc.PolycError):
        pc.compile(MM, schedule="tuned")


def test_a_file_that_is_not_a_tuning_database_is_a_typed_error(tmp_path):
    """The database is untrusted input like its records: overwritten or truncated, it is a
    TuneRecordError naming the file (it was sqlite3.DatabaseError), wherever it is read."""
    garbage = tmp_path / "tune.sqlite"
    garbage.write_bytes(b"not sqlite " * 100)
    with pytest.raises(TuneRecordError, match=r"tune\.sqlite: is not a readable tuning database"):
        Records(garbage)
    with pytest.raises(TuneRecordError, match="not a readable tuning database"):
        pc.tune.tuned_schedule(MM, db=garbage)
    with pytest.raises(TuneRecordError, match="not a readable tuning database"):
        pc.tune(MM, SIZES, dtype="f64", trials=1, db=garbage, progress=False)


def test_the_model_is_warm_started_from_other_kernels_and_sizes_on_this_target(db):
    from polyc.tune.measure import Measurement
    from polyc.tune.records import RecordKey
    from polyc.tune.space import Candidate
    from polyc.tune.tuner import _warm_start
    records = Records(db)
    mine = RecordKey("k1", "I=64", "f32", "host")
    for n, key in enumerate([mine, RecordKey("k1", "I=1024", "f32", "host"), RecordKey("k2", "I=64", "f32", "host"),
                             RecordKey("k3", "I=64", "f32", "other-machine")]):
        records.add(key, "k", Candidate("source", steps=(("unroll", ("i", 2 + n), ()),)), "",
                    Measurement("x", True, 1.0, 0.5 + n, 0.1), [float(n), 1.0], {})
    X, y = _warm_start(records, mine)
    assert X == [[1.0, 1.0], [2.0, 1.0]]          # other sizes and kernels, this target only, not this key
    assert np.allclose(np.exp(y), [1.5, 2.5])
