"""Measuring candidates in worker processes: a crash or a hang costs one candidate, never the run.

A worker (`WorkerState`, driven by `LocalChannel` here or by a Ray actor in `executors`) holds one
kernel at one size.  For each candidate it rebuilds the schedule from the candidate's recipe
(every step re-proved), compiles it, checks it against the kernel's reference at a small size
(`check_sizes`), and runs it once; only then is it timed.  Timing is interleaved: every round
times each prepared candidate once, in a rotating order, together with the baseline
(`schedule="auto"`), and a candidate's figure is the median over rounds of its time divided by
the baseline's time *in the same round*, with the spread (half the inter-quartile range) as the
confidence.  Each worker runs its kernels with a fixed thread count (`OMP_NUM_THREADS`).

A worker that dies (segfault) or does not answer within its timeout is killed and restarted; the
candidate it was working on is reported failed and the others are prepared again.
"""
from __future__ import annotations

import os
import pickle
import select
import signal
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..api import KernelRef, kernel_ref

#: Test hook: candidate key -> "segfault" | "hang".  The worker preparing that candidate then
#: kills itself with SIGSEGV or stops answering, exactly as a broken kernel would.
FAULTS: Dict[str, str] = {}


class WorkerLost(Exception):
    """The worker crashed or timed out (internal: turned into a failed Measurement)."""


@dataclass(frozen=True)
class Task:
    """What a worker needs: the kernel (pickled program and loop function), sizes, dtype, threads."""

    kernel_blob: bytes
    sizes: Tuple[Tuple[str, int], ...]
    dtype: str
    check_sizes: Tuple[Tuple[str, int], ...]
    threads: int
    target: Any = None


@dataclass(frozen=True)
class Measurement:
    key: str
    ok: bool
    seconds: float = float("inf")          # median time per call
    ratio: float = float("inf")            # median of (this / baseline) over interleaved rounds
    spread: float = float("inf")           # half the inter-quartile range of those ratios
    samples: Tuple[float, ...] = ()
    error: str = ""


def kernel_blob(kernel: Any) -> bytes:
    """The kernel as bytes a worker can rebuild it from: its program, and its loop function by
    reference (`KernelRef`: module and name, which for `@pc.kernel def f` find the Kernel the
    decorator bound).  A function no worker can import (a lambda, a closure, one defined in the
    script being run) is a TuneError saying so."""
    from ..errors import TuneError
    function = kernel.function
    if function is None:
        return pickle.dumps((kernel.source_program, None))
    qualname = getattr(function, "__qualname__", repr(function))
    if getattr(function, "__module__", None) == "__main__":
        raise TuneError(f"kernel {kernel.name} cannot be sent to a worker process: its loop function {qualname} is "
                        f"defined in the script being run (__main__), which a worker process cannot import; "
                        f"define the kernel in a module and import it")
    ref = kernel_ref(function)
    try:
        return pickle.dumps((kernel.source_program, ref if ref is not None else function))
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        what = ("a lambda" if "<lambda>" in qualname else "defined inside a function (a closure)"
                if "<locals>" in qualname else "not bound to its own name in its module")
        raise TuneError(f"kernel {kernel.name} cannot be sent to a worker process: its loop function {qualname} "
                        f"is {what} ({e}); define it with @pc.kernel at the top level of an importable "
                        f"module") from e


def check_sizes(sizes: Mapping[str, int]) -> Dict[str, int]:
    """Small sizes for the correctness check: each size capped near 20 (all different, above the
    specialisation limit, so the binary checked is the binary timed)."""
    return {k: int(min(v, 19 + i % 3)) for i, (k, v) in enumerate(sizes.items())}


class WorkerState:
    """The worker's side: one kernel, its full-size inputs, and the candidates prepared so far."""

    def __init__(self, task: Task):
        from ..api import Kernel
        from ..testing.check import random_inputs
        from .registry_view import target_view
        program, function = pickle.loads(task.kernel_blob)
        if isinstance(function, KernelRef):
            function = function.resolve()
        self.task = task
        self.kernel = Kernel(program, function=function)
        self.inputs = random_inputs(self.kernel, dict(task.sizes), task.dtype, seed=0)
        self.target = target_view(task.target)
        self.compiled: Dict[str, Any] = {}

    def handle(self, request: Tuple[Any, ...]) -> Dict[str, Any]:
        try:
            if request[0] == "prepare":
                return self.prepare(*request[1:])
            if request[0] == "time":
                return {"ok": True, "seconds": self.time(*request[1:])}
            return {"ok": False, "error": f"unknown request {request[0]!r}"}
        except Exception as e:  # noqa: BLE001 - any failure of one candidate is that candidate's
            return {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}

    def prepare(self, key: str, candidate: Dict[str, Any], fault: Optional[str] = None) -> Dict[str, Any]:
        from ..api import compile as compile_kernel
        from ..testing.check import check_kernel
        from .space import Candidate, build
        schedule = build(self.kernel, Candidate.from_dict(candidate), self.target)
        fn = compile_kernel(self.kernel, schedule, target=self.target)
        if fault == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        if fault == "hang":
            while True:
                time.sleep(1)
        check_kernel(self.kernel, compiled=fn, sizes=dict(self.task.check_sizes), dtype=self.task.dtype)
        t = time.perf_counter()
        fn(**self._fresh())
        first = time.perf_counter() - t
        self.compiled[key] = fn
        return {"ok": True, "first": first}

    def _fresh(self) -> Dict[str, Any]:
        return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.inputs.items()}

    def time(self, key: str, min_s: float) -> float:
        """Mean seconds per call over back-to-back calls lasting at least `min_s` (fresh inputs
        before each call, untimed)."""
        fn = self.compiled[key]
        total, calls = 0.0, 0
        while calls == 0 or (total < min_s and calls < 100):
            args = self._fresh()
            t = time.perf_counter()
            fn(**args)
            total += time.perf_counter() - t
            calls += 1
        return total / calls


# -- a local worker process -------------------------------------------------------------------
# A plain subprocess (`python -m polyc.tune.worker`), not multiprocessing: a spawned
# multiprocessing child re-imports the caller's main module, so a script calling `pc.tune` at top
# level (without `if __name__ == "__main__":`) would fail.  Messages are length-prefixed pickles
# between this process and its own child.

def send_message(stream: Any, obj: Any) -> None:
    data = pickle.dumps(obj)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def read_message(stream: Any) -> Any:
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (n,) = struct.unpack("<Q", head)
    data = stream.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)


def serve(inp: Any, out: Any) -> None:
    """The worker's loop: a (task, cores) message, then requests answered until EOF or None."""
    task, cores = read_message(inp)
    if cores:
        try:
            os.sched_setaffinity(0, cores)
        except (AttributeError, OSError):
            pass
    try:
        state = WorkerState(task)
        send_message(out, {"ok": True})
    except Exception as e:  # noqa: BLE001
        send_message(out, {"ok": False, "error": f"{type(e).__name__}: {e}"})
        return
    while True:
        try:
            request = read_message(inp)
        except EOFError:
            return
        if request is None:
            return
        send_message(out, state.handle(request))


def thread_env(threads: int) -> Dict[str, str]:
    return {v: str(threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


class LocalChannel:
    """One worker process on this machine (optionally pinned to `cores`)."""

    start_timeout = 120.0

    def __init__(self, task: Task, cores: Optional[Tuple[int, ...]] = None):
        self.task, self.cores = task, cores
        self.proc: Any = None
        self.start()

    def start(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, **thread_env(self.task.threads))
        env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        self.proc = subprocess.Popen([sys.executable, "-m", "polyc.tune.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        send_message(self.proc.stdin, (self.task, self.cores))
        reply = self._receive(self.start_timeout)
        if not reply.get("ok"):
            from ..errors import TuneError
            self.close()
            raise TuneError(f"a tuning worker could not load the kernel: {reply.get('error')}")

    def _receive(self, timeout: float) -> Dict[str, Any]:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise WorkerLost(f"no answer within {timeout:.0f} s")
        try:
            return read_message(self.proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError) as e:
            raise WorkerLost(f"the worker process died (exit code {self.proc.poll()})") from e

    def call(self, request: Tuple[Any, ...], timeout: float) -> Dict[str, Any]:
        try:
            send_message(self.proc.stdin, request)
        except (BrokenPipeError, OSError) as e:
            raise WorkerLost("the worker process is gone") from e
        try:
            return self._receive(timeout)
        except WorkerLost:
            try:
                code = self.proc.wait(0.5)
            except subprocess.TimeoutExpired:
                code = None
            self.kill()
            if code is not None and code < 0:
                raise WorkerLost(f"the worker crashed (signal {-code})") from None
            raise

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def restart(self) -> None:
        self.kill()
        self.start()

    def close(self) -> None:
        try:
            if self.proc is not None and self.proc.poll() is None:
                send_message(self.proc.stdin, None)
                self.proc.wait(2)
        except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
            pass
        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout) if self.proc is not None else ():
            try:
                stream.close()
            except OSError:
                pass


# -- one interleaved batch ----------------------------------------------------------------------

def _spread(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return float("inf")
    q = statistics.quantiles(xs, n=4)
    return (q[2] - q[0]) / 2


def measure_batch(channel: Any, baseline: Tuple[str, Dict[str, Any]], batch: Sequence[Tuple[str, Dict[str, Any]]],
                  rounds: int = 5, min_s: float = 0.05, prepare_timeout: float = 120.0) -> List[Measurement]:
    """Prepare `batch` and the `baseline` on `channel`, then time them in `rounds` interleaved
    rounds.  Returns one Measurement per batch entry (and the baseline's, first)."""
    entries = [baseline] + [b for b in batch if b[0] != baseline[0]]
    failed: Dict[str, str] = {}
    firsts: Dict[str, float] = {}

    def prepare_all() -> None:
        # After a lost worker the new one starts empty: prepare everything not failed again.
        restarted = True
        while restarted:
            restarted = False
            for key, cand in entries:
                if key in failed:
                    continue
                try:
                    reply = channel.call(("prepare", key, cand, FAULTS.get(key)), prepare_timeout)
                except WorkerLost as e:
                    failed[key] = str(e)
                    channel.restart()
                    restarted = True
                    break
                if reply.get("ok"):
                    firsts[key] = float(reply["first"])
                else:
                    failed[key] = reply.get("error", "failed")

    prepare_all()
    base = baseline[0]
    samples: Dict[str, List[Optional[float]]] = {k: [] for k, _ in entries}
    if base not in failed:
        run_timeout = max(10.0, 20 * max(firsts.values()) + 4 * min_s)
        for r in range(rounds):
            live = [k for k, _ in entries if k not in failed]
            order = live[r % len(live):] + live[:r % len(live)]
            for key in order:
                if key in failed:
                    continue
                try:
                    reply = channel.call(("time", key, min_s), run_timeout)
                except WorkerLost as e:
                    failed[key] = str(e)
                    channel.restart()
                    prepare_all()
                    continue
                samples[key].append(float(reply["seconds"]) if reply.get("ok") else None)
                if len(samples[key]) < r + 1:
                    samples[key].append(None)
    out = []
    base_samples = samples.get(base, [])
    for key, _ in entries:
        if key in failed or base in failed:
            out.append(Measurement(key, False, error=failed.get(key) or f"baseline failed: {failed.get(base)}"))
            continue
        pairs = [(s, b) for s, b in zip(samples[key], base_samples) if s is not None and b is not None]
        if not pairs:
            out.append(Measurement(key, False, error="no timing"))
            continue
        ratios = [s / b for s, b in pairs]
        times = [s for s, _ in pairs]
        out.append(Measurement(key, True, statistics.median(times), statistics.median(ratios), _spread(ratios),
                               tuple(times)))
    return out
