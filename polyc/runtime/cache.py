"""The on-disk cache of compiled kernels: where it lives, how entries are keyed, atomic writes.

An entry is `<key>.so` plus `<key>.c` (the source, kept for inspection and for error messages).
The key hashes everything that affects the binary, so a hit can be reused without recompiling.
Every file is written to a private temporary name in the cache directory and then moved into
place with `os.replace`, which is atomic on POSIX: concurrent processes compiling the same kernel
both succeed, and no reader ever sees a half-written library.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Sequence


def cache_dir() -> Path:
    """The cache directory: `$POLYC_CACHE_DIR`, else `$XDG_CACHE_HOME/polyc`, else `~/.cache/polyc`.

    Created on first use.
    """
    explicit = os.environ.get("POLYC_CACHE_DIR")
    if explicit:
        path = Path(explicit).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "polyc"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_key(source: str, flags: Sequence[str], compiler_path: str, compiler_version: str) -> str:
    """sha256 over the source, the flags, the compiler's path and its version string.

    Fields are length-prefixed so that no two different inputs can produce the same byte stream.
    """
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), compiler_path, compiler_version):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def entry_paths(directory: Path, key: str) -> tuple[Path, Path]:
    """(source path, library path) of the cache entry for `key`."""
    stem = f"kernel-{key[:40]}"
    return directory / f"{stem}.c", directory / f"{stem}.so"


def temp_path(directory: Path, suffix: str) -> Path:
    """A fresh, unique file name inside `directory` (same file system, so `os.replace` is atomic)."""
    fd, name = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=directory)
    os.close(fd)
    return Path(name)


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see either the old file or the complete new one."""
    tmp = temp_path(path.parent, path.suffix)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
