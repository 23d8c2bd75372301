"""`pc.tune`: search, measure, record; and `schedule="tuned"`, which reads the records back."""
from __future__ import annotations

import json
import math
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..errors import IllegalScheduleError, PolycError, TuneError, TuneRecordError, TuningWarning
from .measure import Measurement, Task, check_sizes, kernel_blob
from .model import features
from .records import (RecordKey, Records, fingerprint_of, finite_number, kernel_hash, measured_on, parse_features,
                      size_class)
from .registry_view import target_view
from .search import SearchState, Trial, run_search
from .space import Candidate, Space, build


@dataclass
class TuneResult:
    """The outcome of a tuning run: the best schedule, the search curve and a table of trials."""

    schedule: Any
    candidate: Candidate
    seconds: float                       # median time per call of the best schedule
    ratio: float                         # its time / auto's, median over interleaved rounds
    spread: float                        # half the inter-quartile range of that ratio
    auto_seconds: float
    curve: List[Tuple[float, float, float]] = field(default_factory=list)  # (s, best time, best ratio)
    trials: List[Trial] = field(default_factory=list)
    refused: int = 0
    failed: int = 0
    key: Optional[RecordKey] = None

    @property
    def speedup(self) -> float:
        """auto time / tuned time."""
        return 1.0 / self.ratio if self.ratio > 0 else float("nan")

    def table(self) -> List[Dict[str, Any]]:
        """One row per measured candidate, best first: recipe, time, ratio to auto, spread."""
        rows = [dict(candidate=describe(t.candidate), seconds=t.measurement.seconds, ratio=t.measurement.ratio,
                     spread=t.measurement.spread, ok=t.measurement.ok, error=t.measurement.error)
                for t in self.trials]
        return sorted(rows, key=lambda r: (not r["ok"], r["ratio"]))

    def __repr__(self) -> str:
        return (f"<TuneResult {describe(self.candidate)}: {self.seconds * 1e3:.3f} ms, {self.speedup:.2f}x auto "
                f"(±{self.spread:.2f}); {len(self.trials)} measured, {self.refused} refused, {self.failed} failed>")


def describe(c: Candidate) -> str:
    """A short human-readable recipe: `auto(tile_sizes=...).pack('S1', mr=8).parallel('i_block')`."""
    knobs = ", ".join(f"{k}={dict(v) if k == 'tile_sizes' else v}" for k, v in c.knobs)
    steps = "".join(f".{n}({', '.join([repr(a) for a in args] + [f'{k}={v!r}' for k, v in kw])})"
                    for n, args, kw in c.steps)
    return f"{c.seed}({knobs}){steps}"


def _check_sizes(kernel: Any, sizes: Mapping[str, int]) -> None:
    """Every size the kernel's shapes use is given and positive (checked here, where the error
    reaches the caller, rather than in a worker process)."""
    from ..runtime.arguments import size_symbols
    needed = size_symbols(kernel.program)
    missing = [n for n in needed if n not in sizes]
    if missing:
        unknown = [n for n in sizes if n not in needed and n not in {s.name for s in kernel.program.scalars}]
        extra = (f"; {', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not among them"
                 if unknown else "")
        raise TuneError(f"tune: {kernel.name} needs the size{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(missing)} (its sizes are {', '.join(needed)}){extra}")
    unknown = [n for n in sizes if n not in needed and n not in kernel.program.sizes]
    if unknown:   # found here, before a search whose every measurement would fail on it
        raise TuneError(f"tune: {kernel.name} has no size {', '.join(map(repr, unknown))} (its sizes are "
                        f"{', '.join(needed)})")
    bad = {n: sizes[n] for n in needed if sizes[n] <= 0}
    if bad:
        raise TuneError(f"tune: sizes must be positive to measure anything, not "
                        f"{', '.join(f'{n}={v}' for n, v in bad.items())}")


def _sizes_and_dtype(kernel: Any, given: Mapping[str, Any], dtype: Optional[str]) -> Tuple[Dict[str, int], str]:
    """Sizes by name and the element dtype ("f32"/"f64") of the tensors that declare none, from a
    call's arrays and integer sizes, or from sizes alone.  Arrays are checked as a call checks them
    (`runtime.arguments`: a tensor of the kernel, a dtype polyc supports, the declared dtype, the
    rank) and must agree on every size; the tuner measures undeclared tensors in one dtype, f32 or
    f64 (a call's int32 or float16 arrays are refused, never tuned as another type)."""
    from ..errors import ArgumentError
    from ..runtime.arguments import passed_dtypes
    program = kernel.program
    tensors = {t.name: t for t in program.tensors}
    sizes: Dict[str, int] = {}
    origins: Dict[str, str] = {}
    arrays: Dict[str, np.ndarray] = {}
    for name, v in given.items():
        if isinstance(v, np.ndarray):
            if name not in tensors:
                raise TuneError(f"{kernel.name} has no tensor {name!r}")
            arrays[name] = v
        elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            sizes[name], origins[name] = int(v), "the size given"
        else:
            raise TuneError(f"tune: {name}={v!r} is neither an array nor an integer size")
    try:
        found = passed_dtypes(program, arrays)     # a temporary, a masked array, float16: ArgumentError
    except ArgumentError as e:
        raise TuneError(f"tune: {e}") from None
    undeclared: Dict[str, str] = {}
    for name, d in found.items():
        declared = tensors[name].dtype
        if declared is not None and d != declared:
            raise TuneError(f"tune: {name} has dtype {arrays[name].dtype} but {kernel.name} declares it "
                            f"{declared.numpy}")
        if declared is None:
            undeclared[name] = d.name
    kinds = sorted(set(undeclared.values()))
    if len(kinds) > 1:
        raise TuneError(f"tune: the arrays' dtypes differ ({', '.join(f'{n} is {d}' for n, d in undeclared.items())});"
                        f" the tuner measures the kernel with one dtype, f32 or f64")
    if kinds and kinds[0] not in ("f32", "f64"):
        name = next(iter(undeclared))
        raise TuneError(f"tune: {name} is {arrays[name].dtype}; the tuner measures f32 or f64 kernels only")
    if kinds and dtype is not None and dtype != kinds[0]:
        raise TuneError(f"tune: dtype={dtype!r} but the arrays are {kinds[0]}")
    for name, v in arrays.items():
        t = tensors[name]
        if t.shape is None:
            continue
        if v.ndim != len(t.shape):
            raise TuneError(f"tune: {name} must have {len(t.shape)} dimension(s) ({name}[{', '.join(map(str, t.shape))}])"
                            f" but has shape {v.shape}")
        for d, e in enumerate(t.shape):
            var = e.as_single_var()
            if var is None:
                continue
            if var in sizes and sizes[var] != int(v.shape[d]):
                raise TuneError(f"tune: {name}.shape[{d}] is {v.shape[d]} but {origins[var]} says {var}={sizes[var]};"
                                f" the arrays of one call must agree on every size")
            sizes[var] = int(v.shape[d])
            origins.setdefault(var, f"{name}.shape[{d}]")
    for name, v in arrays.items():     # entries like `N - 2`, once their sizes are known
        for d, e in enumerate(tensors[name].shape or ()):
            if e.as_single_var() is None and all(x in sizes for x in e.variables) and e.evaluate(sizes) != v.shape[d]:
                raise TuneError(f"tune: {name}.shape[{d}] is {v.shape[d]} but the kernel expects {e} = "
                                f"{e.evaluate(sizes)} for {', '.join(f'{x}={sizes[x]}' for x in sorted(e.variables))}")
    dt = dtype or (kinds[0] if kinds else "f32")
    if dt not in ("f32", "f64"):
        raise TuneError(f"tune: dtype must be 'f32' or 'f64', not {dt!r}")
    return sizes, dt


def _check_counts(seed: Any, min_sample_s: Any) -> None:
    """`seed` and `min_sample_s` as the search and the timer take them (checked before any worker starts)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2 ** 31:
        raise TuneError(f"tune: seed must be an int from 0 to 2**31 - 1, not {seed!r}"[:200])
    if isinstance(min_sample_s, bool) or not isinstance(min_sample_s, (int, float, np.integer, np.floating)) \
            or not (math.isfinite(min_sample_s) and min_sample_s >= 0):
        raise TuneError(f"tune: min_sample_s must be a finite number of seconds >= 0, not {min_sample_s!r}"[:200])


def _check_parallelism(tv: Any, executor: Optional[str], threads: int, workers: int) -> None:
    """More threads than cores, or more local workers than cores, would time the operating
    system's scheduler rather than the schedule: refused."""
    from ..target import host_cpus
    here = len(host_cpus()) or 1
    if threads > max(tv.cores, here):
        raise TuneError(f"tune: threads={threads} is more than the cores to measure on (the target has {tv.cores}, "
                        f"this machine {here}); oversubscribed threads time the scheduler, not the schedule")
    if executor in (None, "local", "process") and workers > here:
        raise TuneError(f"tune: workers={workers} is more than the {here} cores of this machine; each local "
                        f"worker measures on cores of its own, so use at most {here}")


def tune(kernel: Any, inputs_or_sizes: Optional[Mapping[str, Any]] = None, *, dtype: Optional[str] = None,
         target: Any = None, seconds: float = 60.0, seed: int = 0, executor: Optional[str] = None,
         db: Any = None, trials: Optional[int] = None, threads: Optional[int] = None, workers: int = 1,
         rounds: int = 3, min_sample_s: float = 0.05, batch: int = 4, progress: bool = True,
         ray_nodes: Optional[int] = None, resume: bool = True) -> TuneResult:
    """Search schedules of `kernel` at the sizes of `inputs_or_sizes` (arrays, or `{"I": 1024, ...}`)
    for `seconds` of search (or `trials` measurements; the finalists' re-measurement comes on top), measuring on `executor` (None: a local worker process;
    "ray": Ray nodes), recording everything in the tuning database `db` (see `records`).
    Returns the best schedule found; `schedule="tuned"` uses it later."""
    from ..api import Kernel
    if not isinstance(kernel, Kernel):
        raise TuneError(f"tune takes a kernel made by pc.kernel, not {type(kernel).__name__}")
    if not inputs_or_sizes:
        raise TuneError("tune needs the inputs of a call or the sizes to tune for, e.g. {'I': 1024, ...}")
    if isinstance(seconds, bool) or not (isinstance(seconds, (int, float)) and seconds > 0):
        raise TuneError(f"seconds must be a positive number, not {seconds!r}")
    for what, v in (("trials", trials), ("threads", threads), ("workers", workers), ("rounds", rounds),
                    ("batch", batch), ("ray_nodes", ray_nodes)):
        if v is not None and not (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0):
            raise TuneError(f"tune: {what} must be a positive int, not {v!r}")
    _check_counts(seed, min_sample_s)
    seed, min_sample_s = int(seed), float(min_sample_s)
    sizes, dt = _sizes_and_dtype(kernel, inputs_or_sizes, dtype)
    _check_sizes(kernel, sizes)
    tv = target_view(target)
    if tv.kind != "c":
        raise TuneError(f"tuning for target {tv.kind!r} is not supported yet; tune for 'c'")
    threads = int(threads or tv.cores)
    _check_parallelism(tv, executor, threads, workers)
    elem = 4 if dt == "f32" else 8
    # Measurements at one thread count are not those at another: threads are part of the key.
    key = RecordKey(kernel_hash(kernel), size_class(sizes), dt, measured_on(tv.fingerprint(), threads))
    records = Records(db)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        space = Space(kernel, tv, elem)
    state = _resumed(records, key, space) if resume else SearchState()
    warm = _warm_start(records, key)
    task = Task(kernel_blob(kernel), tuple(sorted(sizes.items())), dt, tuple(sorted(check_sizes(sizes).items())),
                threads, tv)   # workers build every candidate for this Target, wherever they run
    auto_cand, _ = space.realize(space.default())
    baseline = (auto_cand.key(), auto_cand.to_dict())
    from .executors import make_channels, measure_on
    from .progress import Progress
    bar = Progress(kernel.name, trials, seconds, enabled=progress)

    def feature_of(cand: Candidate, sched: Any) -> List[float]:
        return features(kernel, sched, cand.seed, sizes, elem, tv)

    def on_trial(t: Trial) -> None:
        records.add(key, kernel.name, t.candidate, t.schedule_json, t.measurement, t.features,
                    state.genomes.get(t.candidate.key(), {}))
        bar.update(t, state.best())

    channels = make_channels(executor, task, workers, ray_nodes)
    try:
        state = run_search(space, lambda b: measure_on(channels, baseline, b, rounds, min_sample_s), feature_of,
                           seconds=seconds, seed=seed, trials=trials, batch=batch, state=state, warm=warm,
                           on_trial=on_trial, reserve=lambda st: _verification_seconds(st, baseline[0], rounds))
        _verify_finalists(state, channels, baseline, max(rounds + 2, 5), min_sample_s, records, key, kernel.name)
    finally:
        for ch in channels:
            ch.close()
        bar.close()
    best = state.best()
    if best is None:
        if not state.trials:
            raise TuneError(f"no candidate of {kernel.name} was measured: the time budget seconds={seconds!r} ran "
                            f"out before the first measurement; give more seconds= (or trials=)")
        errors = "; ".join(sorted({t.measurement.error or "no reason given" for t in state.trials.values()}))[:500]
        raise TuneError(f"no candidate of {kernel.name} could be measured ({errors})")
    auto = state.trials.get(auto_cand.key())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        schedule = build(kernel, best.candidate, tv)
    trials_list = list(state.trials.values())
    return TuneResult(schedule, best.candidate, best.measurement.seconds, best.measurement.ratio,
                      best.measurement.spread, auto.measurement.seconds if auto else float("nan"), state.curve,
                      trials_list, state.refused, sum(not t.measurement.ok for t in trials_list), key)


def _verification_seconds(state: SearchState, auto_key: str, rounds: int, top: int = 3) -> float:
    """About how long `_verify_finalists` takes: (top + auto) x rounds calls of about auto's time,
    plus preparing each (compile and check)."""
    auto = state.trials.get(auto_key)
    per_call = auto.measurement.seconds if auto is not None and auto.measurement.ok else 0.0
    return (top + 1) * (max(rounds + 2, 5) * max(per_call, 0.05) + 1.0)


def _verify_finalists(state: SearchState, channels: Any, baseline: Tuple[str, Dict[str, Any]], rounds: int,
                      min_s: float, records: Records, key: RecordKey, name: str, top: int = 3) -> None:
    """Measure the best few again, interleaved with auto over more rounds, and keep those figures:
    on a noisy machine a lucky round must not crown a candidate (auto itself stays a contender)."""
    from .executors import measure_on
    ranked = sorted((t for t in state.trials.values() if t.measurement.ok and t.candidate.key() != baseline[0]),
                    key=lambda t: t.measurement.ratio)[:top]
    if not ranked:
        return
    again = {m.key: m for m in measure_on(channels[:1], baseline, [(t.candidate.key(), t.candidate.to_dict())
                                                                    for t in ranked], rounds, min_s)}
    for t in ranked + [state.trials.get(baseline[0])]:
        if t is None or t.candidate.key() not in again:
            continue
        m = again[t.candidate.key()]
        state.verified.add(t.candidate.key())
        state.trials[t.candidate.key()] = Trial(t.candidate, m, t.features, t.schedule_json, t.elapsed, t.resumed)
        records.add(key, name, t.candidate, t.schedule_json, m, t.features, state.genomes.get(t.candidate.key(), {}))


def _positive(value: Any) -> Optional[float]:
    """`value` as a positive finite float, or None (a database can be edited: untrusted)."""
    return float(value) if finite_number(value) and value > 0 else None


def _resumed(records: Records, key: RecordKey, space: Space) -> SearchState:
    """The search state of earlier runs for `key`: their trials are not measured again.  Rows are
    untrusted (an imported or edited database): one whose fields do not parse is skipped, and a
    genome is kept only when it gives every gene one of its values."""
    state = SearchState()
    genes = {g.name: g.values for g in space.genes}
    for row in records.rows(key):
        if not isinstance(row["schedule"], str):
            continue
        try:
            cand = Candidate.from_dict(json.loads(row["candidate"]))
            genome = json.loads(row["genome"])
        except (TypeError, ValueError, RecursionError, PolycError):
            continue
        feats = parse_features(row["features"])
        if feats is None:
            continue
        seconds, ratio = _positive(row["seconds"]), _positive(row["ratio"])
        spread = row["spread"] if finite_number(row["spread"]) else math.inf
        m = Measurement(cand.key(), row["ok"] == 1 and ratio is not None, seconds or math.inf, ratio or math.inf,
                        spread, (), row["error"] if isinstance(row["error"], str) else "")
        state.trials[cand.key()] = Trial(cand, m, feats, row["schedule"], 0.0, True)
        if isinstance(genome, dict) and set(genome) == set(genes) and \
                all(any(v == g and type(v) is type(g) for g in genes[k]) for k, v in genome.items()):
            state.genomes[cand.key()] = genome
    return state


def _warm_start(records: Records, key: RecordKey, limit: int = 2000) -> Tuple[List[List[float]], List[float]]:
    """Features and log ratios of earlier measurements on this Target of other kernels and sizes
    (rows that do not parse, or whose features differ in length from the first, are skipped)."""
    X, y = [], []
    for row in records.rows(target=key.target)[-limit:]:
        if (row["kernel_hash"], row["size_class"], row["dtypes"]) == (key.kernel_hash, key.size_class, key.dtypes):
            continue
        ratio, feats = _positive(row["ratio"]), parse_features(row["features"])
        if row["ok"] == 1 and ratio is not None and feats is not None and len(feats) == len(X[0] if X else feats):
            X.append(list(feats))
            y.append(math.log(ratio))
    return X, y


# -- schedule="tuned" ----------------------------------------------------------------------------

def tuned_schedule(kernel: Any, target: Any = "c", *, db: Any = None, sizes: Optional[Mapping[str, int]] = None,
                   dtype: Optional[str] = None) -> Any:
    """The best recorded schedule of `kernel` on `target` (for `sizes`/`dtype` when given, else of
    any size class), re-proved; None, with a TuningWarning, when there is none or the default
    record database cannot be opened (the caller then uses `schedule="auto"`); an explicit `db`
    that cannot be opened is a TuneRecordError.  A record that does not reproduce (tampered, or
    written by another polyc) is skipped with a TuningWarning, for the next best."""
    tv = target_view(target)
    fingerprint = tv.fingerprint()
    wanted = None if sizes is None else (size_class(sizes), dtype or "f32")
    try:
        records = Records(db)
        rows = [r for r in records.ranked(kernel=kernel_hash(kernel)) if fingerprint_of(r["target"]) == fingerprint
                and (wanted is None or (r["size_class"], r["dtypes"]) == wanted)]
    except TuneRecordError as e:
        if db is not None:
            raise
        # The default place (POLYC_TUNE_DB, POLYC_CACHE_DIR, the user cache) is unusable, e.g. a
        # file where its folder should be, or rows damaged past reading: compiling goes on, as
        # with no record at all.
        warnings.warn(f"schedule='tuned': the tuning records cannot be read ({e}); using schedule='auto'",
                      TuningWarning, stacklevel=_user_stacklevel())
        return None
    # Measured with the threads compiled code runs with first (a stable sort keeps the ratio order).
    rows.sort(key=lambda r: r["target"] != measured_on(fingerprint, tv.cores))
    if not rows:
        warnings.warn(f"schedule='tuned': no tuning record of {kernel.name} on this target in {records.path}; "
                      f"using schedule='auto' (run pc.tune first)", TuningWarning, stacklevel=_user_stacklevel())
        return None
    for row in rows:    # a record that does not reproduce (tampered, or from another polyc): the next
        try:
            return schedule_of_record(kernel, row, tv)
        except (TuneRecordError, IllegalScheduleError) as e:
            warnings.warn(f"schedule='tuned': skipping record {row.get('id')}, which does not reproduce: {e}",
                          TuningWarning, stacklevel=_user_stacklevel())
    warnings.warn(f"schedule='tuned': no record of {kernel.name} in {records.path} reproduces; using "
                  f"schedule='auto'", TuningWarning, stacklevel=_user_stacklevel())
    return None


def _user_stacklevel() -> int:
    """The `stacklevel` that makes a warning issued by this function's caller name the first frame
    outside polyc (the user's `pc.compile(..., schedule="tuned")` line, however many polyc frames
    lie between: `compile`, `codegen`, a GPU target's resolution, or none)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame = frame.f_back
        level += 1
    return level


def schedule_of_record(kernel: Any, row: Mapping[str, Any], tv: Any) -> Any:
    """Rebuild a record's schedule: its recipe replayed (every step re-proved) and compared with
    the saved schedule, or the saved schedule itself through `Schedule.from_json` when it is a
    replayable one.  A record that does not reproduce is a TuneRecordError."""
    from ..schedule.schedule import Schedule
    where = f"tuning record of {kernel.name} (id {row.get('id')})"
    if not isinstance(row["candidate"], str) or not isinstance(row["schedule"], str):
        raise TuneRecordError("its candidate and schedule must be JSON text (the database was edited)", where)
    try:
        cand = Candidate.from_dict(json.loads(row["candidate"]), where)
        saved = json.loads(row["schedule"])
    except ValueError as e:
        raise TuneRecordError(f"not JSON ({e})", where) from None
    except RecursionError:   # "[" * 100000: nested past what the JSON reader follows
        raise TuneRecordError("not JSON (nested too deeply)", where) from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if isinstance(saved, dict) and saved.get("replayable") is True:
                schedule = Schedule.from_json(kernel, row["schedule"])
                rebuilt = build(kernel, cand, tv)
            else:
                schedule = rebuilt = build(kernel, cand, tv)
    except IllegalScheduleError:
        raise
    except PolycError as e:
        raise TuneRecordError(f"does not rebuild: {e}", where) from e
    stored = saved.get("maps") if isinstance(saved, dict) else None
    names = set(rebuilt.statements)
    if not isinstance(stored, dict) or set(stored) != names or not all(
            isinstance(stored[n], str) and rebuilt.has_map(n, stored[n]) and schedule.has_map(n, rebuilt.map_text(n))
            for n in names):
        raise TuneRecordError("its recipe and its saved schedule disagree (the record or the kernel changed)", where)
    return schedule
