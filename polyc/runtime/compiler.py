"""Compile generated C into a shared library, reusing the on-disk cache.

`compile_c(source)` returns the path of a `.so` built from `source`.  The command line is
`<compiler> <optimisation flags> -fPIC -shared -std=gnu11 [-fopenmp] -o <lib> <src> -lm`:

- compiler: the `compiler` argument, else `$POLYC_CC`, else `cc` (or `gcc` where there is no `cc`);
- optimisation flags: the `flags` argument, else `$POLYC_CFLAGS` (split like a shell would), else
  `-O3 -march=native`.  The flags that make a loadable library are always added, so overriding the
  optimisation level can never produce something ctypes cannot load.
"""
from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

from ..errors import CompileError
from . import cache, vector_math

DEFAULT_OPT_FLAGS: Tuple[str, ...] = ("-O3", "-march=native")
#: The GNU dialect, as a plain `gcc -O3` compiles C: it lets the compiler contract `a * b + c`
#: into one fused multiply-add (`-ffp-contract=fast`), which ISO mode (`-std=c11`) forbids.
#: Packed contractions rely on it (half the instructions per multiply-accumulate).
#: `-fno-math-errno`: a kernel cannot observe errno, and without it gcc may not vectorise a loop that
#: calls `expf` or `sqrtf` (each call might set errno).
LIBRARY_FLAGS: Tuple[str, ...] = ("-fPIC", "-shared", "-std=gnu11", "-fno-math-errno")
OPENMP_FLAGS: Tuple[str, ...] = ("-fopenmp",)
LINK_LIBS: Tuple[str, ...] = ("-lm",)
#: Correctness workarounds added for GCC whatever the optimisation flags: GCC 12's unroll-and-jam
#: pass miscompiles an outer recurrence over an inner `#pragma omp simd` loop at -O3 (a legal
#: schedule found by polyc's schedule fuzzer; reproduced in tests/runtime/test_gcc_workaround.py).
GCC_WORKAROUND_FLAGS: Tuple[str, ...] = ("-fno-loop-unroll-and-jam",)

#: Generous: a generated kernel compiles in well under a second; this only guards against hangs.
COMPILE_TIMEOUT_S = 600
#: How much compiler output goes into an exception message (the full text is on `.compiler_output`).
MAX_MESSAGE_LINES = 40

_memo: Dict[Tuple[str, Tuple[str, ...], str, Path], Path] = {}
_memo_lock = threading.Lock()


def compile_c(source: str, *, flags: Optional[Sequence[str]] = None, compiler: Optional[str] = None,
              openmp: bool = True) -> Path:
    """Return the path of a shared library built from C `source`, compiling only on a cache miss.

    Raises `CompileError` when the compiler is missing or rejects the source; the error keeps the
    source (`.source`), the compiler's stderr (`.compiler_output`) and the command (`.command`),
    and its message names the kept `.c` file.
    """
    compiler_path = resolve_compiler(compiler)
    all_flags = command_flags(flags, openmp, compiler_path)
    directory = cache.cache_dir()
    memo_key = (source, all_flags, compiler_path, directory)
    with _memo_lock:
        hit = _memo.get(memo_key)
    if hit is not None and hit.exists():
        return hit

    version = compiler_version(compiler_path)
    key = cache.cache_key(source, all_flags, compiler_path, version)
    src_path, lib_path = cache.entry_paths(directory, key)
    if not lib_path.exists():
        _build(source, all_flags, compiler_path, src_path, lib_path)
    with _memo_lock:
        _memo[memo_key] = lib_path
    return lib_path


def resolve_compiler(compiler: Optional[str] = None) -> str:
    """Absolute path of the C compiler to use (see the module docstring for the order of choice)."""
    requested = compiler or os.environ.get("POLYC_CC")
    if requested:
        found = shutil.which(requested)
        if found is None:
            origin = "compiler argument" if compiler else "$POLYC_CC"
            raise CompileError(f"C compiler {requested!r} (from {origin}) was not found; "
                               f"install it or point POLYC_CC at a C compiler such as gcc")
        return os.path.abspath(found)
    for name in ("cc", "gcc"):
        found = shutil.which(name)
        if found:
            return os.path.abspath(found)
    raise CompileError("no C compiler found (looked for 'cc' and 'gcc' on PATH); "
                       "install gcc or set POLYC_CC to a C compiler")


def command_flags(flags: Optional[Sequence[str]], openmp: bool,
                  compiler_path: Optional[str] = None) -> Tuple[str, ...]:
    """All compiler flags, in command-line order, for the given optimisation flags and OpenMP choice."""
    if flags is None:
        env = os.environ.get("POLYC_CFLAGS")
        opt = tuple(shlex.split(env)) if env is not None else DEFAULT_OPT_FLAGS
    else:
        opt = tuple(flags)
    path = compiler_path or resolve_compiler()
    gcc = _is_gcc(path)
    workaround = GCC_WORKAROUND_FLAGS if gcc else ()
    # SIMD math (libmvec) needs OpenMP's `declare simd` and GCC's vector ABI.
    vmath = vector_math.compile_flags() if (gcc and openmp) else ()
    return opt + workaround + LIBRARY_FLAGS + (OPENMP_FLAGS if openmp else ()) + vmath


@functools.lru_cache(maxsize=None)
def _is_gcc(compiler_path: str) -> bool:
    """True for GCC itself (its predefined macros have __GNUC__ but not __clang__)."""
    try:
        proc = subprocess.run([compiler_path, "-dM", "-E", "-x", "c", os.devnull], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return "__GNUC__" in proc.stdout and "__clang__" not in proc.stdout


@functools.lru_cache(maxsize=None)
def compiler_version(compiler_path: str) -> str:
    """First line of `<compiler> --version` (memoised per process); part of the cache key."""
    try:
        proc = subprocess.run([compiler_path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"could not run the C compiler {compiler_path!r}: {e}") from e
    lines = (proc.stdout or proc.stderr).strip().splitlines()
    return lines[0] if lines else ""


def _build(source: str, flags: Tuple[str, ...], compiler_path: str, src_path: Path, lib_path: Path) -> None:
    """Compile into a temporary file next to the cache entry, then move it into place atomically."""
    cache.write_atomic(src_path, source)
    tmp_lib = cache.temp_path(lib_path.parent, ".so")
    command = [compiler_path, *flags, "-o", str(tmp_lib), str(src_path), *vector_math.link_flags(flags),
               *LINK_LIBS]
    command_text = shlex.join(command)
    try:
        try:
            # The C locale keeps diagnostics in plain English with ASCII quotes, whatever the user's LANG.
            proc = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                                  env=dict(os.environ, LC_ALL="C"))
        except subprocess.TimeoutExpired as e:
            raise CompileError(f"the C compiler did not finish within {COMPILE_TIMEOUT_S} s\n"
                               f"  source kept at: {src_path}\n  command: {command_text}",
                               source=source, compiler_output=_text(e.stderr), command=command_text) from e
        except OSError as e:
            raise CompileError(f"could not run the C compiler {compiler_path!r}: {e}",
                               source=source, command=command_text) from e
        if proc.returncode != 0:
            output = (proc.stderr or "") + (proc.stdout or "")
            raise CompileError(
                f"the C compiler rejected the generated code (exit status {proc.returncode}):\n"
                f"{trim_output(output)}\n"
                f"  source kept at: {src_path}\n  command: {command_text}",
                source=source, compiler_output=output, command=command_text)
        os.replace(tmp_lib, lib_path)
    finally:
        cache._unlink_quietly(tmp_lib)


def trim_output(output: str, max_lines: int = MAX_MESSAGE_LINES) -> str:
    """Compiler output shortened for a message: errors first, at most `max_lines` lines."""
    lines = output.rstrip().splitlines()
    if len(lines) <= max_lines:
        return "\n".join(lines)
    # Lead with the diagnostics that explain the failure; warnings and notes come after.
    errors = [i for i, line in enumerate(lines) if "error" in line]
    start = max(0, errors[0] - 2) if errors else 0
    kept = lines[start:start + max_lines]
    omitted = len(lines) - len(kept)
    return "\n".join(kept) + f"\n  ... ({omitted} more lines of compiler output in .compiler_output)"


def _text(data: object) -> str:
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""
