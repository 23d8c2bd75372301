"""Compile generated C into a shared library, reusing the on-disk cache.

`compile_c(source)` returns the path of a `.so` built from `source`.  The command line is
`<compiler> <optimisation flags> -fPIC -shared -std=gnu11 [-fopenmp] -o <lib> <src> -lm`:

- compiler: the `compiler` argument, else the target's (`Target.host()`: `$POLYC_CC`, else `cc`, or
  `gcc` where there is no `cc`);
- optimisation flags: the `flags` argument (a string, split like a shell would, or a sequence of
  strings), else the target's (`Target.host()`: `$POLYC_CFLAGS`, split the same way, else
  `-O3 -march=native`); OpenMP and libmvec only where the target has them.  The flags that
  make a loadable library are always added, so overriding the optimisation level can never produce
  something ctypes cannot load; flags that would change where or what the compiler writes (`-o`,
  `-c`, `-E`, `-save-temps`, a linker `-o`, ...) are refused (`CompileFlagsError`), since the cache
  relies on the library landing at its own path.

The target's fingerprint is part of the cache key: a library built for one Target is never
reused for another.  A cached library is used only after `cache.entry_problem` verified it (owner, permissions and
sha256); anything else is rebuilt.  When the cache directory cannot be written, the library is
built in the private fallback directory instead (`cache.fallback_dir`, with a warning).
"""
from __future__ import annotations

import errno
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

from ..errors import CacheWarning, CompileError, CompileFlagsError  # noqa: F401 (CompileFlagsError: re-export)
from ..compile_flags import normalise_flags  # noqa: F401 (re-exported here)
from ..target import DEFAULT_OPT_FLAGS, Target  # noqa: F401 (DEFAULT_OPT_FLAGS: re-exported here)
from . import cache, vector_math
from .forksafe import ForkSafeLock
#: The GNU dialect, as a plain `gcc -O3` compiles C: it lets the compiler contract `a * b + c`
#: into one fused multiply-add (`-ffp-contract=fast`), which ISO mode (`-std=c11`) forbids.
#: Packed contractions rely on it (half the instructions per multiply-accumulate).
#: `-fno-math-errno`: a kernel cannot observe errno, and without it gcc may not vectorise a loop that
#: calls `expf` or `sqrtf` (each call might set errno).
#: `-fno-trapping-math`: a kernel cannot observe floating-point exception flags either, and without
#: it gcc does not vectorise a loop holding a conditional division (`select(c, a / b, 0)`: the division
#: might trap when `c` is false); no result changes (values and NaN rules are IEEE's either way).
#: Softmax's backward: 14 -> 9 ms.
LIBRARY_FLAGS: Tuple[str, ...] = ("-fPIC", "-shared", "-std=gnu11", "-fno-math-errno", "-fno-trapping-math")
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

_memo: Dict[Tuple[str, Tuple[str, ...], str, Path, str], Path] = {}
_memo_lock = ForkSafeLock()


def compile_c(source: str, *, flags: Optional[Sequence[str]] = None, compiler: Optional[str] = None,
              openmp: bool = True, rebuild: bool = False, target: Optional[Target] = None) -> Path:
    """Return the path of a shared library built from C `source` for `target` (default:
    `Target.host()`), compiling only on a cache miss.

    A cached library is returned only when verified (see `cache.entry_problem`); a corrupted,
    truncated or foreign one is rebuilt with a `CacheWarning`.  `rebuild=True` compiles again even
    when the entry looks fine (the caller could not load it).

    Raises `CompileError` when the compiler is missing or rejects the source; the error keeps the
    source (`.source`), the compiler's stderr (`.compiler_output`) and the command (`.command`),
    and its message names the kept `.c` file.  `CompileFlagsError` for flags polyc refuses.
    """
    target = Target.host() if target is None else target
    compiler_path = resolve_compiler(compiler or target.compiler)
    all_flags = command_flags(flags, openmp, compiler_path, target)
    fingerprint = target.fingerprint()
    directory = cache.cache_dir()
    # The source's digest, not the source: a process making thousands of kernels keeps 32 bytes
    # each here, not tens of kilobytes of C.
    memo_key = (_digest(source), all_flags, compiler_path, directory, fingerprint)
    with _memo_lock:
        hit = _memo.get(memo_key)
    if hit is not None and not rebuild and cache.entry_problem(hit) is None:
        return hit

    version = compiler_version(compiler_path) + native_machine(compiler_path, all_flags)
    key = cache.cache_key(source, all_flags, compiler_path, version, fingerprint)
    src_path, lib_path = cache.entry_paths(directory, key)
    problem = "rebuilt on request" if rebuild else cache.entry_problem(lib_path)
    if problem is not None:
        if problem not in ("missing", "has no recorded checksum", "rebuilt on request", cache.UNSIGNED):
            warnings.warn(f"the cached kernel library {lib_path} {problem}; rebuilding it", CacheWarning,
                          stacklevel=2)
        try:
            _build(source, all_flags, compiler_path, src_path, lib_path)
        except OSError as e:
            # The directory passed the checks but cannot take the files (full, read-only mount, ...).
            directory = cache.fallback_dir(f"cannot write to the cache directory {directory} "
                                           f"({e.strerror or e})")
            src_path, lib_path = cache.entry_paths(directory, key)
            try:
                _build(source, all_flags, compiler_path, src_path, lib_path)
            except OSError as again:
                raise CompileError(f"cannot build the kernel library in {directory} either "
                                   f"({again.strerror or again})", source=source) from again
    with _memo_lock:
        _memo[memo_key] = lib_path
    return lib_path


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def compiled_library(source: str) -> Optional[Path]:
    """The library this process last compiled (or found cached) for C `source`, if any."""
    digest = _digest(source)
    with _memo_lock:
        hits = [path for key, path in _memo.items() if key[0] == digest]
    return hits[-1] if hits else None


def resolve_compiler(compiler: Optional[str] = None) -> str:
    """Absolute path of the C compiler `compiler` (a name or path; default: `Target.host()`'s,
    which is `$POLYC_CC`, else `cc`, else `gcc`)."""
    env = os.environ.get("POLYC_CC")
    requested = compiler or env
    if requested == "cc" and not env:
        requested = None        # the host target's default: cc, else gcc
    if requested:
        found = shutil.which(requested)
        if found is None:
            origin = "$POLYC_CC" if requested == env else "the target's compiler"
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
                  compiler_path: Optional[str] = None, target: Optional[Target] = None) -> Tuple[str, ...]:
    """All compiler flags, in command-line order, for the given optimisation flags (None: the
    target's), OpenMP choice (honoured only where the target has OpenMP) and target (default:
    `Target.host()`)."""
    target = Target.host() if target is None else target
    opt = target.flags if flags is None else normalise_flags(flags)
    path = compiler_path or resolve_compiler(target.compiler)
    gcc = _is_gcc(path)
    workaround = GCC_WORKAROUND_FLAGS if gcc else ()
    openmp = openmp and target.openmp
    # SIMD math (libmvec) needs OpenMP's `declare simd` and GCC's vector ABI.
    vmath = vector_math.compile_flags(target) if (gcc and openmp) else ()
    return tuple(opt or ()) + workaround + LIBRARY_FLAGS + (OPENMP_FLAGS if openmp else ()) + vmath


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
def native_machine(compiler_path: str, flags: Tuple[str, ...]) -> str:
    """What `-march=native` (`-mcpu=`, `-mtune=`) means here, for the cache key: a digest of the
    macros the compiler predefines with these flags (`__AVX512VBMI__`, `__GFNI__`, ...); "" when
    no flag says native.  The flag's text alone would let a cache shared between two CPUs (an NFS
    home) serve one CPU's instructions to the other, which has no such instructions."""
    if not any(f.endswith("=native") for f in flags):
        return ""
    machine = [f for f in flags if f.startswith("-m")]
    try:
        proc = subprocess.run([compiler_path, *machine, "-dM", "-E", "-x", "c", os.devnull], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"could not run the C compiler {compiler_path!r}: {e}") from e
    macros = "\n".join(sorted(proc.stdout.splitlines()))
    return " native:" + hashlib.sha256(macros.encode("utf-8")).hexdigest()[:16]


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
    link = [*vector_math.link_flags(flags), *LINK_LIBS]
    tmp_obj: Optional[Path] = None
    if any(_links_fp_mode(f) for f in flags):
        # gcc links `crtfastmath.o` (and `crtprec*.o`) into a library built with -ffast-math, whose
        # constructor sets the loading thread's floating-point mode: numpy would then flush
        # subnormals to zero in the whole process.  Compile with the flags, link without them.
        tmp_obj = cache.temp_path(lib_path.parent, ".o")
        commands = [[compiler_path, *flags, "-c", "-o", str(tmp_obj), str(src_path)],
                    [compiler_path, *[f for f in flags if not _links_fp_mode(f)], "-o", str(tmp_lib), str(tmp_obj),
                     *link]]
    else:
        commands = [[compiler_path, *flags, "-o", str(tmp_lib), str(src_path), *link]]
    command_text = " && ".join(shlex.join(c) for c in commands)
    try:
        try:
            # The C locale keeps diagnostics in plain English with ASCII quotes, whatever the user's LANG.
            for command in commands:
                proc = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                                      env=dict(os.environ, LC_ALL="C"))
                if proc.returncode != 0:
                    break
        except subprocess.TimeoutExpired as e:
            raise CompileError(f"the C compiler did not finish within {COMPILE_TIMEOUT_S} s\n"
                               f"  source kept at: {src_path}\n  command: {command_text}",
                               source=source, compiler_output=_text(e.stderr), command=command_text) from e
        except OSError as e:
            raise CompileError(f"could not run the C compiler {compiler_path!r}: {e}",
                               source=source, command=command_text) from e
        if proc.returncode != 0:
            output = (proc.stderr or "") + (proc.stdout or "")
            if "No space left on device" in output:   # the cache's file system, not the code: fall back
                raise OSError(errno.ENOSPC, "No space left on device (the compiler could not write the library)")
            raise CompileError(
                f"the C compiler rejected the generated code (exit status {proc.returncode}):\n"
                f"{trim_output(output)}\n"
                f"  source kept at: {src_path}\n  command: {command_text}",
                source=source, compiler_output=output, command=command_text)
        if os.path.getsize(tmp_lib) == 0:    # `POLYC_CC=/bin/true`: success, and nothing built
            raise CompileError(f"the C compiler {compiler_path!r} reported success but wrote no library\n"
                               f"  source kept at: {src_path}\n  command: {command_text}",
                               source=source, compiler_output=(proc.stderr or "") + (proc.stdout or ""),
                               command=command_text)
        cache.install_library(tmp_lib, lib_path)
    finally:
        cache._unlink_quietly(tmp_lib)
        if tmp_obj is not None:
            cache._unlink_quietly(tmp_obj)


def _links_fp_mode(flag: str) -> bool:
    """Whether gcc links start files that change the process's floating-point mode for `flag`."""
    return flag in ("-Ofast", "-ffast-math", "-funsafe-math-optimizations", "-mdaz-ftz") or flag.startswith("-mpc")


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
