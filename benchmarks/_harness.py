"""A small, careful timing harness for a shared 2-core machine.

Why it looks the way it does:

- every contender runs in its *own worker process*, started once and driven over a pipe: an idle
  OpenBLAS or OpenMP thread pool of one library cannot steal a core from another's measurement,
  and thread counts (`OMP_NUM_THREADS`, `OPENBLAS_NUM_THREADS`, ...) are fixed per process;
- contenders are *interleaved round by round* (the order rotates every round), with a short pause
  between runs, so slow drifts of a noisy machine hit every contender alike;
- each sample is the mean of enough back-to-back calls to last `min_sample_s`; we report the
  *median* over rounds (and keep every sample in the JSON);
- `timer="wall"` (default) measures elapsed time; `timer="cpu"` measures the worker's CPU time
  (all its threads), which for one thread is robust against other users of a shared machine;
- `OPENBLAS_CORETYPE`: when it is set in the environment, numpy/OpenBLAS contenders are measured
  both with it and with it unset (`openblas_variants`);
- results go to `benchmarks/results/<name>-<time>.json` (gitignored);
- `POLYC_BENCH_PRELOAD=mod1,mod2`: modules every worker imports before its setup (and that
  `preload()` imports in the parent), e.g. to measure a prototype patch of the code generator.

A contender names a *setup function* `module:function` and its keyword arguments.  In the worker
the setup function returns either a callable (timed) or a dict `{"run": f, "prepare": g,
"check": h}`: `prepare()` runs untimed before every timed `run()` (fresh inputs for kernels that
update arrays in place); `check()` returns an optional dict recorded with the results.  With
`"self_timed": True`, `run()` returns the seconds to record itself (a program in another process
that times its own kernel, as PolyBench/C's `POLYBENCH_TIME` does): the harness then records that
instead of its clock, whichever `timer` was asked for.
"""
from __future__ import annotations

import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


@dataclass
class Contender:
    """One thing to time: `setup` is "module:function", called with `args` in a fresh worker
    whose environment is ours updated by `env` (a value of None removes the variable)."""

    name: str
    setup: str
    args: Dict[str, Any] = field(default_factory=dict)
    env: Dict[str, Optional[str]] = field(default_factory=dict)
    group: str = ""          # the benchmark this contender belongs to (a table row)


def thread_env(threads: int) -> Dict[str, Optional[str]]:
    return {v: str(threads) for v in THREAD_VARS}


def written_arrays(kernel: Any) -> Set[str]:
    """The arrays some statement of `kernel` writes: the only ones a contender must restore before
    each call.  Restoring arrays only read would time where the copy left them: all in the caches
    of the calling thread's core, from which a second thread on this VM reads its share slowly
    (gesummv LARGE on two threads, one process: 0.43-0.56 ms restoring what it writes, 0.53-1.2 ms
    restoring everything; `add` 1024² f32: 0.09 against 0.27 ms)."""
    return {s.target.tensor for s in kernel.program.statements}


#: Bytes between the page offsets of consecutive arrays placed by `copied` (see `placed`).
PLACEMENT_STAGGER = 1024


def placed(value: Any, index: int) -> Any:
    """A C-contiguous copy of array `value` starting `index * PLACEMENT_STAGGER` bytes (mod 4096,
    plus 64 per turn around the page) past a page boundary.

    Where arrays sit relative to each other changes a small kernel's time: a load whose address
    matches a pending store's in the low 12 bits waits for it (4K aliasing).  jacobi-1d LARGE (two
    16 KB arrays) took 154-210 us in one process, depending only on how far apart `A` and `B`
    started, and numpy's allocator places them differently in every worker, so two workers running
    identical code measured 0.66x of each other.  Every contender gets the same placement, so a
    ratio measures code, not the allocator; staggered offsets are what a careful allocator gives."""
    import numpy as np
    offset = (index % 4) * PLACEMENT_STAGGER + (index // 4) * 64
    raw = np.empty(value.nbytes + 4096 + offset + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 4096 + offset
    out = raw[start:start + value.nbytes].view(value.dtype).reshape(value.shape)
    np.copyto(out, value)
    return out


def copied(inputs: Mapping[str, Any]) -> Dict[str, Any]:
    """Fresh copies of the arrays of `inputs` (scalars as they are), placed alike in every worker
    (`placed`): kernels update arrays in place."""
    import numpy as np
    out, index = {}, 0
    for k, v in inputs.items():
        if isinstance(v, np.ndarray):
            out[k] = placed(v, index)
            index += 1
        else:
            out[k] = v
    return out


def refilled(inputs: Mapping[str, Any], kernel: Any) -> Tuple[Dict[str, Any], Callable[[], None]]:
    """Working copies of `inputs` and an (untimed) function restoring, before each call, the ones
    `kernel` writes (`written_arrays`; every contender of a row runs that kernel's work)."""
    import numpy as np
    work, written = copied(inputs), written_arrays(kernel)

    def prepare() -> None:
        for k, v in inputs.items():
            if isinstance(v, np.ndarray) and k in written:
                np.copyto(work[k], v)

    return work, prepare


def openblas_variants(name: str, env: Mapping[str, Optional[str]]) -> List[tuple]:
    """(name, env) pairs for a numpy/OpenBLAS contender: as is, and, when OPENBLAS_CORETYPE is set
    here, once more with it unset."""
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    if not coretype:
        return [(name, dict(env))]
    return [(f"{name}[CORETYPE={coretype}]", dict(env)),
            (name, dict(env, OPENBLAS_CORETYPE=None))]


# -- worker side ---------------------------------------------------------------------------------

def _load(setup: str) -> Callable[..., Any]:
    module, _, fn = setup.partition(":")
    return getattr(importlib.import_module(module), fn)


def preload() -> List[str]:
    """Import the modules named in POLYC_BENCH_PRELOAD (comma-separated); returns their names."""
    names = [m.strip() for m in os.environ.get("POLYC_BENCH_PRELOAD", "").split(",") if m.strip()]
    for m in names:
        mod = importlib.import_module(m)
        if hasattr(mod, "apply"):
            mod.apply()
    return names


def _setup(spec: Dict[str, Any]) -> tuple:
    """Build one contender from its setup spec: (reply, run, prepare, self_timed); run is None on
    failure."""
    try:
        t0 = time.perf_counter()
        made = _load(spec["setup"])(**spec["args"])
        if callable(made):
            made = {"run": made}
        run, prepare = made["run"], made.get("prepare")
        info = made.get("check", lambda: None)() if made.get("check") else None
        if prepare:
            prepare()
        t1 = time.perf_counter()
        run()  # warm-up: compile, page in, spin up thread pools
        first = time.perf_counter() - t1
        reply = {"ok": True, "setup_s": t1 - t0, "first_s": first, "info": info}
        return reply, run, prepare, bool(made.get("self_timed"))
    except Exception as e:  # noqa: BLE001 - reported to the parent, which marks the contender failed
        import traceback
        reply = {"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
        return reply, None, None, False


def _worker() -> None:
    """Read one JSON setup line, then answer `run <n> <min_s>` lines with JSON sample lists.

    A later JSON line replaces the contender (one long-lived worker can time several kernels in
    turn, as `make demo` does); a failed first setup ends the worker, a failed later one does not.
    """
    out = sys.stdout
    sys.stdout = sys.stderr  # anything the setup prints must not corrupt the protocol
    spec = json.loads(sys.stdin.readline())
    try:
        preload()
    except Exception as e:  # noqa: BLE001
        import traceback
        out.write(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}) + "\n")
        out.flush()
        return
    reply, run, prepare, self_timed = _setup(spec)
    out.write(json.dumps(reply) + "\n")
    out.flush()
    if run is None:
        return
    for line in sys.stdin:
        if line.startswith("{"):
            reply, run, prepare, self_timed = _setup(json.loads(line))
            out.write(json.dumps(reply) + "\n")
            out.flush()
            continue
        parts = line.split()
        if not parts or parts[0] == "quit":
            break
        if run is None:
            out.write(json.dumps({"time": None, "calls": 0}) + "\n")
            out.flush()
            continue
        min_s = float(parts[2]) if len(parts) > 2 else 0.0
        clock = time.process_time if (len(parts) > 3 and parts[3] == "cpu") else time.perf_counter
        total, calls = 0.0, 0
        while True:
            if prepare:
                prepare()
            t = clock()
            reported = run()
            dt = float(reported) if self_timed else clock() - t
            total += dt
            calls += 1
            if total >= min_s or calls >= int(parts[1]):
                break
        out.write(json.dumps({"time": total / calls, "calls": calls}) + "\n")
        out.flush()


# -- parent side ---------------------------------------------------------------------------------

class _Worker:
    def __init__(self, c: Contender, timeout: float):
        env = dict(os.environ)
        for k, v in c.env.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        self.c = c
        self.timeout = timeout
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarks._harness", "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, cwd=str(ROOT))
        self.proc.stdin.write(json.dumps({"setup": c.setup, "args": c.args}) + "\n")
        self.proc.stdin.flush()
        self.ready: Optional[dict] = None

    def wait_ready(self) -> dict:
        if self.ready is None:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read()
                self.ready = {"ok": False, "error": "worker died during setup", "trace": err[-4000:]}
            else:
                self.ready = json.loads(line)
        return self.ready

    def sample(self, max_calls: int, min_s: float, timer: str = "wall") -> Optional[float]:
        try:
            self.proc.stdin.write(f"run {max_calls} {min_s} {timer}\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            return None
        if not line:
            return None
        return json.loads(line)["time"]

    def close(self) -> None:
        stop_worker(self.proc)


def stop_worker(proc: subprocess.Popen) -> None:
    """Ask a worker process to quit; kill it if it does not within 10 s."""
    try:
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        proc.wait(timeout=10)
    except Exception:  # noqa: BLE001
        proc.kill()


@dataclass
class Result:
    name: str
    group: str
    ok: bool
    samples: List[float] = field(default_factory=list)
    setup_s: float = 0.0
    first_s: float = 0.0
    error: str = ""
    info: Any = None
    env: Dict[str, Optional[str]] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @property
    def best(self) -> float:
        return min(self.samples) if self.samples else float("nan")


def _progress(text: str, enabled: bool) -> None:
    """A progress line rewritten in place on a terminal (nothing when stderr is not a terminal)."""
    if enabled and sys.stderr.isatty():
        sys.stderr.write("\r" + text[:110].ljust(110))
        sys.stderr.flush()


def measure(contenders: Sequence[Contender], *, rounds: int = 5, min_sample_s: float = 0.2,
            max_calls: int = 50, pause_s: float = 0.15, timeout: float = 600.0,
            progress: bool = True, label: str = "", timer: str = "wall") -> List[Result]:
    """Time every contender: `rounds` interleaved rounds of one sample each (see module doc).

    Workers of one call live side by side but only one runs at a time; a worker that fails its
    setup is reported (`ok=False`, `error`) and skipped.
    """
    if progress and not sys.stderr.isatty():
        sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {label}: {len(contenders)} contenders x {rounds} rounds\n")
        sys.stderr.flush()
    workers = [_Worker(c, timeout) for c in contenders]
    results: List[Result] = []
    try:
        for w in workers:
            r = w.wait_ready()
            res = Result(w.c.name, w.c.group, bool(r.get("ok")), env=w.c.env)
            if res.ok:
                res.setup_s, res.first_s, res.info = r["setup_s"], r["first_s"], r.get("info")
            else:
                res.error = r.get("error", "") + "\n" + r.get("trace", "")
            results.append(res)
        live = [k for k, r in enumerate(results) if r.ok]
        started = time.time()
        for rnd in range(rounds):
            order = live[rnd % len(live):] + live[:rnd % len(live)] if live else []
            for idx in order:
                w, res = workers[idx], results[idx]
                elapsed = time.time() - started
                _progress(f"[{label} round {rnd + 1}/{rounds}, {elapsed:5.0f}s] {res.group} {res.name}", progress)
                time.sleep(pause_s)
                t = w.sample(max_calls, min_sample_s, timer)
                if t is None:
                    res.ok = False
                    res.error = "worker died while timing: " + (w.proc.stderr.read() or "")[-2000:]
                    live = [k for k in live if k != idx]
                else:
                    res.samples.append(t)
        if progress and sys.stderr.isatty():
            sys.stderr.write("\r" + " " * 110 + "\r")
    finally:
        for w in workers:
            w.close()
    return results


def ratio(a: Result, b: Result) -> float:
    """How many times faster `a` is than `b` (median over median)."""
    if not (a.ok and b.ok and a.samples and b.samples):
        return float("nan")
    return b.median / a.median


def geomean(xs: Sequence[float]) -> float:
    import math
    vals = [x for x in xs if x == x and x > 0]
    if not vals:
        return float("nan")
    return math.exp(sum(math.log(x) for x in vals) / len(vals))


def torch_available() -> bool:
    """Whether PyTorch imports here (a contender only where it does)."""
    try:
        import torch  # noqa: F401
        return True
    except Exception:  # noqa: BLE001 - a broken install is as good as none
        return False


class TorchCompileFailed(RuntimeError):
    """`torch.compile` could not compile a contender here (no C++ compiler, an unsupported
    operator, ...); the message is the root cause's type and first line, so a table's FAILED line
    says why."""


def root_reason(e: BaseException) -> str:
    """`Type: first line` of the innermost cause of `e` (following `inner_exception`, which
    torch's `BackendCompilerFailed` uses, and `__cause__`): the wrapper's own message rarely says
    what went wrong."""
    seen = {id(e)}
    while True:
        inner = getattr(e, "inner_exception", None) or e.__cause__
        if not isinstance(inner, BaseException) or id(inner) in seen:
            break
        seen.add(id(inner))
        e = inner
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__


def torch_compile(fn: Callable[..., Any], warm_up: Callable[[Callable[..., Any]], Any]) -> Callable[..., Any]:
    """`torch.compile(fn)` with the default (inductor) backend, compiled at once by calling
    `warm_up(compiled)`, so that compilation happens in a contender's setup, outside timing.

    Raises `TorchCompileFailed` naming the root cause when compiling fails."""
    import torch
    compiled = torch.compile(fn)
    try:
        warm_up(compiled)
    except Exception as e:  # noqa: BLE001 - any failure to compile is reported the same way
        raise TorchCompileFailed(root_reason(e)) from e
    return compiled


def torch_inference(fn: Callable[..., Any], args: Mapping[str, Any], compiled: bool = False) -> Callable[[], Any]:
    """A contender's timed callable: `fn(**args)` without autograd, through `torch_compile` when
    `compiled` (warmed up here)."""
    import torch

    def call(f: Callable[..., Any]) -> Any:
        with torch.no_grad():
            return f(**args)

    if compiled:
        fn = torch_compile(fn, call)
    return lambda: call(fn)


def torch_backward(fn: Callable[..., Any], args: Mapping[str, Any], wrt: Sequence[Any], seed: Any,
                   forward: bool = True, compiled: bool = False) -> Callable[[], Any]:
    """A contender's timed callable for a gradient: `torch.autograd.grad` of `fn(**args)` with
    respect to the tensors `wrt`, with the output's adjoint `seed`; with `forward` the forward
    runs each call too (through `torch_compile` when `compiled`), else the backward alone on a
    graph built once (reusing what autograd saved)."""
    import torch

    def f_and_b(f: Callable[..., Any]) -> Any:
        return torch.autograd.grad(f(**args), wrt, seed)

    if compiled:
        cf = torch_compile(fn, f_and_b)
        return lambda: f_and_b(cf)
    if forward:
        return lambda: f_and_b(fn)
    y = fn(**args)
    return lambda: torch.autograd.grad(y, wrt, seed, retain_graph=True)


def machine_info() -> Dict[str, Any]:
    info: Dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(),
                            "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    from polyc.target import Target
    host = Target.host()
    info["caches"] = {"l1": host.l1, "l2": host.l2, "l3": host.l3}
    info["target"] = {"fingerprint": host.fingerprint(), **host.to_dict()}
    for k in ("OPENBLAS_CORETYPE", "OMP_NUM_THREADS", "POLYC_CFLAGS", "POLYC_CC", "POLYC_BENCH_PRELOAD"):
        if os.environ.get(k):
            info[k] = os.environ[k]
    return info


def write_results(name: str, payload: Dict[str, Any]) -> Path:
    """Write `payload` (plus machine info) to benchmarks/results/<name>-<timestamp>.json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"{name}-{stamp}.json"
    body = {"benchmark": name, "time": stamp, "machine": machine_info(), **payload}
    path.write_text(json.dumps(body, indent=1, default=_jsonable))
    return path


def _jsonable(x: Any) -> Any:
    if isinstance(x, Result):
        d = asdict(x)
        d["median"] = x.median
        return d
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with right-aligned numeric columns."""
    cells = [[str(h) for h in header]] + [[_fmt(v) for v in r] for r in rows]
    widths = [max(len(r[k]) for r in cells) for k in range(len(header))]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(r, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v != v:
            return "-"
        if abs(v) >= 100:
            return f"{v:.0f}"
        if abs(v) >= 1:
            return f"{v:.2f}"
        return f"{v:.3f}"
    return str(v)


def time_cell(r: Optional[Result]) -> str:
    """A table's time cell: the median, FAILED for a contender that failed, - for one not run."""
    if r is None:
        return "-"
    return fmt_time(r.median) if r.ok else "FAILED"


def fmt_time(s: float) -> str:
    if s != s:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


if __name__ == "__main__":
    if "--worker" in sys.argv:
        _worker()
    else:
        print(__doc__)
