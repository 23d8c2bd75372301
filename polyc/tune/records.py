"""Tuning records: an SQLite database of every measured candidate, shared by all tuning runs.

A record is keyed by the kernel's hash (its checked program), a size class (each size rounded to
a power of two), the dtypes and the Target's fingerprint; it holds the candidate's recipe, the
saved schedule, the measured time, its ratio to `schedule="auto"` with a spread, and the cost
model's features.  A tuning run first reads what is there (so it resumes where it stopped and
never measures a candidate twice); `schedule="tuned"` reads the best one.

The database lives in the user's cache directory (`platformdirs`), or `$POLYC_CACHE_DIR`, or
exactly at `$POLYC_TUNE_DB` (tests), or where `db=` says.  Records export to and import from JSON
lines; an imported line is untrusted: its fields are checked here, its recipe by
`Candidate.from_dict`, and its schedule is re-proved when used (`Schedule.from_json` or replaying
the recipe's primitives).  Nothing in a record is ever executed as code.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sqlite3
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Union

from ..errors import TuneRecordError
from .space import Candidate

FIELDS = ("kernel_hash", "kernel_name", "size_class", "dtypes", "target", "candidate", "schedule", "ok",
          "seconds", "ratio", "spread", "features", "error", "genome")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kernel_hash TEXT NOT NULL, kernel_name TEXT NOT NULL, size_class TEXT NOT NULL, dtypes TEXT NOT NULL,
  target TEXT NOT NULL, candidate TEXT NOT NULL, schedule TEXT NOT NULL, ok INTEGER NOT NULL,
  seconds REAL, ratio REAL, spread REAL, features TEXT NOT NULL, error TEXT NOT NULL, genome TEXT NOT NULL, created REAL NOT NULL,
  UNIQUE (kernel_hash, size_class, dtypes, target, candidate))
"""
MAX_TEXT = 1 << 20


@dataclass(frozen=True)
class RecordKey:
    kernel_hash: str
    size_class: str
    dtypes: str
    target: str


def kernel_hash(kernel: Any) -> str:
    """A stable digest of the kernel's checked program (statements, tensors, sizes, name), not of
    where it was defined: the same kernel in another script, at another line or on another machine
    finds its records (statements' source locations are left out)."""
    program = kernel.program
    placeless = replace(program, statements=tuple(replace(st, location=None) for st in program.statements))
    return hashlib.sha256(repr(placeless).encode()).hexdigest()[:24]


def size_class(sizes: Mapping[str, int]) -> str:
    """Sizes rounded to powers of two: 1000 and 1024 share records, 512 does not."""
    return ",".join(f"{k}={1 << max(0, round(math.log2(max(1, int(v)))))}" for k, v in sorted(sizes.items()))


def db_path(db: Union[str, Path, None] = None) -> Path:
    if db is not None:
        return Path(db)
    if os.environ.get("POLYC_TUNE_DB"):
        return Path(os.environ["POLYC_TUNE_DB"])
    if os.environ.get("POLYC_CACHE_DIR"):
        return Path(os.environ["POLYC_CACHE_DIR"]) / "tune.sqlite"
    import platformdirs
    return Path(platformdirs.user_cache_dir("polyc")) / "tune.sqlite"


def _finite_or_none(v: Optional[float]) -> Optional[float]:
    return float(v) if v is not None and math.isfinite(v) else None


class Records:
    """The record database (one SQLite file; opened per call, so processes may share it)."""

    def __init__(self, db: Union[str, Path, None] = None):
        self.path = db_path(db)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:   # a file where the folder should be (POLYC_CACHE_DIR=/dev/null)
            raise TuneRecordError(f"its folder cannot be made ({e}); pass another db= or set POLYC_TUNE_DB",
                                  str(self.path)) from None
        with self._connect() as c:
            c.execute(_SCHEMA)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection for one transaction (committed on success, always closed).  The file is
        untrusted like every record in it: one that is not an SQLite database (truncated,
        overwritten) or that SQLite cannot open is a TuneRecordError naming it, never a crash."""
        try:
            c = sqlite3.connect(str(self.path), timeout=30)
        except sqlite3.Error as e:
            raise TuneRecordError(f"cannot be opened ({e}); pass another db= or move it away", str(self.path)) from None
        c.row_factory = sqlite3.Row
        try:
            with c:
                yield c
        except sqlite3.DatabaseError as e:
            raise TuneRecordError(f"is not a readable tuning database ({e}); pass another db= or move it away",
                                  str(self.path)) from None
        finally:
            c.close()

    def add(self, key: RecordKey, kernel_name: str, candidate: Candidate, schedule_json: str, m: Any,
            features: Iterable[float], genome: Mapping[str, Any]) -> None:
        row = dict(kernel_hash=key.kernel_hash, kernel_name=kernel_name, size_class=key.size_class,
                   dtypes=key.dtypes, target=key.target, candidate=candidate.key(), schedule=schedule_json,
                   ok=int(bool(m.ok)), seconds=_finite_or_none(m.seconds), ratio=_finite_or_none(m.ratio),
                   spread=_finite_or_none(m.spread), features=json.dumps([float(x) for x in features]),
                   error=str(m.error)[:2000], genome=json.dumps(dict(genome), sort_keys=True))
        self._insert([row])

    def _insert(self, rows: List[Dict[str, Any]]) -> None:
        with self._connect() as c:
            c.executemany(f"INSERT OR REPLACE INTO records ({', '.join(FIELDS)}, created) VALUES "
                          f"({', '.join('?' * len(FIELDS))}, ?)",
                          [tuple(r[f] for f in FIELDS) + (time.time(),) for r in rows])

    def rows(self, key: Optional[RecordKey] = None, *, kernel: Optional[str] = None,
             target: Optional[str] = None) -> List[Dict[str, Any]]:
        """Records of `key` (or of a kernel hash and/or target), oldest first."""
        where, args = [], []
        if key is not None:
            where.append("kernel_hash = ? AND size_class = ? AND dtypes = ? AND target = ?")
            args += [key.kernel_hash, key.size_class, key.dtypes, key.target]
        if kernel is not None:
            where.append("kernel_hash = ?")
            args.append(kernel)
        if target is not None:
            where.append("target = ?")
            args.append(target)
        sql = "SELECT * FROM records" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        with self._connect() as c:
            return [dict(r) for r in c.execute(sql, args)]

    def best(self, key: Optional[RecordKey] = None, *, kernel: Optional[str] = None,
             target: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """The measured record with the lowest ratio to auto (None if there is none)."""
        ranked = self.ranked(key, kernel=kernel, target=target)
        return ranked[0] if ranked else None

    def ranked(self, key: Optional[RecordKey] = None, *, kernel: Optional[str] = None,
               target: Optional[str] = None) -> List[Dict[str, Any]]:
        """The measured records, best (lowest ratio to auto) first."""
        ok = [r for r in self.rows(key, kernel=kernel, target=target) if r["ok"] and r["ratio"] is not None]
        return sorted(ok, key=lambda r: (r["ratio"], r["id"]))

    # -- JSON lines ------------------------------------------------------------------------------
    def export_jsonl(self, path: Union[str, Path], key: Optional[RecordKey] = None) -> int:
        rows = self.rows(key)
        with open(path, "w") as f:
            for r in rows:
                f.write(json.dumps({k: r[k] for k in FIELDS}, sort_keys=True) + "\n")
        return len(rows)

    def import_jsonl(self, path: Union[str, Path]) -> int:
        """Add the records of a JSON-lines file (untrusted: every line checked before any is added)."""
        rows = []
        try:
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if line.strip():
                        rows.append(validate_row(line, f"{path}:{n}"))
        except UnicodeDecodeError as e:
            raise TuneRecordError(f"is not UTF-8 text (byte {e.start})", str(path)) from None
        except OSError as e:
            raise TuneRecordError(f"cannot be read ({e.strerror or e})", str(path)) from None
        self._insert(rows)
        return len(rows)


def finite_number(v: Any) -> bool:
    """Whether `v` is a real number (not a bool) that is finite as a float (an int past float's
    range, 10**400, is not): what a record's numbers must be."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def parse_features(text: Any) -> Optional[tuple]:
    """A record's features (a JSON list of finite numbers) as floats, or None when they are not."""
    try:
        feats = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(feats, list) or not all(finite_number(v) for v in feats):
        return None
    return tuple(float(v) for v in feats)


def validate_row(line: str, where: str) -> Dict[str, Any]:
    """One exported record, checked field by field (TuneRecordError naming the line and field)."""
    if len(line) > 4 * MAX_TEXT:
        raise TuneRecordError("line too long", where)
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError) as e:
        raise TuneRecordError(f"not JSON ({e})", where) from None
    if not isinstance(doc, dict) or set(doc) != set(FIELDS):
        raise TuneRecordError(f"a record has exactly the fields {', '.join(FIELDS)}", where)
    for f in ("kernel_hash", "kernel_name", "size_class", "dtypes", "target", "candidate", "schedule", "features",
              "error", "genome"):
        if not isinstance(doc[f], str) or len(doc[f]) > MAX_TEXT:
            raise TuneRecordError(f"{f} must be a string", where)
    if doc["ok"] not in (0, 1) or isinstance(doc["ok"], bool):
        raise TuneRecordError("ok must be 0 or 1", where)
    for f in ("seconds", "ratio", "spread"):
        v = doc[f]
        if v is not None and (not finite_number(v) or v < 0):
            raise TuneRecordError(f"{f} must be a non-negative number or null", where)
    try:
        cand = Candidate.from_dict(json.loads(doc["candidate"]), f"{where}: candidate")
        sched = json.loads(doc["schedule"]) if doc["schedule"] else {}
        genome = json.loads(doc["genome"])
    except (ValueError, RecursionError) as e:
        raise TuneRecordError(f"a nested field is not JSON ({e})", where) from None
    if cand.key() != doc["candidate"]:
        doc["candidate"] = cand.key()  # canonical form
    if parse_features(doc["features"]) is None:
        raise TuneRecordError("features must be a list of finite numbers", where)
    if not isinstance(genome, dict) or not all(isinstance(k, str) and (v is None or isinstance(v, (str, int)))
                                               for k, v in genome.items()):
        raise TuneRecordError("genome must map gene names to null, integers, booleans or strings", where)
    if not isinstance(sched, dict) or (sched and sched.get("format") != "polyc-schedule"):
        raise TuneRecordError("schedule must be a saved polyc schedule", where)
    return doc
