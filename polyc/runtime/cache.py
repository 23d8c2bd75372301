"""The on-disk cache of compiled kernels: where it lives, what it trusts, how entries are written.

An entry is `kernel-<key>.so` (the library), `kernel-<key>.sha256` (the library's sha256 and the
entry's name, written when it was built) and `kernel-<key>.c` (the source, kept for inspection and
error messages).
The key hashes everything that affects the binary (source, flags, compiler and its version,
and the fingerprint of the `Target` it is built for), so a verified hit is reused without
recompiling.  Every file is written to a private temporary name in the cache directory and moved
into place with `os.replace` (atomic on POSIX): concurrent processes compiling the same kernel
both succeed, and no reader ever sees a half-written file.

A library is code polyc will run, so the cache trusts only what this user wrote:

- the directory is `$POLYC_CACHE_DIR`, else the platform's user cache directory for polyc
  (`platformdirs`, e.g. `~/.cache/polyc`), created with mode 0700.  It is refused when it is
  owned by another user, or other users can write it (group- or world-writable without the sticky
  bit), or it cannot be created or written: polyc then warns (`CacheWarning`) and uses a private
  temporary directory (mode 0700, removed at exit) for the rest of the process;
- an entry is loaded only if its library is a regular file owned by this user, not writable by
  others, its sha256 matches the one recorded for this entry, and the record is signed with this
  account's secret key (HMAC-SHA256; the key lives outside the cache, in the user's config
  directory, readable by this user only).  A cache directory restored from elsewhere (a CI cache
  another job wrote, a copied home directory) cannot forge that signature.  Anything else (a
  truncated or corrupted library, a missing checksum, entries swapped or copied under another key,
  a file planted by someone else) is rebuilt in place, with a warning unless it was simply missing
  or written by an older polyc or under another key (nothing the user needs to do).
"""
from __future__ import annotations

import atexit
import hashlib
import hmac
import os
import re
import shutil
import stat
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import platformdirs

from ..errors import CacheError, CacheWarning
from .forksafe import ForkSafeLock

#: Environment variable naming the cache directory (overrides the platform default).
CACHE_DIR_ENV = "POLYC_CACHE_DIR"
_ENTRY_PREFIX = "kernel-"
_TEMP_PREFIX = ".tmp-"
#: The only names polyc writes in a cache directory (`entry_paths`, `checksum_path`, `temp_path`):
#: what `clear_cache` may remove and `entries` lists.  A user's `kernel-launcher.c` is neither.
_ENTRY_KEY_CHARS = 40      # of the cache key's hex digits, in an entry's name
_ENTRY_NAME = re.compile(re.escape(_ENTRY_PREFIX) + rf"[0-9a-f]{{{_ENTRY_KEY_CHARS}}}\.(?:so|c|sha256)")
_TEMP_NAME = re.compile(re.escape(_TEMP_PREFIX) + r"[a-z0-9_]{8}\.(?:so|o|c|sha256)")     # mkstemp's 8

_fallback: Optional[Path] = None
_fallback_lock = ForkSafeLock()


# -- the directory ----------------------------------------------------------------------------------

def configured_cache_dir() -> Path:
    """The cache directory asked for: `$POLYC_CACHE_DIR`, else the platform's user cache
    directory for polyc (`platformdirs.user_cache_dir`).  Not created, not checked."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        try:    # absolute: a relative `-O0` would reach the compiler's command line as an option
            return Path(explicit).expanduser().absolute()
        except RuntimeError:    # `~nosuchuser/x`
            raise CacheError(f"{CACHE_DIR_ENV}={explicit!r} starts with the home of an unknown user") from None
    return Path(platformdirs.user_cache_dir("polyc", appauthor=False))


def cache_dir() -> Path:
    """The directory compiled kernels are kept in: the configured one when it can be used and
    only this user can write it; otherwise (with a `CacheWarning`) a private temporary one."""
    try:
        path = configured_cache_dir()
    except CacheError as e:
        return fallback_dir(str(e))
    if path.exists() and not path.is_dir():
        return fallback_dir(f"the cache directory {path} is not a directory (a file is there)")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        return fallback_dir(f"the cache directory {path} cannot be created ({e.strerror or e})")
    problem = directory_problem(path)
    if problem is None and not os.access(path, os.W_OK | os.X_OK):
        problem = "is not writable"
    if problem is not None:
        return fallback_dir(f"the cache directory {path} {problem}")
    return path


def directory_problem(path: Path) -> Optional[str]:
    """Why other users could plant files in directory `path` (None when they cannot)."""
    try:
        st = os.stat(path)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"is owned by another user (uid {st.st_uid}), who could replace the libraries polyc loads"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return (f"can be written by other users (mode {stat.S_IMODE(st.st_mode):o}), who could plant libraries "
                f"polyc would load; make it private (chmod 700) or set {CACHE_DIR_ENV}")
    return None


def fallback_dir(reason: str) -> Path:
    """This process's private cache directory (mode 0700, removed at exit), after warning `reason`."""
    global _fallback
    with _fallback_lock:
        if _fallback is None or not _fallback.is_dir():
            try:
                _fallback = Path(tempfile.mkdtemp(prefix="polyc-cache-"))
            except OSError as e:
                raise CacheError(f"{reason}, and no private temporary directory can be made either "
                                 f"({e.strerror or e}); set {CACHE_DIR_ENV} to a directory you own") from e
            atexit.register(shutil.rmtree, str(_fallback), True)
        path = _fallback
    warnings.warn(f"{reason}; compiled kernels go to the private directory {path} for this process "
                  f"(they are not kept)", CacheWarning, stacklevel=3)
    return path


# -- keys and entries ---------------------------------------------------------------------------------

def cache_key(source: str, flags: Sequence[str], compiler_path: str, compiler_version: str,
              target_fingerprint: str = "") -> str:
    """sha256 over the source, the flags, the compiler's path and its version string, and the
    fingerprint of the `Target` the library is built for (`Target.fingerprint()`).

    Fields are length-prefixed so that no two different inputs can produce the same byte stream.
    """
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), compiler_path, compiler_version, target_fingerprint):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def entry_paths(directory: Path, key: str) -> tuple[Path, Path]:
    """(source path, library path) of the cache entry for `key`."""
    stem = f"{_ENTRY_PREFIX}{key[:_ENTRY_KEY_CHARS]}"
    return directory / f"{stem}.c", directory / f"{stem}.so"


def checksum_path(lib_path: Path) -> Path:
    """Where the sha256 of library `lib_path` is recorded."""
    return lib_path.with_suffix(".sha256")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _file_problem(path: Path) -> Optional[str]:
    """Why file `path` is not trusted (None when it is a regular file only this user can write)."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"is owned by another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"can be written by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def entry_problem(lib_path: Path) -> Optional[str]:
    """Why the cached library `lib_path` must not be loaded, or None when it is verified: a regular
    file of this user, not writable by others, whose sha256 is the one recorded when it was built.
    "missing" when there is no library at all (a plain cache miss)."""
    try:
        problem = _file_problem(lib_path)
        if problem:
            return f"{problem}; refused"
        sums = checksum_path(lib_path)
        problem = _file_problem(sums)
        if problem:
            return f"has a checksum file that {problem}; refused"
        with open(sums, "rb") as f:
            recorded = f.read(256).decode("ascii").split()
        actual = file_sha256(lib_path)
    except FileNotFoundError as e:
        return "missing" if Path(e.filename or "") == lib_path else "has no recorded checksum"
    except (OSError, UnicodeDecodeError) as e:
        return f"cannot be read ({e})"
    if not recorded or recorded[0] != actual:
        return "does not match its recorded checksum (truncated or corrupted)"
    if len(recorded) == 1:
        return "has no recorded checksum"   # an entry of an older polyc (no name): rebuilt quietly
    if recorded[1] != lib_path.stem:
        # A library that is sound but was built for another key (entries swapped or copied
        # under other names) would run the wrong kernel: the checksum file names its entry.
        return "was recorded for another cache entry (moved or swapped); refused"
    if len(recorded) != 3 or not hmac.compare_digest(recorded[2], _signature(actual, lib_path.stem)):
        return UNSIGNED    # an older polyc's entry, or one written under another key: rebuilt quietly
    return None


def install_library(built: Path, lib_path: Path) -> None:
    """Move the freshly built library `built` into place as `lib_path`, recording its checksum
    first (both atomically); the library is made private (the linker honours the umask)."""
    os.chmod(built, 0o600)
    digest = file_sha256(built)
    write_atomic(checksum_path(lib_path), f"{digest} {lib_path.stem} {_signature(digest, lib_path.stem)}\n")
    os.replace(built, lib_path)


#: `entry_problem` of an entry that is sound but not signed with this account's key (an older
#: polyc's, or one copied from another account or machine): rebuilt without a warning.
UNSIGNED = "is not signed with this account's cache key"

#: Where this account's cache key lives: outside any cache directory, so that a cache restored
#: or copied from elsewhere cannot bring a key that vouches for its own libraries.
KEY_FILE_ENV = "POLYC_CACHE_KEY_FILE"
_key: Optional[bytes] = None
_key_lock = ForkSafeLock()


def key_file() -> Path:
    explicit = os.environ.get(KEY_FILE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    return Path(platformdirs.user_config_dir("polyc", appauthor=False)) / "cache-key"


def _signature(digest: str, name: str) -> str:
    """HMAC-SHA256 of a library's sha256 and entry name under this account's secret key."""
    return hmac.new(_secret(), f"{digest} {name}".encode("ascii"), hashlib.sha256).hexdigest()


def _secret() -> bytes:
    """This account's cache key: read from `key_file()` when that is a regular file of this user
    that nobody else can read or write, else made (32 random bytes, mode 0600).  Where it can be
    neither read nor made, a key for this process alone (its libraries are rebuilt by the next
    process), with a `CacheWarning`."""
    global _key
    with _key_lock:
        if _key is not None:
            return _key
        path = os.environ.get(KEY_FILE_ENV) or "the default key file"
        try:
            path = key_file()
            _key = _read_key(path) or _make_key(path)
        except (OSError, RuntimeError) as e:     # RuntimeError: `~nosuchuser/...` cannot be expanded
            why = e.strerror if isinstance(e, OSError) and e.strerror else e
            warnings.warn(f"cannot read or create the polyc cache key {path} ({why}); compiled "
                          f"kernels are trusted in this process only", CacheWarning, stacklevel=3)
            _key = os.urandom(32)
        return _key


def _read_key(path: Path) -> Optional[bytes]:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode) or (hasattr(os, "geteuid") and st.st_uid != os.geteuid()) \
            or st.st_mode & 0o077:
        return None     # replaced below: a key others can read or write vouches for nothing
    with open(path, "rb") as f:
        data = f.read(64)
    return data if len(data) == 32 else None


def _make_key(path: Path) -> bytes:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = os.urandom(32)
    fd, tmp = tempfile.mkstemp(prefix=".cache-key-", dir=path.parent)   # mode 0600
    try:
        os.write(fd, key)
    finally:
        os.close(fd)
    try:
        try:
            existing = os.lstat(path)
        except FileNotFoundError:
            existing = None
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            # A link, pipe, device or folder is not ours to replace (POLYC_CACHE_KEY_FILE=/dev/null).
            raise OSError("it exists and is not a regular file")     # no errno: not FileExistsError
        if existing is not None:
            os.replace(tmp, path)   # a regular file that vouched for nothing (see `_read_key`)
            return key
        os.link(tmp, path)          # never over a key another process has just made
    except FileExistsError:
        return _read_key(path) or key
    finally:
        _unlink_quietly(Path(tmp))
    return key


def temp_path(directory: Path, suffix: str) -> Path:
    """A fresh, unique file name inside `directory` (same file system, so `os.replace` is atomic)."""
    fd, name = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=suffix, dir=directory)
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


# -- inspection and cleaning (the `polyc cache` command line builds on these) ------------------------

@dataclass(frozen=True)
class CacheEntry:
    """One compiled kernel in the cache: `key` (the first 40 hex digits of the cache key), its
    library and source paths, the library's size in bytes and modification time (seconds since
    the epoch), and `problem`: None when the entry is verified, else why it would be rebuilt."""

    key: str
    library: Path
    source: Optional[Path]
    size: int
    modified: float
    problem: Optional[str]

    @property
    def verified(self) -> bool:
        return self.problem is None


def cache_entries(directory: Optional[Path] = None) -> List[CacheEntry]:
    """The compiled kernels in `directory` (default: `cache_dir()`), oldest first."""
    directory = cache_dir() if directory is None else directory
    out = []
    for lib in directory.glob(f"{_ENTRY_PREFIX}*.so"):
        if not _ENTRY_NAME.fullmatch(lib.name):
            continue                # not a name polyc writes: the user's own file
        try:
            st = os.lstat(lib)
        except FileNotFoundError:
            continue
        source = lib.with_suffix(".c")
        out.append(CacheEntry(lib.stem[len(_ENTRY_PREFIX):], lib, source if source.exists() else None,
                              st.st_size, st.st_mtime, entry_problem(lib)))
    return sorted(out, key=lambda e: (e.modified, e.key))


def clear_cache(directory: Optional[Path] = None) -> int:
    """Remove every cache file polyc wrote in `directory` (default: `cache_dir()`): entries,
    checksums, sources and leftover temporary files.  Returns how many files were removed; other
    files and the directory itself are left alone.  Libraries already loaded stay usable."""
    directory = cache_dir() if directory is None else directory
    removed = 0
    for path in list(directory.iterdir()):
        if (_ENTRY_NAME.fullmatch(path.name) or _TEMP_NAME.fullmatch(path.name)) and not path.is_dir():
            try:
                path.unlink()
                removed += 1
            except FileNotFoundError:
                pass
    return removed
