"""Stencils (issue #16): polyc `schedule="auto"` against naive C, naive OpenMP and `torch.compile`.

    python -m benchmarks.stencils                  # both stencils, 1 and 2 threads, 5 rounds
    python -m benchmarks.stencils --quick          # 3 rounds
    python -m benchmarks.stencils --only jacobi --threads 2 --rounds 7
    python -m benchmarks.stencils --sizes small --rounds 1 --contenders auto,naive,omp   # a smoke run
    python -m benchmarks.stencils --cpu-time       # 1-thread runs timed by CPU time (busy machines)

Kernels, float64, updating their arrays in place:

- `jacobi-2d`, N=1300, T=50: PolyBench's (`kernels.polybench.stencils`): B from A, then A from B;
- `9-point`, N=1500, T=20: `B[i,j]` = the 3x3 neighbourhood of `A` summed and divided by 9 over
  the interior, then a copy-back sweep `A[i,j] = B[i,j]`.

Contenders (`--contenders`, keys in brackets), each in its own worker process with the thread
count fixed there (see `_harness`), interleaved round by round, medians reported:

- `polyc auto` [auto]: `pc.compile(kernel, schedule="auto")`;
- `naive C` [naive]: polyc's source-order schedule (`schedule=None`) at `gcc -O3 -march=native`:
  the loops as written, sequential at every thread count;
- `naive OpenMP` [omp]: the same loops written in C here, with `#pragma omp parallel for` on each
  sweep's outer spatial loop (time steps in sequence), built at run time with
  `gcc -O3 -march=native -fopenmp` into a shared library and called through ctypes;
- `torch.compile` [torch]: one compiled function per time step of the slicing formulation (where
  PyTorch imports), `torch.set_num_threads(threads)`;
- `naive OpenMP short spin` [omp-spin], only when asked for: the naive OpenMP library with the
  short libgomp spin (`GOMP_SPINCOUNT=10000`) that polyc sets for its own kernels, where the naive
  OpenMP contender gets libgomp's default (what a user compiling it gets).

Before timing, every contender's result at the benchmark size is compared with a numpy reference
(computed once here, in the same order of additions); a mismatch is shown as FAILED and never
timed, and makes the script exit with status 1.  Columns: `vs naive` = naive C time / contender
time, `vs naive omp` = naive OpenMP time at the same thread count / contender time.  Targets of
issue #16 for polyc auto are printed after the table.  Results go to
`benchmarks/results/stencils-<time>.json`.
"""
import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

import polyc as pc

from . import _harness as H


# -- the kernels, as polyc loop kernels (jacobi-2d is PolyBench's own library entry) --------------

def nine_point(A: pc.f64["N", "N"], B: pc.f64["N", "N"], TSTEPS: int):
    for t in range(TSTEPS):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                B[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1]
                           + A[i, j - 1] + A[i, j] + A[i, j + 1]
                           + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = B[i, j]


def jacobi_2d_numpy(A: np.ndarray, B: np.ndarray, TSTEPS: int) -> None:
    """jacobi-2d by slicing, adding in the C kernel's order (so the results agree to the bit)."""
    for _ in range(TSTEPS):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])


def nine_point_numpy(A: np.ndarray, B: np.ndarray, TSTEPS: int) -> None:
    """The 9-point stencil and its copy-back by slicing, in the loop kernel's order of additions."""
    for _ in range(TSTEPS):
        B[1:-1, 1:-1] = (A[:-2, :-2] + A[:-2, 1:-1] + A[:-2, 2:]
                         + A[1:-1, :-2] + A[1:-1, 1:-1] + A[1:-1, 2:]
                         + A[2:, :-2] + A[2:, 1:-1] + A[2:, 2:]) / 9.0
        A[1:-1, 1:-1] = B[1:-1, 1:-1]


#: The naive OpenMP contender: the loops as written, one parallel region per sweep.
OMP_SOURCE = r"""
#include <stdint.h>

void jacobi_2d(int64_t n, int64_t tsteps, double *restrict a, double *restrict b)
{
  double (*restrict A)[n] = (double (*)[n]) a;
  double (*restrict B)[n] = (double (*)[n]) b;
  for (int64_t t = 0; t < tsteps; t++) {
    #pragma omp parallel for
    for (int64_t i = 1; i < n - 1; i++)
      for (int64_t j = 1; j < n - 1; j++)
        B[i][j] = 0.2 * (A[i][j] + A[i][j - 1] + A[i][j + 1] + A[i + 1][j] + A[i - 1][j]);
    #pragma omp parallel for
    for (int64_t i = 1; i < n - 1; i++)
      for (int64_t j = 1; j < n - 1; j++)
        A[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][j + 1] + B[i + 1][j] + B[i - 1][j]);
  }
}

void nine_point(int64_t n, int64_t tsteps, double *restrict a, double *restrict b)
{
  double (*restrict A)[n] = (double (*)[n]) a;
  double (*restrict B)[n] = (double (*)[n]) b;
  for (int64_t t = 0; t < tsteps; t++) {
    #pragma omp parallel for
    for (int64_t i = 1; i < n - 1; i++)
      for (int64_t j = 1; j < n - 1; j++)
        B[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1]
                   + A[i][j - 1] + A[i][j] + A[i][j + 1]
                   + A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) / 9.0;
    #pragma omp parallel for
    for (int64_t i = 1; i < n - 1; i++)
      for (int64_t j = 1; j < n - 1; j++)
        A[i][j] = B[i][j];
  }
}
"""
OMP_FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")


@dataclass(frozen=True)
class Stencil:
    """One benchmark kernel: its sizes (N, T) per size class, its references and the targets
    issue #16 sets for polyc auto (x naive C on 1 thread, x naive OpenMP on 2 threads)."""

    name: str
    sizes: Mapping[str, Tuple[int, int]]
    numpy_reference: Callable[[np.ndarray, np.ndarray, int], None]
    c_function: str
    targets: Tuple[float, float]

    def loop_kernel(self) -> Any:
        """The polyc kernel (built on demand: the front end parses the function's source)."""
        if self.name == "jacobi-2d":
            from kernels.polybench.stencils import jacobi_2d
            return pc.kernel(jacobi_2d)
        return pc.kernel(nine_point)

    def python_function(self) -> Callable[..., None]:
        """The loop nest as plain Python (run by the interpreter, an oracle for tiny sizes)."""
        if self.name == "jacobi-2d":
            from kernels.polybench.stencils import jacobi_2d
            return jacobi_2d
        return nine_point

    def inputs(self, size: str) -> Dict[str, Any]:
        """Fresh inputs at a size class: PolyBench's jacobi-2d initialisation for both stencils."""
        n, steps = self.sizes[size]
        i, j = np.indices((n, n), dtype=np.int64)
        return {"A": (i * (j + 2) + 2.0) / n, "B": (i * (j + 3) + 3.0) / n, "TSTEPS": steps}

    def title(self, size: str) -> str:
        n, steps = self.sizes[size]
        return f"{self.name} N={n} T={steps}"


STENCILS: Dict[str, Stencil] = {
    "jacobi-2d": Stencil("jacobi-2d", {"full": (1300, 50), "small": (30, 4)}, jacobi_2d_numpy, "jacobi_2d",
                         (2.5, 2.5)),
    "9-point": Stencil("9-point", {"full": (1500, 20), "small": (33, 3)}, nine_point_numpy, "nine_point",
                       (2.5, 2.0)),
}

#: contender key -> the name shown in the table
CONTENDERS: Dict[str, str] = {"auto": "polyc auto", "naive": "naive C", "omp": "naive OpenMP",
                              "torch": "torch.compile", "omp-spin": "naive OpenMP short spin"}
#: Timed unless --contenders says otherwise (omp-spin: the naive OpenMP library with the short
#: libgomp spin polyc sets for its own kernels, to tell the schedule's gain from the wait policy's).
DEFAULT_CONTENDERS = ("auto", "naive", "omp", "torch")
#: Relative tolerance of the check (the float64 results agree to the bit when the order of
#: additions is kept; a contender that reassociates may differ in the last bits).
RTOL = 1e-9


class StencilMismatch(RuntimeError):
    """A contender's result differs from the numpy reference: it is reported, never timed."""


def reference(stencil: Stencil, size: str) -> Dict[str, np.ndarray]:
    """A and B after the kernel, by numpy."""
    inputs = stencil.inputs(size)
    stencil.numpy_reference(inputs["A"], inputs["B"], inputs["TSTEPS"])
    return {"A": inputs["A"], "B": inputs["B"]}


def mismatch(got: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray]) -> Optional[str]:
    """None when every array matches within RTOL (relative to the array's largest value), else a
    sentence naming the first wrong array, its worst element and both values there."""
    for name, want in expected.items():
        have = np.asarray(got[name])
        if have.shape != want.shape:
            return f"{name} has shape {have.shape}, expected {want.shape}"
        err = np.abs(have - want)
        bad = ~(err <= RTOL * max(1.0, float(np.max(np.abs(want)))))  # NaN counts as wrong
        if bad.any():
            at = tuple(int(k) for k in np.unravel_index(
                int(np.argmax(np.where(bad, np.nan_to_num(err, nan=np.inf), -1.0))), want.shape))
            return (f"{name}{list(at)} = {float(have[at])!r}, expected {float(want[at])!r} "
                    f"({int(bad.sum())} elements differ)")
    return None


# -- contenders: each returns run(), which updates work["A"], work["B"] in place ------------------

def _threads() -> int:
    return int(os.environ.get("OMP_NUM_THREADS", "1"))


def _polyc_runner(schedule: Optional[str]) -> Callable[[Stencil, Dict[str, Any]], Callable[[], None]]:
    def make(stencil: Stencil, work: Dict[str, Any]) -> Callable[[], None]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = pc.compile(stencil.loop_kernel(), schedule=schedule)
        return lambda: f(A=work["A"], B=work["B"], TSTEPS=work["TSTEPS"])
    return make


def build_omp_library(folder: Path) -> Path:
    """Compile OMP_SOURCE with gcc into `folder`; the shared library's path."""
    src, lib = folder / "stencils_omp.c", folder / "stencils_omp.so"
    src.write_text(OMP_SOURCE)
    done = subprocess.run(["gcc", *OMP_FLAGS, str(src), "-o", str(lib)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"gcc failed on the naive OpenMP source:\n{done.stderr[-2000:]}")
    return lib


def _omp_runner(stencil: Stencil, work: Dict[str, Any]) -> Callable[[], None]:
    folder = Path(tempfile.mkdtemp(prefix="polyc-stencils-omp-"))
    try:
        lib = ctypes.CDLL(str(build_omp_library(folder)))
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the library stays mapped
    fn = getattr(lib, stencil.c_function)
    fn.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = None
    a, b = work["A"], work["B"]
    assert a.flags.c_contiguous and b.flags.c_contiguous and a.dtype == b.dtype == np.float64
    n, steps = a.shape[0], int(work["TSTEPS"])
    return lambda: fn(n, steps, a.ctypes.data, b.ctypes.data)


def _torch_runner(stencil: Stencil, work: Dict[str, Any]) -> Callable[[], None]:
    import torch
    torch.set_num_threads(_threads())
    a, b = torch.from_numpy(work["A"]), torch.from_numpy(work["B"])  # share memory with numpy
    steps = int(work["TSTEPS"])
    step = torch.compile(_torch_step(stencil.name))

    def run() -> None:
        with torch.no_grad():
            for _ in range(steps):
                step(a, b)
    return run


def _torch_step(name: str) -> Callable[[Any, Any], None]:
    """One time step of the natural PyTorch formulation (slicing, in place)."""
    if name == "jacobi-2d":
        def step(A: Any, B: Any) -> None:
            B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
            A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])
        return step

    def step9(A: Any, B: Any) -> None:
        B[1:-1, 1:-1] = (A[:-2, :-2] + A[:-2, 1:-1] + A[:-2, 2:] + A[1:-1, :-2] + A[1:-1, 1:-1]
                         + A[1:-1, 2:] + A[2:, :-2] + A[2:, 1:-1] + A[2:, 2:]) / 9.0
        A[1:-1, 1:-1] = B[1:-1, 1:-1]
    return step9


#: contender key -> maker of its run(); looked up when a worker sets up (a preloaded module may
#: replace an entry, as the tests do to check that a wrong result is caught).
RUNNERS: Dict[str, Callable[[Stencil, Dict[str, Any]], Callable[[], None]]] = {
    "auto": _polyc_runner("auto"), "naive": _polyc_runner(None), "omp": _omp_runner, "torch": _torch_runner,
    "omp-spin": _omp_runner,
}


def setup(contender: str, kernel: str, size: str, reference_file: str) -> Dict[str, Any]:
    """Harness setup (runs in a worker): build the contender, run it once on fresh inputs and
    compare with the reference saved in `reference_file`; raise StencilMismatch when it differs."""
    stencil = STENCILS[kernel]
    inputs = stencil.inputs(size)
    work = H.copied(inputs)
    run = RUNNERS[contender](stencil, work)

    def prepare() -> None:
        np.copyto(work["A"], inputs["A"])
        np.copyto(work["B"], inputs["B"])

    prepare()
    run()
    with np.load(reference_file) as saved:
        wrong = mismatch(work, {k: saved[k] for k in ("A", "B")})
    if wrong:
        raise StencilMismatch(f"{CONTENDERS[contender]} on {stencil.title(size)}: {wrong}")
    return {"run": run, "prepare": prepare}


# -- the parent: check, time, report ---------------------------------------------------------------

def contender_env(key: str, threads: int) -> Dict[str, Optional[str]]:
    env = H.thread_env(threads)
    if key == "omp-spin":
        from polyc.runtime.loader import OMP_WAIT_DEFAULTS
        env.update(OMP_WAIT_DEFAULTS)
        env["OMP_WAIT_POLICY"] = None  # the short spin alone, as polyc's own kernels get it
    if key == "torch":
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # no pool of compile workers on a small machine
    return env


def time_kernel(stencil: Stencil, size: str, threads: int, keys: Sequence[str], reference_file: Path,
                rounds: int, min_sample_s: float, timer: str = "wall") -> Dict[str, H.Result]:
    """Time the contenders `keys` of one kernel at one thread count; results by contender key."""
    cs = [H.Contender(k, "benchmarks.stencils:setup",
                      dict(contender=k, kernel=stencil.name, size=size, reference_file=str(reference_file)),
                      env=contender_env(k, threads), group=stencil.name) for k in keys]
    res = H.measure(cs, rounds=rounds, min_sample_s=min_sample_s, max_calls=20,
                    label=f"{stencil.name} {threads}t", timer=timer)
    return {r.name: r for r in res}


def failure(r: H.Result) -> str:
    """The first line of a failed contender's error, without the exception's type for a mismatch."""
    line = (r.error or "").strip().splitlines()[0] if r.error else "failed"
    return line.replace(f"{StencilMismatch.__name__}: ", "")


def table_rows(stencil: Stencil, size: str, threads: int, by: Mapping[str, H.Result]) -> List[List[Any]]:
    """One row per contender: median (or FAILED), vs naive C, vs naive OpenMP at this thread count."""
    naive, omp = by.get("naive"), by.get("omp")
    rows = []
    for key, r in by.items():
        if not r.ok or not r.samples:
            rows.append([stencil.title(size), threads, CONTENDERS[key], "FAILED", float("nan"), float("nan")])
            continue
        rows.append([stencil.title(size), threads, CONTENDERS[key], H.fmt_time(r.median),
                     H.ratio(r, naive) if naive else float("nan"), H.ratio(r, omp) if omp else float("nan")])
    return rows


def target_line(stencil: Stencil, size: str, timings: Mapping[int, Mapping[str, H.Result]]) -> Optional[str]:
    """polyc auto against issue #16's targets: x naive C on 1 thread, x naive OpenMP on 2."""
    parts = []
    for threads, base, target in ((1, "naive", stencil.targets[0]), (2, "omp", stencil.targets[1])):
        by = timings.get(threads, {})
        if "auto" in by and base in by:
            x = H.ratio(by["auto"], by[base])
            shown = f"{x:.2f}x" if x == x else "-"
            parts.append(f"{shown} {CONTENDERS[base]} on {threads} thread{'s' if threads > 1 else ''} (target >= {target}x)")
    return f"{stencil.title(size)}: polyc auto at " + ", ".join(parts) if parts else None


def parse_list(text: str, known: Sequence[str], what: str, ap: argparse.ArgumentParser) -> List[str]:
    """Comma-separated keys of `known`; an unknown one is a usage error."""
    keys = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in keys if k not in known]
    if unknown:
        ap.error(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(known)}")
    return keys


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 rounds (default 5)")
    ap.add_argument("--only", default="", help="kernels whose name contains this text (comma-separated: any)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--sizes", default="full", choices=("full", "small"),
                    help="full: the sizes of issue #16; small: tiny sizes to check the machinery")
    ap.add_argument("--contenders", default=",".join(DEFAULT_CONTENDERS),
                    help=f"comma-separated subset of {', '.join(CONTENDERS)} (default {','.join(DEFAULT_CONTENDERS)}; "
                         "torch only where importable; omp-spin: naive OpenMP with polyc's short libgomp spin)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time 1-thread runs by the worker's CPU time (robust on a busy machine); 2 threads "
                         "stay wall-clock")
    args = ap.parse_args(argv)
    try:
        threads = [int(t) for t in args.threads.split(",") if t.strip()]
    except ValueError:
        threads = []
    if not threads or min(threads) < 1:
        ap.error(f"--threads wants positive thread counts, e.g. 1,2, not {args.threads!r}")
    if args.rounds is not None and args.rounds < 1:
        ap.error("--rounds wants at least 1")
    rounds = args.rounds or (3 if args.quick else 5)
    keys = parse_list(args.contenders, list(CONTENDERS), "contender", ap)
    names = [n for n in STENCILS if not args.only or any(p.strip() in n for p in args.only.split(",") if p.strip())]
    if not names:
        ap.error(f"--only {args.only!r} matches no kernel; kernels: {', '.join(STENCILS)}")
    asked_torch = "torch" in keys
    keys = [k for k in keys if k != "torch" or H.torch_available()]
    loaded = H.preload()
    print(f"stencils ({args.sizes} sizes): {', '.join(CONTENDERS[k] for k in keys)}; threads {threads}, "
          f"{rounds} rounds" + ("; 1 thread by CPU time" if args.cpu_time else "")
          + ("" if "torch" in keys or not asked_torch else "; PyTorch not importable: no torch.compile")
          + (f"; preloaded {', '.join(loaded)}" if loaded else ""))

    rows: List[List[Any]] = []
    targets: List[str] = []
    results: Dict[str, List[H.Result]] = {}
    failed = False
    folder = Path(tempfile.mkdtemp(prefix="polyc-stencils-ref-"))
    try:
        for name in names:
            stencil = STENCILS[name]
            ref_file = folder / f"{name}.npz"
            np.savez(ref_file, **reference(stencil, args.sizes))
            timings: Dict[int, Dict[str, H.Result]] = {}
            for t in threads:
                by = time_kernel(stencil, args.sizes, t, keys, ref_file, rounds, 0.1 if args.quick else 0.2,
                                 "cpu" if (args.cpu_time and t == 1) else "wall")
                timings[t] = by
                results[f"{stencil.title(args.sizes)} / {t}t"] = list(by.values())
                for key, r in by.items():
                    if not r.ok:
                        failed = True
                        print(f"  {stencil.title(args.sizes)} {t}t {CONTENDERS[key]} FAILED: {failure(r)}")
                rows += table_rows(stencil, args.sizes, t, by)
            line = target_line(stencil, args.sizes, timings)
            if line:
                targets.append(line)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    header = ["kernel", "thr", "contender", "median", "vs naive", "vs naive omp"]
    print(H.format_table(header, rows))
    for line in targets:
        print(line)
    path = H.write_results("stencils", {"sizes": args.sizes, "threads": threads, "rounds": rounds,
                                        "timer_1t": "cpu" if args.cpu_time else "wall",
                                        "contenders": keys, "table": {"header": header, "rows": rows},
                                        "targets": targets, "results": results})
    try:
        shown = path.relative_to(H.ROOT)
    except ValueError:
        shown = path
    print(f"results: {shown}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
