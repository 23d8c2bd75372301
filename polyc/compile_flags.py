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
#: `-fplugin=`, `-B`, `-specs=`, `-Wl,...`, `-l`), read other sources into the kernel (`-I`,
#: `-include`, `-D` macros that rename what the generated code calls) or write files
#: (`-fprofile-generate`, `-fdump-...`).
_SAVED_FLAG = re.compile(r"""(?:
    -O[0-3sgz]? | -Ofast | -g[0-3]? | -w | -pthread | -fopenmp | -fPIC
  | -std=[A-Za-z0-9+]+
  | -m[a-z0-9][a-z0-9_.=-]*
  | -f(?!plugin|profile|dump|auto-profile|stack-usage|callgraph|opt-info|save-optimization|debug-prefix
        |file-prefix|macro-prefix|instrument|sanitize|coverage|test-coverage|branch-probabilities|lto
        |create-profile|use-ld|exec-charset|input-charset|wide-exec-charset|record)
      [a-z0-9][a-z0-9_.-]*(?:=[A-Za-z0-9_.,+-]*)?
  | -W(?![lap],)[a-z0-9][a-z0-9_=-]*
  | -arch=[a-z0-9_]+ | --use_fast_math | -lineinfo
)\Z""", re.X)


def check_saved_flags(flags: Sequence[str], origin: str) -> None:
    """Refuse any flag of a saved target (read from a file) that is not an optimisation or
    code-generation option (`_SAVED_FLAG`): such files are untrusted, and a compiler flag can run
    any program.  Flags set in code or in `$POLYC_CFLAGS` are the user's own and are not limited."""
    for f in flags:
        if not isinstance(f, str) or not _SAVED_FLAG.match(f):
            raise CompileFlagsError(
                f"{origin}: {f!r} is not accepted from a file; a saved target may carry optimisation and "
                f"code-generation flags only (-O.., -march=.., -m.., -f.., -W.., -g, -std=..). Set other "
                f"flags in code (Target.with_(flags=...), pc.compile(..., flags=...)) or in $POLYC_CFLAGS")
