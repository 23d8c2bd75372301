"""Checking C compiler flags that polyc did not choose (`flags=`, `$POLYC_CFLAGS`, a Target's flags).

Flags are untrusted input: a string is split like a shell would, anything that is not a string is
refused, and flags that would change where or what the compiler writes are refused, because the
compiled-library cache relies on each library landing at its own path.  A leaf module (it needs
only `polyc.errors`), so `polyc.target` and `polyc.runtime.compiler` can both use it.
"""
from __future__ import annotations

import re
import shlex
from typing import Optional, Sequence, Tuple

from .errors import CompileFlagsError

#: Flags that change where or what the compiler writes: the cache needs the library at its own path.
_OUTPUT_FLAGS = ("-o", "--output", "-c", "-S", "-E", "-M", "-MM", "-MD", "-MMD", "-MF", "-MT", "-MQ",
                 "-save-temps", "-dumpdir", "-dumpbase", "-dumpbase-ext", "-aux-info", "--preprocess",
                 "--assemble", "--compile")


def normalise_flags(flags: object, origin: str = "flags") -> Optional[Tuple[str, ...]]:
    """`flags` as a tuple of compiler arguments: None stays None, a string is split like a shell
    would (`"-O2 -g"`), a list or tuple must hold strings.  CompileFlagsError for anything else and
    for flags that would redirect or change the compiler's output (they would break the cache)."""
    if flags is None:
        return None
    if isinstance(flags, str):
        try:
            parts = tuple(shlex.split(flags))
        except ValueError as e:
            raise CompileFlagsError(f"{origin} {flags!r} cannot be split into arguments: {e}") from None
    elif isinstance(flags, (list, tuple)):
        parts = tuple(flags)
        for f in parts:
            if not isinstance(f, str):
                raise CompileFlagsError(f"{origin} must be strings, but {f!r} is a {type(f).__name__}")
    else:
        raise CompileFlagsError(f"{origin} must be a string (\"-O2 -g\") or a list of strings, not "
                                f"{type(flags).__name__} {flags!r}")
    for f in parts:
        _check_flag(f, origin)
    return parts


def _check_flag(flag: str, origin: str) -> None:
    if not flag or "\0" in flag:
        raise CompileFlagsError(f"{origin} contain an empty argument or a NUL character: {flag!r}")
    if flag.startswith("@"):
        raise CompileFlagsError(f"{origin}: response files ({flag!r}) are not accepted; pass the flags themselves")
    # `-Wl,-o,x` hands the linker an output of its own (`-Xlinker -o` arrives here as a plain "-o").
    linker = flag.split(",")[1:] if flag.startswith("-Wl,") else []
    bad = any(flag == o or flag.startswith(o + "=") for o in _OUTPUT_FLAGS) or \
        flag.startswith("-o") or flag.startswith(("-save-temps", "-MF", "-MT", "-MQ")) or \
        any(a in ("-o", "--output") or a.startswith(("-o", "--output=")) for a in linker)
    if bad:
        raise CompileFlagsError(f"{origin}: {flag!r} would change where or what the compiler writes; polyc "
                                f"chooses the output itself (the cache relies on it)")


#: Flags a target read from a file may carry: optimisation and code-generation options only.  A
#: saved target is untrusted input, and many compiler flags run or load other code (`-wrapper`,
#: `-fplugin=`, `-B`, `-specs=`, `-Wl,...`, `-l`, `-fcompare-debug=-B.`: any option list), read
#: other sources into the kernel (`-I`, `-include`, `-D` macros that rename what the generated code
#: calls), write files (`-fprofile-generate`, `-fdump-...`) or change results behind the user's back
#: (`-Ofast`, `-ffast-math` and its parts, which also link code that flushes subnormals to zero in
#: the whole process; `-fsingle-precision-constant`; `-mabi=ms`, `-ffixed-<reg>`: another calling
#: convention).  So an explicit list of options known to change only speed: `-O0..3/s/g`, `-g`,
#: `-std=`, the target CPU and its instruction-set extensions, loop and vectoriser options, and
#: warnings.
_SAVED_FLAG = re.compile(r"""(?:
    -O[0-3sg]? | -g[0-3]? | -w | -pthread | -fopenmp | -fopenmp-simd | -fPIC | -lineinfo | -arch=sm_[0-9]+a?
  | -std=(?:c|gnu)(?:99|11|17)
  | -m(?:arch|tune|cpu)=[a-z0-9][a-z0-9_.-]*
  | -mprefer-vector-width=(?:128|256|512|none)
  | -m(?:no-)?(?:sse[0-9.]*|ssse3|avx[0-9a-z_]*|fma|f16c|bmi2?|popcnt|lzcnt|neon|sve2?)
  | -f(?:no-)?(?:unroll-loops|unroll-all-loops|peel-loops|tree-vectorize|tree-loop-vectorize|tree-slp-vectorize
        |inline-functions|omit-frame-pointer|strict-aliasing|prefetch-loop-arrays|math-errno
        |trapping-math|schedule-insns2?|split-loops|unswitch-loops|ipa-cp-clone|loop-interchange)
  | -ffp-contract=(?:off|on|fast)
  | -f(?:vect|simd)-cost-model=(?:unlimited|dynamic|cheap|very-cheap)
  | -W(?:no-)?[a-z0-9][a-z0-9-]*
)\Z""", re.X)


#: What a target read from a file may name as its compiler: a C or CUDA compiler by name, found on
#: PATH (`gcc-12`, `x86_64-linux-gnu-gcc`, `clang`), never a path to some other program.
_SAVED_COMPILER = re.compile(r"(?:[A-Za-z0-9_]+-)*(?:cc|gcc|clang|icx|nvcc)(?:-[0-9]+(?:\.[0-9]+)*)?\Z")


def saved_command_problem(compiler: str, flags: Sequence[str]) -> Optional[Tuple[str, str]]:
    """Why the compiler or flags of a saved target (read from a file) are refused, as (field,
    message), or None: the compiler must be a compiler's name and every flag an optimisation or
    code-generation option (`_SAVED_FLAG`).  Such files are untrusted, and a compiler flag or path
    can run any program; compilers and flags set in code or in `$POLYC_CC` / `$POLYC_CFLAGS` are
    the user's own and are not limited."""
    if not isinstance(compiler, str) or not _SAVED_COMPILER.match(compiler):
        return "compiler", (f"compiler {compiler!r} is not accepted from a file: a saved target names a C or CUDA "
                            f"compiler on PATH (cc, gcc, gcc-12, clang, nvcc, ...); set any other compiler in "
                            f"code (Target.with_(compiler=...)) or in $POLYC_CC")
    for f in flags:
        if not isinstance(f, str) or not _SAVED_FLAG.match(f):
            return "flags", (f"{f!r} is not accepted from a file; a saved target may carry optimisation and "
                             f"code-generation flags only (-O.., -march=.., -m.., -f.., -W.., -g, -std=..). Set "
                             f"other flags in code (Target.with_(flags=...), pc.compile(..., flags=...)) or in "
                             f"$POLYC_CFLAGS")
    return None
