"""Checking C compiler flags that polyc did not choose (`flags=`, `$POLYC_CFLAGS`, a Target's flags).

Flags are untrusted input: a string is split like a shell would, anything that is not a string is
refused, and flags that would change where or what the compiler writes are refused, because the
compiled-library cache relies on each library landing at its own path.  A leaf module (it needs
only `polyc.errors`), so `polyc.target` and `polyc.runtime.compiler` can both use it.
"""
from __future__ import annotations

import shlex
from typing import Optional, Tuple

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
