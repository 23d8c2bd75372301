"""Hostile input to the tuner: edited record databases, malformed imports, exports that cannot be
written, loop kernels sent to workers, arrays and arguments that do not fit.  Every failure is a
TuneError / TuneRecordError or a TuningWarning with a fallback, never a raw Python exception."""
from __future__ import annotations

import inspect
import json
import os
import sqlite3
import warnings

import numpy as np
import pytest

import polyc as pc
from polyc.errors import TuneError, TuneRecordError, TuningWarning
from polyc.target import host_cpus
from polyc.tune import Records
from polyc.tune.measure import Measurement, Task, WorkerState, check_sizes, kernel_blob
from polyc.tune.records import FIELDS, RecordKey, kernel_hash, measured_on, size_class
from polyc.tune.registry_view import target_view
from polyc.tune.space import Space
from polyc.tune.tuner import _sizes_and_dtype

from . import loop_kernels

MM = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="tune_untrusted_mm")
SIZES = {"I": 32, "J": 24, "K": 16}
QUICK = dict(progress=False, rounds=2, min_sample_s=0.0)


def _records(path, ratios=(0.5, 0.9)):
    """Records of MM without measuring: auto's candidate, then source order's, with `ratios`."""
    tv = target_view("c")
    space = Space(MM, tv, 8)
    records = Records(path)
    key = RecordKey(kernel_hash(MM), size_class(SIZES), "f64", measured_on(tv.fingerprint(), tv.cores))
    for genome, ratio in zip((space.default(), space.source()), ratios):
        cand, sched = space.realize(genome)
        records.add(key, MM.name, cand, sched.to_json(), Measurement(cand.key(), True, 1e-3, ratio, 0.01),
                    [1.0, 2.0], {})
    return records


def _edit(records, sql, *args):
    with sqlite3.connect(str(records.path)) as c:
        c.execute(sql, args)
    c.close()


def _mm_works(f):
    a, b = np.random.default_rng(0).standard_normal((2, 9, 9))
    np.testing.assert_allclose(f(A=a, B=b), a @ b, rtol=1e-12)


# -- 1. an edited database: "tuned" falls back, tune refuses clearly -------------------------------

@pytest.mark.parametrize("column", ["schedule", "candidate"])
def test_a_deeply_nested_cell_is_skipped_for_the_next_record(db, column):
    records = _records(db)
    best = records.best()
    _edit(records, f"UPDATE records SET {column} = ? WHERE id = ?", "[" * 100000, best["id"])
    with pytest.warns(TuningWarning, match=f"skipping record {best['id']}.*nested too deeply"):
        f = pc.compile(MM, schedule="tuned")
    _mm_works(f)
    with pytest.warns(TuningWarning):
        second = pc.tune.tuned_schedule(MM, db=db)
    assert f.schedule.map_texts == second.map_texts


@pytest.mark.parametrize("value", ["abc", b"\x01", None, -5.0])
def test_a_ratio_cell_of_another_type_is_no_ranking(db, value):
    records = _records(db)
    best = records.best()
    _edit(records, "UPDATE records SET ratio = ? WHERE id = ?", value, best["id"])
    assert [r["id"] for r in records.ranked()] == [r["id"] for r in records.rows() if r["id"] != best["id"]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningWarning)
        _mm_works(pc.compile(MM, schedule="tuned"))


def test_a_blob_candidate_is_skipped_with_a_warning(db):
    records = _records(db)
    best = records.best()
    _edit(records, "UPDATE records SET candidate = ? WHERE id = ?", b"\x00\xff", best["id"])
    with pytest.warns(TuningWarning, match="must be JSON text"):
        _mm_works(pc.compile(MM, schedule="tuned"))


def test_a_table_of_another_layout_is_a_record_error_or_auto(db):
    records = _records(db)
    _edit(records, "ALTER TABLE records RENAME COLUMN ratio TO r2")
    with pytest.warns(TuningWarning, match="lacks the column ratio"):
        _mm_works(pc.compile(MM, schedule="tuned"))            # the default database: auto
    with pytest.raises(TuneRecordError, match="lacks the column ratio"):
        pc.tune.tuned_schedule(MM, db=db)                      # an explicit one: the error
    with pytest.raises(TuneRecordError, match="lacks the column ratio"):
        pc.tune(MM, SIZES, dtype="f64", trials=1, db=db, **QUICK)


# -- 2. import and export ---------------------------------------------------------------------------

def test_an_imported_lone_surrogate_is_a_malformed_line(db, tmp_path):
    records = _records(db)
    out = tmp_path / "r.jsonl"
    records.export_jsonl(out)
    lines = out.read_text().splitlines()
    doc = json.loads(lines[1])
    out.write_text(lines[0] + "\n" + json.dumps(dict(doc, error="\ud800")) + "\n")
    other = Records(tmp_path / "other.sqlite")
    with pytest.raises(TuneRecordError, match=r"r\.jsonl:2: error is not valid Unicode"):
        other.import_jsonl(out)
    assert other.rows() == []                                  # nothing of the file was added


@pytest.mark.parametrize("column", ["ratio", "features", "error", "spread"])
def test_export_leaves_out_rows_with_blob_cells(db, tmp_path, column):
    records = _records(db)
    bad = records.best()["id"]
    _edit(records, f"UPDATE records SET {column} = ? WHERE id = ?", b"\x5b\x31\x5d", bad)
    out = tmp_path / "r.jsonl"
    with pytest.warns(TuningWarning, match=f"left out 1 record .*: {bad} "):
        assert records.export_jsonl(out) == 1
    kept = next(r for r in records.rows() if r["id"] != bad)
    assert [json.loads(line)["candidate"] for line in out.read_text().splitlines()] == [kept["candidate"]]
    assert Records(tmp_path / "other.sqlite").import_jsonl(out) == 1


def test_export_writes_whole_files_or_nothing(db, tmp_path, monkeypatch):
    records = _records(db)
    out = tmp_path / "r.jsonl"
    out.write_text("the old export\n")

    def full(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(TuneRecordError, match=r"r\.jsonl: cannot be written \(No space left on device\)"):
        records.export_jsonl(out)
    assert out.read_text() == "the old export\n" and sorted(os.listdir(tmp_path)) == sorted(["r.jsonl", db.name])
    monkeypatch.undo()
    assert records.export_jsonl(out) == 2 and len(out.read_text().splitlines()) == 2


def test_export_to_a_place_that_cannot_be_written_is_a_record_error(db, tmp_path):
    records = _records(db)
    with pytest.raises(TuneRecordError, match="not a regular file"):
        records.export_jsonl(tmp_path)
    with pytest.raises(TuneRecordError, match="cannot be written .No such file or directory"):
        records.export_jsonl(tmp_path / "missing" / "r.jsonl")
    for bad in (5, None):
        with pytest.raises(TuneError, match="takes the path of a JSON-lines file"):
            records.export_jsonl(bad)
        with pytest.raises(TuneError, match="takes the path of a JSON-lines file"):
            records.import_jsonl(bad)
    if os.path.exists("/dev/full"):
        with pytest.raises(TuneRecordError, match="not a regular file"):
            records.export_jsonl("/dev/full")
        assert not os.path.isfile("/dev/full")


# -- 3. decorated loop kernels reach the workers ------------------------------------------------------

@pytest.mark.parametrize("kernel", [loop_kernels.double, loop_kernels.triple], ids=["decorated", "wrapped"])
def test_module_level_loop_kernels_are_rebuilt_in_a_worker(kernel):
    sizes = {"N": 40}
    state = WorkerState(Task(kernel_blob(kernel), tuple(sizes.items()), "f64", tuple(check_sizes(sizes).items()), 1))
    assert state.kernel.function is kernel.function          # the function itself, found again by name
    cand, _ = Space(kernel, target_view("c"), 8).realize(Space(kernel, target_view("c"), 8).source())
    assert state.handle(("prepare", cand.key(), cand.to_dict()))["ok"]


def test_a_decorated_loop_kernel_is_tuned(db):
    r = pc.tune(loop_kernels.double, {"N": 64}, trials=1, **QUICK)
    a = np.arange(64.0)
    np.testing.assert_array_equal(pc.compile(loop_kernels.double, r.schedule)(A=a), 2 * a)


def test_loop_functions_no_worker_can_import_are_refused_with_the_reason(monkeypatch):
    def make():
        def local(A: pc.f64["N"], O: pc.f64["N"]):
            for i in range(N):
                O[i] = A[i] * 4.0
        return pc.kernel(local)
    with pytest.raises(TuneError, match="is defined inside a function .a closure.*top level of an importable"):
        kernel_blob(make())
    k = pc.kernel(loop_kernels.script_like)
    monkeypatch.setattr(loop_kernels.script_like, "__module__", "__main__")
    with pytest.raises(TuneError, match=r"defined in the script being run \(__main__\)"):
        kernel_blob(k)


# -- 4. what a measurement is labelled with ------------------------------------------------------------

@pytest.mark.skipif(len(host_cpus()) < 2 and (os.cpu_count() or 1) < 2, reason="needs two cores")
def test_threads_are_part_of_the_record_key(db):
    one = pc.tune(MM, SIZES, dtype="f64", threads=1, trials=2, db=db, **QUICK)
    two = pc.tune(MM, SIZES, dtype="f64", threads=2, trials=1, db=db, **QUICK)
    assert one.key != two.key and one.key.target.endswith("/threads=1") and two.key.target.endswith("/threads=2")
    assert not any(t.resumed for t in two.trials)            # nothing measured on 1 thread passes for 2
    again = pc.tune(MM, SIZES, dtype="f64", threads=1, trials=1, db=db, **QUICK)
    assert {t.candidate.key() for t in one.trials} <= {t.candidate.key() for t in again.trials if t.resumed}
    assert {r["target"].rsplit("/", 1)[1] for r in Records(db).rows()} == {"threads=1", "threads=2"}


@pytest.mark.parametrize("given, text", [
    ({"A": np.ones((16, 16), np.int32), "B": np.ones((16, 16), np.int32)}, "A is int32; the tuner measures f32 or f64"),
    ({"A": np.ones((16, 16), np.float16), "B": np.ones((16, 16), np.float16)}, "A has dtype float16"),
    ({"A": np.ones((16, 16), np.float32), "B": np.ones((16, 16))}, "the arrays' dtypes differ"),
    ({"A": np.ones((16, 8), np.float32), "B": np.ones((9, 16), np.float32)},
     r"B.shape\[0\] is 9 but A.shape\[1\] says K=8"),
    ({"A": np.ones((16, 8)), "K": 9}, r"A.shape\[1\] is 8 but the size given says K=9"),
    ({"A": np.ones(16), "B": np.ones((16, 16))}, "A must have 2 dimension"),
])
def test_arrays_that_do_not_make_one_call_are_refused(given, text, db):
    with pytest.raises(TuneError, match=text):
        pc.tune(MM, given, trials=1, **QUICK)
    assert not Records(db).rows()


def test_the_arrays_dtype_is_what_is_tuned():
    a, b = np.zeros((12, 7)), np.zeros((7, 5))
    assert _sizes_and_dtype(MM, {"A": a, "B": b}, None) == ({"I": 12, "K": 7, "J": 5}, "f64")
    with pytest.raises(TuneError, match="dtype='f32' but the arrays are f64"):
        _sizes_and_dtype(MM, {"A": a, "B": b}, "f32")
    assert _sizes_and_dtype(loop_kernels.double, {"A": np.zeros(9)}, None) == ({"N": 9}, "f32")
    with pytest.raises(TuneError, match="A has dtype float32 but double declares it float64"):
        _sizes_and_dtype(loop_kernels.double, {"A": np.zeros(9, np.float32)}, None)


# -- 5. arguments -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, text", [
    ({"seed": "x"}, "seed must be an int from 0 to 2\\*\\*31 - 1, not 'x'"),
    ({"seed": -1}, "seed must be an int .* not -1"),
    ({"seed": 2 ** 40}, "seed must be an int"),
    ({"db": 5}, "db must be the path of a tuning database .* not int 5"),
    ({"min_sample_s": -1}, "min_sample_s must be a finite number of seconds >= 0, not -1"),
    ({"min_sample_s": float("nan")}, "min_sample_s must be a finite number"),
    ({"threads": 100000}, "threads=100000 is more than the cores to measure on"),
    ({"workers": 100000}, "workers=100000 is more than the .* cores of this machine"),
    ({"seconds": True}, "seconds must be a positive number"),
])
def test_bad_arguments_are_refused_before_any_worker_starts(kwargs, text, db):
    with pytest.raises(TuneError, match=text):
        pc.tune(MM, SIZES, trials=1, **{**QUICK, **kwargs})


def test_a_budget_too_small_to_measure_anything_says_so(db):
    with pytest.raises(TuneError, match="seconds=1e-09 ran out before the first measurement"):
        pc.tune(MM, SIZES, seconds=1e-9, **QUICK)


# -- 6. where the warning points ------------------------------------------------------------------------

def test_the_tuned_warning_names_the_users_line(db):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        pc.compile(MM, schedule="tuned")
        direct = inspect.currentframe().f_lineno + 1
        pc.tune.tuned_schedule(MM)
    found = [(w.filename, w.lineno) for w in seen if issubclass(w.category, TuningWarning)]
    assert found == [(__file__, line), (__file__, direct)]


def test_the_default_database_follows_the_cache_directory_home_expanded(monkeypatch, tmp_path):
    from polyc.tune.records import db_path
    monkeypatch.delenv("POLYC_TUNE_DB", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("POLYC_CACHE_DIR", "~/cache")
    assert db_path() == tmp_path / "cache" / "tune.sqlite"
    monkeypatch.setenv("POLYC_CACHE_DIR", "~nosuchuser-polyc/x")
    with pytest.raises(pc.TuneRecordError, match="unknown user"):
        db_path()


def test_tuned_falls_back_when_the_default_databases_rows_are_damaged(db):
    records = _records(db)
    row = dict(records.rows()[0])
    records._insert([dict({k: row[k] for k in FIELDS}, error="x" * 3000 + str(n)) for n in range(60)])
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for k in range(2 * page, len(data), 7):       # the rows' pages; the schema's stays whole
        data[k] = 0xA5
    db.write_bytes(bytes(data))
    with pytest.warns(TuningWarning, match="cannot be read"):
        _mm_works(pc.compile(MM, schedule="tuned"))
    with pytest.raises(TuneRecordError):
        pc.tune.tuned_schedule(MM, db=records.path)     # an explicit database: the error


def test_importing_a_pipe_is_an_error_not_a_hang(db, tmp_path):
    pipe = tmp_path / "records.jsonl"
    os.mkfifo(pipe)
    with pytest.raises(TuneRecordError, match="not a regular file"):
        Records(db).import_jsonl(pipe)


def test_an_overlong_imported_line_is_refused_before_it_is_read_whole(db, tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text("x" * 10_000_000 + "\n")
    with pytest.raises(TuneRecordError, match="line too long"):
        Records(db).import_jsonl(path)


def test_a_database_in_an_unknown_users_home_is_a_record_error_or_auto(monkeypatch):
    monkeypatch.setenv("POLYC_TUNE_DB", "~no_such_user_polyc_test/tune.sqlite")
    with pytest.raises(TuneRecordError, match="home of an unknown user"):
        Records()
    with pytest.warns(TuningWarning, match="home of an unknown user"):
        _mm_works(pc.compile(MM, schedule="tuned"))
