"""PolyBench/C's own programs as a benchmark contender, when the user has a copy at hand.

polyc never ships PolyBench/C: the user fetches PolyBench/C 4.2 themselves and names its root (the
folder holding `utilities/polybench.c`) with `--polybench-src DIR` or the `POLYBENCH_SRC`
environment variable.  Each kernel is then built from its own sources with
`gcc -O3 -march=native`, at the preset being timed (`-D<PRESET>_DATASET` plus every size of the
preset as a `-D` define, so both sides run exactly the same sizes), with PolyBench's own data type
and timer (`-DPOLYBENCH_TIME`), and run in its own process.  The kernel time the program prints
is what we record (the harness's `self_timed` contenders), so start-up and initialisation are not
counted.  `-DPOLYBENCH_NO_FLUSH_CACHE`: polyc's timings start with the inputs just copied (warm
caches), so PolyBench's run starts warm too.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

ENV_VAR = "POLYBENCH_SRC"
CFLAGS = ("-O3", "-march=native")
DEFINES = ("-DPOLYBENCH_TIME", "-DPOLYBENCH_NO_FLUSH_CACHE")


class PolyBenchSourceError(RuntimeError):
    """The PolyBench/C copy named by the user lacks what a kernel needs, or does not build."""


def source_root(explicit: Optional[str] = None) -> Optional[Path]:
    """The PolyBench/C root given on the command line, else by $POLYBENCH_SRC; None when neither.

    Raises `PolyBenchSourceError` when a root is given but holds no `utilities/polybench.c`."""
    given = explicit or os.environ.get(ENV_VAR)
    if not given:
        return None
    root = Path(given).expanduser().resolve()
    if not (root / "utilities" / "polybench.c").is_file():
        raise PolyBenchSourceError(f"{root} is not a PolyBench/C copy: no utilities/polybench.c there")
    return root


def kernel_source(root: Path, kernel: str) -> Path:
    """`<root>/.../<kernel>/<kernel>.c`: PolyBench keeps every kernel in a folder of its name."""
    found = sorted(p for p in root.glob(f"**/{kernel}/{kernel}.c") if p.is_file())
    if not found:
        raise PolyBenchSourceError(f"no {kernel}/{kernel}.c under {root}")
    return found[0]


def build_command(root: Path, kernel: str, preset: str, sizes: Mapping[str, int], out: Path) -> list:
    """The gcc command line that builds PolyBench's `kernel` at `preset` into the program `out`."""
    src = kernel_source(root, kernel)
    utilities = root / "utilities"
    size_defines = [f"-D{name}={int(value)}" for name, value in sorted(sizes.items())]
    return ["gcc", *CFLAGS, *DEFINES, f"-D{preset}_DATASET", *size_defines,
            f"-I{utilities}", f"-I{src.parent}", str(utilities / "polybench.c"), str(src),
            "-o", str(out), "-lm"]


def build(root: Path, kernel: str, preset: str, sizes: Mapping[str, int]) -> Path:
    """Build (once per kernel source text, preset and sizes; kept in the temporary folder) and
    return the program's path."""
    text = kernel_source(root, kernel).read_bytes()
    key = hashlib.sha256(repr((str(root), text, kernel, preset, sorted(sizes.items()), CFLAGS)).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "polyc-polybench-c"
    folder.mkdir(exist_ok=True)
    program = folder / f"{kernel}-{preset}-{key}"
    if program.exists():
        return program
    partial = folder / f".{program.name}.{os.getpid()}"
    cmd = build_command(root, kernel, preset, sizes, partial)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise PolyBenchSourceError(f"building PolyBench's {kernel} failed:\n{' '.join(cmd)}\n{done.stderr[-2000:]}")
    shutil.move(str(partial), str(program))
    return program


def run_program(program: Path) -> float:
    """Run a PolyBench program once; the kernel's seconds as its `POLYBENCH_TIME` timer prints them."""
    done = subprocess.run([str(program)], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise PolyBenchSourceError(f"{program.name} exited with {done.returncode}: {done.stderr[-500:]}")
    lines = [line for line in done.stdout.split() if line.strip()]
    if not lines:
        raise PolyBenchSourceError(f"{program.name} printed no time (built without -DPOLYBENCH_TIME?)")
    return float(lines[-1])


def setup(kernel: str, preset: str, sizes: Dict[str, int], root: str) -> Dict[str, Any]:
    """Harness setup (runs in a worker): build PolyBench's program and time it by its own timer."""
    program = build(Path(root), kernel, preset, sizes)
    return {"run": lambda: run_program(program), "self_timed": True}
