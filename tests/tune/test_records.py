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


def test_a_tampered_best_record_is_skipped_with_a_warning_at_use(db):
    _tune(db, 2)
    records = Records(db)
    best = records.best()
    assert len(records.ranked()) >= 2
    saved = json.loads(best["schedule"])
    name = next(iter(saved["maps"]))
    del saved["maps"][name]                  # a statement's schedule missing from the record
    import sqlite3
    with sqlite3.connect(str(records.path)) as c:
        c.execute("UPDATE records SET schedule = ? WHERE id = ?", (json.dumps(saved), best["id"]))
    with pytest.warns(TuningWarning, match=f"skipping record {best['id']}, which does not reproduce"):
        f = pc.compile(MM, schedule="tuned")
    a, b = np.random.default_rng(0).standard_normal((2, 8, 8))
    np.testing.assert_allclose(f(A=a, B=b), a @ b, rtol=1e-12)


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


def test_the_same_kernel_defined_elsewhere_finds_its_records():
    from polyc.tune.records import kernel_hash
    again = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="tune_records_mm")   # another line
    other = pc.kernel("C[i, j] +=! A[i, k] * B[j, k]", name="tune_records_mm")
    assert kernel_hash(again) == kernel_hash(MM) != kernel_hash(other)


def _record(**change):
    from polyc.tune.records import FIELDS
    row = dict(kernel_hash="h", kernel_name="k", size_class="I=64", dtypes="f64", target="host",
               candidate=json.dumps({"seed": "source", "knobs": {}, "steps": []}), schedule="", ok=1,
               seconds=0.1, ratio=1.0, spread=0.0, features="[1.0, 2.0]", error="", genome="{}")
    row.update(change)
    assert set(row) == set(FIELDS)
    return json.dumps(row)


def test_imported_numbers_past_floats_range_are_refused(tmp_path):
    p = tmp_path / "huge.jsonl"
    p.write_text(_record(ratio=10 ** 400) + "\n")
    with pytest.raises(TuneRecordError, match="ratio must be a non-negative number"):
        Records(tmp_path / "db.sqlite").import_jsonl(p)


def test_a_step_with_arguments_its_primitive_does_not_take_is_a_record_error():
    from polyc.tune.registry_view import apply_step
    with pytest.raises(TuneRecordError, match="bad arguments for parallel"):
        apply_step(MM.schedule(), "parallel", ("i", "j", "k"), {})


def test_edited_rows_are_skipped_by_resume_and_warm_start(db):
    import sqlite3

    from polyc.tune.measure import Measurement
    from polyc.tune.records import RecordKey
    from polyc.tune.space import Candidate, Space
    from polyc.tune.registry_view import target_view
    from polyc.tune.tuner import _resumed, _warm_start
    records = Records(db)
    mine = RecordKey("k1", "I=64", "f32", "host")
    space = Space(MM, target_view("c"), 4)
    genes = {g.name: "abc" for g in space.genes}
    for n, key in enumerate([mine, RecordKey("k2", "I=64", "f32", "host"), RecordKey("k3", "I=64", "f32", "host")]):
        records.add(key, "k", Candidate("source", steps=(("unroll", ("i", 2 + n), ()),)), "",
                    Measurement("x", True, 1.0, 1.5, 0.1), [float(n), 1.0], genes)
    with sqlite3.connect(str(records.path)) as c:
        c.execute("UPDATE records SET features = 'not json' WHERE kernel_hash = 'k2'")
        c.execute("UPDATE records SET ratio = -5 WHERE kernel_hash = 'k3'")
    assert _warm_start(records, mine) == ([], [])
    state = _resumed(records, mine, space)
    assert len(state.trials) == 1 and not state.genomes          # "abc" is no value of any gene
    with sqlite3.connect(str(records.path)) as c:
        c.execute("UPDATE records SET features = '[\"a\"]' WHERE kernel_hash = 'k1'")
    assert not _resumed(records, mine, space).trials


def test_tuned_falls_back_to_auto_when_the_default_database_cannot_be_made(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.delenv("POLYC_TUNE_DB", raising=False)
    monkeypatch.setenv("POLYC_TUNE_DB", str(blocker / "tune.sqlite"))
    with pytest.warns(TuningWarning, match="cannot be read"):
        f = pc.compile(MM, schedule="tuned")
    a, b = np.ones((3, 2)), np.ones((2, 4))
    assert np.array_equal(f(A=a, B=b), a @ b)
    with pytest.raises(TuneRecordError, match="cannot be made"):
        pc.tune.tuned_schedule(MM, db=blocker / "tune.sqlite")


def test_the_cost_model_fits_only_features_of_this_runs_length():
    from polyc.tune.measure import Measurement
    from polyc.tune.search import SearchState, Trial, _fit
    from polyc.tune.space import Candidate

    class Seen:
        def fit(self, X, y):
            self.X, self.y = X, y
    state = SearchState()
    for n, (feats, resumed) in enumerate([((1.0,), True), ((1.0, 2.0, 3.0), False), ((4.0, 5.0, 6.0), False)]):
        cand = Candidate("source", steps=(("unroll", ("i", 2 + n), ()),))
        state.trials[cand.key()] = Trial(cand, Measurement(cand.key(), True, 1.0, 2.0, 0.1), feats, "", 0.0, resumed)
    model = Seen()
    _fit(model, state, ([[9.0]], [0.5]))
    assert model.X == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_importing_a_file_that_is_not_utf8_text_or_a_folder_is_a_record_error(tmp_path):
    records = Records(tmp_path / "db.sqlite")
    latin = tmp_path / "records.jsonl"
    latin.write_bytes(b"\xff\xfe not text\n")
    with pytest.raises(TuneRecordError, match="is not UTF-8 text"):
        records.import_jsonl(latin)
    with pytest.raises(TuneRecordError, match="cannot be read"):
        records.import_jsonl(tmp_path)


def test_an_unknown_size_is_refused_before_any_measurement(db):
    with pytest.raises(pc.errors.TuneError, match="has no size 'X'"):
        pc.tune(MM, {**SIZES, "X": 4}, trials=1, progress=False)
    assert not Records(db).rows()


def test_kernel_hashes_stay_as_they_were():
    """Tuning records are keyed by this hash: a new field of the IR must not change it for kernels
    that do not use the field (`field(repr=False)`), or every user's records would be orphaned."""
    from polyc.tune.records import kernel_hash
    assert kernel_hash(pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm")) == "dd9e5974a68e89d97ccdbd72"
