"""Tuning records: an SQLite database of every measured candidate, shared by all tuning runs.

A record is keyed by the kernel's hash (its checked program), a size class (each size rounded to
a power of two), the dtypes and where it was measured (the Target's fingerprint and the thread
count, `measured_on`); it holds the candidate's recipe, the saved schedule, the measured time, its
ratio to `schedule="auto"` with a spread, and the cost model's features.  A tuning run first
reads what is there (so it resumes where it stopped and never measures a candidate twice);
`schedule="tuned"` reads the best one.

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
import secrets
import sqlite3
import stat
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Union

from ..errors import TuneError, TuneRecordError, TuningWarning
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
#: The columns a records table must have (an edited database may have renamed or dropped some).
COLUMNS = ("id",) + FIELDS + ("created",)


@dataclass(frozen=True)
class RecordKey:
    kernel_hash: str
    size_class: str
    dtypes: str
    target: str          # `measured_on(fingerprint, threads)`: the Target and the thread count


def measured_on(fingerprint: str, threads: int) -> str:
    """A record's `target` cell: the Target's fingerprint and the thread count its candidates ran
    with (a 1-thread measurement must not pass for a 2-thread one: ratios and best schedules
    differ).  Records written before threads were recorded hold the bare fingerprint."""
    return f"{fingerprint}/threads={int(threads)}"


def fingerprint_of(target_cell: Any) -> Optional[str]:
    """The Target fingerprint of a record's `target` cell (None for a cell that is not text)."""
    return target_cell.split("/threads=", 1)[0] if isinstance(target_cell, str) else None


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
        if not _is_path(db):
            raise TuneError(f"db must be the path of a tuning database (a str or os.PathLike), not "
                            f"{type(db).__name__} {db!r}"[:300])
        return Path(db)
    if os.environ.get("POLYC_TUNE_DB"):
        try:
            return Path(os.environ["POLYC_TUNE_DB"]).expanduser()
        except RuntimeError:    # `~nosuchuser/x`
            raise TuneRecordError("starts with the home of an unknown user",
                                  f"POLYC_TUNE_DB={os.environ['POLYC_TUNE_DB']!r}") from None
    from ..errors import CacheError
    from ..runtime.cache import configured_cache_dir
    try:
        return configured_cache_dir() / "tune.sqlite"       # where compiled kernels go, `~` expanded
    except CacheError as e:
        raise TuneRecordError(str(e), "the tuning database") from None


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
            columns = {row[1] for row in c.execute("PRAGMA table_info(records)")}
        missing = [name for name in COLUMNS if name not in columns]
        if missing:   # an edited database (ALTER TABLE ... RENAME COLUMN): every read would fail
            raise TuneRecordError(f"its records table lacks the column{'s' if len(missing) > 1 else ''} "
                                  f"{', '.join(missing)} (edited, or written by another program); pass "
                                  f"another db= or move it away", str(self.path))

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
        """The measured records, best (lowest ratio to auto) first.  A cell may hold any type
        (SQLite does not enforce the declared one; a database can be edited): a row whose `ok` is
        not 1 or whose ratio is not a positive finite number is left out."""
        ok = [r for r in self.rows(key, kernel=kernel, target=target)
              if r["ok"] == 1 and finite_number(r["ratio"]) and r["ratio"] > 0]
        return sorted(ok, key=lambda r: (float(r["ratio"]), r["id"]))

    # -- JSON lines ------------------------------------------------------------------------------
    def export_jsonl(self, path: Union[str, Path], key: Optional[RecordKey] = None) -> int:
        """Write the records (of `key`, or all) as JSON lines; returns how many were written.  A row
        that would not import again (an edited cell: a blob, a number that is not finite, a field
        that does not parse) is left out, with a TuningWarning naming it.  The file is written
        whole or not at all (a temporary file beside it, then renamed over it); a place it cannot
        be written to is a TuneRecordError naming it."""
        _check_path(path, "export_jsonl")
        lines, skipped = [], []
        for r in self.rows(key):
            try:
                line = json.dumps({k: r[k] for k in FIELDS}, sort_keys=True)
                validate_row(line, f"record {r['id']}")
            except (TypeError, ValueError, RecursionError, TuneRecordError) as e:
                skipped.append(f"{r['id']} ({str(e)[:120]})")
                continue
            lines.append(line + "\n")
        if skipped:
            warnings.warn(f"export_jsonl: left out {len(skipped)} record{'s' if len(skipped) > 1 else ''} of "
                          f"{self.path} that would not import again: {'; '.join(skipped[:5])}"
                          f"{'; ...' if len(skipped) > 5 else ''}", TuningWarning, stacklevel=2)
        _write_atomically(Path(path), "".join(lines))
        return len(lines)

    def import_jsonl(self, path: Union[str, Path]) -> int:
        """Add the records of a JSON-lines file (untrusted: every line checked before any is added)."""
        _check_path(path, "import_jsonl")
        rows = []
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):     # a pipe would block, a device never end
                raise TuneRecordError("cannot be read: it is not a regular file (a folder, a pipe or a device)",
                                      str(path))
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(iter(lambda: f.readline(4 * MAX_TEXT + 1), ""), 1):
                    if line.strip():     # a line past the limit is refused before more is read
                        rows.append(validate_row(line, f"{path}:{n}"))
        except UnicodeDecodeError as e:
            raise TuneRecordError(f"is not UTF-8 text (byte {e.start})", str(path)) from None
        except OSError as e:
            raise TuneRecordError(f"cannot be read ({e.strerror or e})", str(path)) from None
        self._insert(rows)
        return len(rows)


def _is_path(value: Any) -> bool:
    """`value` is a str or os.PathLike naming a file (an int would be taken for a file descriptor)."""
    return isinstance(value, (str, os.PathLike)) and isinstance(os.fspath(value), str)


def _check_path(path: Any, what: str) -> None:
    """A file path argument is a path (`_is_path`)."""
    if not _is_path(path):
        raise TuneError(f"{what} takes the path of a JSON-lines file (a str or os.PathLike), not "
                        f"{type(path).__name__}")


def _write_atomically(path: Path, text: str) -> None:
    """`text` into `path`, whole or not at all: written to a new file in the same folder, then
    renamed over `path` (a symbolic link is followed: its target is replaced).  Only a regular
    file is replaced; anything else, or a folder that cannot be written, is a TuneRecordError."""
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        raise TuneRecordError("cannot be written: it is not a regular file (a folder or a device)", str(path))
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as e:
        raise TuneRecordError(f"cannot be written ({e.strerror or e})", str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if target.exists():    # the file keeps its permissions
                os.chmod(tmp, target.stat().st_mode & 0o7777)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise TuneRecordError(f"cannot be written ({e.strerror or e})", str(path)) from None


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
    for f in FIELDS:   # JSON escapes can spell lone surrogates ("\\ud800"), which no UTF-8 text holds
        if isinstance(doc[f], str):
            try:
                doc[f].encode("utf-8")
            except UnicodeEncodeError:
                raise TuneRecordError(f"{f} is not valid Unicode text (it holds a lone surrogate)", where) from None
    if parse_features(doc["features"]) is None:
        raise TuneRecordError("features must be a list of finite numbers", where)
    if not isinstance(genome, dict) or not all(isinstance(k, str) and (v is None or isinstance(v, (str, int)))
                                               for k, v in genome.items()):
        raise TuneRecordError("genome must map gene names to null, integers, booleans or strings", where)
    if not isinstance(sched, dict) or (sched and sched.get("format") != "polyc-schedule"):
        raise TuneRecordError("schedule must be a saved polyc schedule", where)
    return doc
