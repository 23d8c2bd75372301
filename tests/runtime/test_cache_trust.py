"""The compiled-kernel cache trusts only what this user wrote and can verify: corrupted or
truncated libraries are rebuilt (never loaded), unusable or shared directories are replaced by a
private one with a warning, planted entries are refused, and compile flags are checked."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import polyc as pc
from polyc.errors import CacheWarning, CompileFlagsError, PolycError
from polyc.runtime import cache
from polyc.runtime import compiler as compiler_module
from polyc.runtime.compiler import compile_c, normalise_flags

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = "#include <stdint.h>\nvoid twice(double *restrict y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] *= 2; }\n"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("POLYC_CACHE_DIR", str(directory))
    monkeypatch.delenv("POLYC_CFLAGS", raising=False)
    compiler_module._memo.clear()
    return directory


def fresh_process_view():
    """Forget this process's memo, as the next process would start."""
    compiler_module._memo.clear()


# -- checksums --------------------------------------------------------------------------------------

def test_entries_record_a_checksum_and_are_private(private_cache):
    lib = compile_c(SOURCE)
    digest, name, signature = cache.checksum_path(lib).read_text().split()
    assert (digest, name) == (cache.file_sha256(lib), lib.stem) and len(signature) == 64
    assert stat.S_IMODE(lib.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE(private_cache.stat().st_mode) == 0o700
    [entry] = cache.cache_entries()
    assert entry.library == lib and entry.verified and entry.source == lib.with_suffix(".c")


@pytest.mark.parametrize("damage", ["truncate to a few bytes", "truncate to half", "flip bytes", "no checksum"])
def test_a_damaged_entry_is_rebuilt_not_loaded(damage):
    lib = compile_c(SOURCE)
    data = lib.read_bytes()
    if damage == "truncate to a few bytes":
        lib.write_bytes(data[:8])
    elif damage == "truncate to half":
        lib.write_bytes(data[:len(data) // 2])
    elif damage == "flip bytes":
        middle = len(data) // 2
        lib.write_bytes(data[:middle] + bytes(b ^ 0xFF for b in data[middle:middle + 256]) + data[middle + 256:])
    else:
        cache.checksum_path(lib).unlink()
    assert cache.entry_problem(lib) is not None
    fresh_process_view()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = compile_c(SOURCE)
    assert again == lib and lib.read_bytes() == data and cache.entry_problem(lib) is None
    warned = [w for w in caught if issubclass(w.category, CacheWarning)]
    assert bool(warned) == (damage != "no checksum")  # a missing checksum is an old entry, not damage


def test_an_entry_of_an_older_polyc_is_rebuilt_quietly(private_cache):
    """Its checksum file holds the sha256 alone (no entry name): rebuilt, as a missing checksum
    is, without a warning for every entry of an upgraded cache."""
    lib = compile_c(SOURCE)
    cache.checksum_path(lib).write_text(cache.file_sha256(lib) + "\n")
    assert cache.entry_problem(lib) == "has no recorded checksum"
    fresh_process_view()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert compile_c(SOURCE) == lib
    assert cache.entry_problem(lib) is None


_FORGED = textwrap.dedent("""\
    import numpy as np, polyc as pc
    print(pc.compile(pc.kernel("B[i] = A[i] * 2.0", name="f"))(A=np.arange(3.0)).tolist())
""")


def test_a_forged_entry_is_rebuilt_not_run(private_cache, tmp_path):
    """Someone who can write the cache directory (a CI cache restored from another job, a copied
    home) replaces a library and writes the checksum file the old format asked for: its sha256
    and entry name.  Without this account's key the record is not signed, and the next process
    rebuilds the entry instead of running the planted library."""
    env = dict(os.environ, POLYC_CACHE_DIR=str(private_cache), PYTHONPATH=str(REPO_ROOT),
               POLYC_CACHE_KEY_FILE=str(tmp_path / "config" / "cache-key"))
    run = lambda: subprocess.run([sys.executable, "-c", _FORGED], env=env, capture_output=True, text=True,
                                 timeout=300)
    assert run().stdout.strip() == "[0.0, 2.0, 4.0]"
    assert stat.S_IMODE((tmp_path / "config" / "cache-key").stat().st_mode) == 0o600
    [lib] = private_cache.glob("kernel-*.so")
    planted = compile_c("int pc_planted(void) { return 42; }")   # any other library of this user
    os.replace(planted, lib)
    cache.checksum_path(lib).write_text(f"{cache.file_sha256(lib)} {lib.stem} {'0' * 64}\n")
    again = run()
    assert again.returncode == 0 and again.stdout.strip() == "[0.0, 2.0, 4.0]", again.stderr
    assert "pc_planted" not in lib.read_bytes().decode("latin-1")


def test_a_key_others_can_read_is_replaced(private_cache, tmp_path, monkeypatch):
    key = tmp_path / "cache-key"
    key.write_bytes(b"k" * 32)
    key.chmod(0o644)
    monkeypatch.setenv(cache.KEY_FILE_ENV, str(key))
    monkeypatch.setattr(cache, "_key", None)
    secret = cache._secret()
    assert secret != b"k" * 32 and key.read_bytes() == secret and stat.S_IMODE(key.stat().st_mode) == 0o600


_SWAPPED = textwrap.dedent("""\
    import warnings, numpy as np, polyc as pc
    warnings.simplefilter("always")
    a = np.arange(4.0)
    assert pc.compile(pc.kernel("B[i] = A[i] * 2.0", name="f"))(A=a).tolist() == [0.0, 2.0, 4.0, 6.0]
    assert pc.compile(pc.kernel("B[i] = A[i] + 1.0", name="f"))(A=a).tolist() == [1.0, 2.0, 3.0, 4.0]
    print("ok")
""")


def test_swapped_entries_are_rebuilt_not_run_as_each_other(private_cache):
    """Two sound libraries, each filed (with its checksum file) under the other's key, would run
    the wrong kernel in the next process: the checksum file names its entry, so both are refused
    and rebuilt."""
    env = dict(os.environ, POLYC_CACHE_DIR=str(private_cache), PYTHONPATH=str(REPO_ROOT))
    run = lambda: subprocess.run([sys.executable, "-c", _SWAPPED], env=env, capture_output=True, text=True,
                                 timeout=300)
    first_run = run()
    assert first_run.returncode == 0, first_run.stderr
    first, second = sorted(private_cache.glob("kernel-*.so"))
    for suffix in (".so", ".sha256"):
        x, y = first.with_suffix(suffix), second.with_suffix(suffix)
        parked = x.with_name("parked" + suffix)
        os.replace(x, parked)
        os.replace(y, x)
        os.replace(parked, y)
    assert "another cache entry" in cache.entry_problem(first)
    again = run()
    assert again.returncode == 0 and again.stdout.strip() == "ok", again.stderr
    assert again.stderr.count("another cache entry") == 2, again.stderr


_NEXT_PROCESS = textwrap.dedent("""\
    import warnings, numpy as np, polyc as pc
    warnings.simplefilter("always")
    for k, name in enumerate(["A", "B", "C"]):
        kern = pc.kernel(f"Y[i] = X[i] * {k + 2}.0", name=f"scale{name}")
        x = np.arange(7.0)
        assert np.array_equal(kern.compile()(X=x) if hasattr(kern, "compile") else pc.compile(kern)(X=x), x * (k + 2))
    print("ok")
""")


def test_the_next_process_rebuilds_corrupted_libraries_and_gets_the_right_answer(private_cache):
    """Three damaged entries: truncated to 10 bytes, code bytes overwritten (which used to crash
    the loading process), and an unloadable file whose checksum was updated to match it."""
    env = dict(os.environ, POLYC_CACHE_DIR=str(private_cache), PYTHONPATH=str(REPO_ROOT))
    first = subprocess.run([sys.executable, "-c", _NEXT_PROCESS], env=env, capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr
    libs = sorted(private_cache.glob("kernel-*.so"))
    assert len(libs) == 3
    by_name = {}
    for lib in libs:
        source = lib.with_suffix(".c").read_text()
        by_name[next(n for n in "ABC" if f"scale{n}" in source)] = lib
    a, b, c = by_name["A"], by_name["B"], by_name["C"]
    a.write_bytes(a.read_bytes()[:10])
    data = bytearray(b.read_bytes())
    data[0x1000:0x1400] = b"\xff" * 0x400          # the code: SIGILL/SIGSEGV if it were loaded
    b.write_bytes(bytes(data))
    c.write_bytes(b"\x7fELF not really a library")
    digest = cache.file_sha256(c)     # signed as this account's polyc would: it passes the checks
    cache.checksum_path(c).write_text(f"{digest} {c.stem} {cache._signature(digest, c.stem)}\n")
    second = subprocess.run([sys.executable, "-c", _NEXT_PROCESS], env=env, capture_output=True, text=True,
                            timeout=300)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "ok"
    assert second.stderr.count("does not match its recorded checksum") == 2, second.stderr
    assert "could not load" in second.stderr and "rebuilding it" in second.stderr
    assert all(e.verified for e in cache.cache_entries(private_cache))


# -- the directory ------------------------------------------------------------------------------------

def compile_warning(match: str) -> Path:
    with pytest.warns(CacheWarning, match=match):
        lib = compile_c(SOURCE)
    return lib


def assert_private_fallback(lib: Path, refused: Path) -> None:
    assert lib.parent != refused and lib.exists()
    assert stat.S_IMODE(lib.parent.stat().st_mode) == 0o700
    assert cache.entry_problem(lib) is None


def test_world_writable_directory_is_refused(private_cache):
    private_cache.mkdir()
    private_cache.chmod(0o777)
    lib = compile_warning("can be written by other users")
    assert_private_fallback(lib, private_cache)
    assert not list(private_cache.iterdir())


def test_group_writable_directory_is_refused_but_a_sticky_one_is_not(private_cache):
    private_cache.mkdir()
    private_cache.chmod(0o770)
    assert "other users" in cache.directory_problem(private_cache)
    private_cache.chmod(0o1777)
    assert cache.directory_problem(private_cache) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert compile_c(SOURCE).parent == private_cache


def test_unusable_directory_falls_back(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("POLYC_CACHE_DIR", str(blocker / "cache"))
    lib = compile_warning("cannot be created")
    assert_private_fallback(lib, blocker)


_READ_ONLY = textwrap.dedent("""\
    import os, stat, sys, warnings, numpy as np, polyc as pc
    import polyc.runtime.ckernel, polyc.codegen.c, polyc.schedule.auto, polyc.frontend.tokens  # before dropping privileges
    from polyc.errors import CacheWarning
    from polyc.runtime import cache
    if len(sys.argv) > 1:  # the interpreter's own files may be unreadable to that user: import first
        os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k = pc.kernel("Y[i] = X[i] + 1.0", name="plus_one")
        assert np.array_equal(pc.compile(k)(X=np.arange(4.0)), np.arange(4.0) + 1)
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert any("is not writable" in m for m in messages), messages
    assert stat.S_IMODE(os.stat(cache.cache_dir()).st_mode) == 0o700 and cache.cache_dir() != os.environ["POLYC_CACHE_DIR"]
    print("ok")
""")


def test_read_only_directory_falls_back_to_a_private_one_with_a_warning():
    """Run by a user for whom the directory is read-only (as root, permission bits do not bind, so
    the check runs as user nobody in a child process)."""
    base = Path(tempfile.mkdtemp(prefix="polyc-ro-"))
    try:
        base.chmod(0o755)
        directory = base / "cache"
        directory.mkdir(mode=0o500)
        args = []
        if os.geteuid() == 0:
            os.chown(directory, 65534, 65534)
            args = ["65534"]
        env = dict(os.environ, POLYC_CACHE_DIR=str(directory), PYTHONPATH=str(REPO_ROOT),
                   PYTHONDONTWRITEBYTECODE="1")
        out = subprocess.run([sys.executable, "-c", _READ_ONLY, *args], env=env, capture_output=True, text=True,
                             timeout=300, cwd=str(base))
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "ok"
        assert not list(directory.iterdir())
    finally:
        directory.chmod(0o700)
        subprocess.run(["rm", "-rf", str(base)], check=False)


def test_directory_owned_by_another_user_is_refused(private_cache):
    private_cache.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(private_cache, 65534, 65534)
        assert "owned by another user" in cache.directory_problem(private_cache)
        assert_private_fallback(compile_warning("owned by another user"), private_cache)
    else:  # only root can give a directory away; a root-owned one stands in for it
        assert "owned by another user" in cache.directory_problem(Path("/"))


def test_planted_entries_are_refused_and_rebuilt(private_cache):
    lib = compile_c(SOURCE)
    good = lib.read_bytes()
    lib.chmod(0o666)
    fresh_process_view()
    assert compile_warning(r"can be written by other users \(mode 666\); refused") == lib
    assert lib.read_bytes() == good and stat.S_IMODE(lib.stat().st_mode) == 0o600
    if os.geteuid() == 0:
        os.chown(lib, 65534, 65534)
        fresh_process_view()
        compile_warning("owned by another user")
        assert lib.stat().st_uid == 0


def test_default_directory_follows_the_platform(monkeypatch, tmp_path):
    monkeypatch.delenv("POLYC_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.configured_cache_dir() == tmp_path / "xdg" / "polyc"


def test_entries_can_be_listed_and_cleared(private_cache):
    compile_c(SOURCE)
    compile_c(SOURCE, openmp=False)
    (private_cache / ".tmp-leftover.so").write_bytes(b"")
    (private_cache / "notes.txt").write_text("mine")
    assert len(cache.cache_entries()) == 2
    assert cache.clear_cache() == 7
    assert sorted(p.name for p in private_cache.iterdir()) == ["notes.txt"]
    assert cache.cache_entries() == []


# -- flags ----------------------------------------------------------------------------------------------

def test_flags_as_a_string_are_split_like_a_shell():
    assert normalise_flags("-O2  -g -DNAME='a b'") == ("-O2", "-g", "-DNAME=a b")
    assert normalise_flags(["-O1"]) == ("-O1",)
    k = pc.kernel("Y[i] = X[i] * 3.0", name="triple")
    f = pc.compile(k, flags="-O1")
    assert f.compile_flags[0] == "-O1" and "-O" not in f.compile_flags
    np.testing.assert_array_equal(f(X=np.arange(3.0)), np.arange(3.0) * 3)


@pytest.mark.parametrize("flags", [42, b"-O2", {"-O2"}, ["-O2", 3], "-O2 'unclosed", ["-o", "x.so"], "-o/tmp/x.so",
                                   "--output=x", "-c", "-E", "-S", "-save-temps", "-MD", "-MF deps",
                                   "-Wl,-o,/tmp/x.so", "-Xlinker --output=/tmp/x", "@flags.txt", [""]])
def test_bad_flags_are_refused(flags):
    k = pc.kernel("Y[i] = X[i] * 3.0", name="triple")
    with pytest.raises(CompileFlagsError):
        pc.compile(k, flags=flags)
    with pytest.raises(PolycError):
        compile_c(SOURCE, flags=flags)


def test_cflags_environment_variable_is_checked_too(monkeypatch):
    monkeypatch.setenv("POLYC_CFLAGS", "-O2 -o /tmp/elsewhere.so")
    with pytest.raises(CompileFlagsError, match=r"\$POLYC_CFLAGS"):
        compile_c(SOURCE)


def test_a_directory_that_passes_the_checks_but_rejects_writes_falls_back(private_cache, monkeypatch):
    """E.g. a full disk or a read-only mount (which even root cannot write): the files cannot be
    created, so the library is built in the private directory instead of failing with OSError."""
    import errno
    real_temp_path = cache.temp_path

    def read_only_here(directory, suffix):
        if Path(directory) == private_cache:
            raise OSError(errno.EROFS, "Read-only file system")
        return real_temp_path(directory, suffix)

    monkeypatch.setattr(cache, "temp_path", read_only_here)
    lib = compile_warning("cannot write to the cache directory .*Read-only file system")
    assert_private_fallback(lib, private_cache)


def test_a_full_cache_file_system_falls_back_to_a_private_directory(private_cache, tmp_path, monkeypatch):
    """The linker, not Python, finds the cache's disk full: the build falls back, as a failed
    Python write does, instead of blaming the generated code."""
    import shutil
    real = shutil.which("cc") or shutil.which("gcc")
    fake = tmp_path / "full-disk-cc"
    fake.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        for a in "$@"; do
          case "$a" in {private_cache}/*.so) echo "ld: final link failed: No space left on device" >&2; exit 1;; esac
        done
        exec {real} "$@"
    """))
    fake.chmod(0o755)
    monkeypatch.setenv("POLYC_CC", str(fake))
    monkeypatch.setattr(cache, "_fallback", None)
    with pytest.warns(CacheWarning, match="No space left on device"):
        lib = compile_c(SOURCE)
    assert lib.exists() and private_cache not in lib.parents


def test_a_cache_directory_in_an_unknown_users_home_falls_back(monkeypatch):
    monkeypatch.setenv("POLYC_CACHE_DIR", "~nosuchuser-polyc/x")
    monkeypatch.setattr(cache, "_fallback", None)
    with pytest.warns(CacheWarning, match="unknown user"):
        directory = cache.cache_dir()
    assert directory.is_dir() and "nosuchuser" not in str(directory)


def test_clear_removes_only_names_polyc_writes(private_cache):
    compile_c(SOURCE)
    mine = ["kernel-launcher.c", "kernel-notes.sha256", "kernel-plugin.so", ".tmp-important-draft.txt"]
    for name in mine:
        (private_cache / name).write_text("the user's own\n")
    assert len(cache.cache_entries()) == 1            # the user's kernel-plugin.so is no entry
    assert cache.clear_cache() == 3                   # the entry's .c, .so and .sha256
    assert sorted(p.name for p in private_cache.iterdir()) == sorted(mine)


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_a_key_file_that_is_no_regular_file_is_left_alone(private_cache, tmp_path, monkeypatch, kind):
    key = tmp_path / "key"
    target = tmp_path / "dotfile"
    target.write_text("user data\n")
    if kind == "fifo":
        os.mkfifo(key)
    elif kind == "symlink":
        key.symlink_to(target)
    else:
        key.mkdir()
    monkeypatch.setenv(cache.KEY_FILE_ENV, str(key))
    monkeypatch.setattr(cache, "_key", None)
    with pytest.warns(CacheWarning, match="not a regular file"):
        secret = cache._secret()
    assert len(secret) == 32
    assert (stat.S_ISFIFO if kind == "fifo" else stat.S_ISLNK if kind == "symlink" else stat.S_ISDIR)(
        os.lstat(key).st_mode)
    assert target.read_text() == "user data\n"


def test_a_key_file_in_an_unknown_users_home_is_a_warning(private_cache, monkeypatch):
    monkeypatch.setenv(cache.KEY_FILE_ENV, "~no_such_user_polyc_test/key")
    monkeypatch.setattr(cache, "_key", None)
    with pytest.warns(CacheWarning, match="no_such_user_polyc_test"):
        assert len(cache._secret()) == 32


def test_a_relative_cache_directory_named_like_an_option_still_compiles(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POLYC_CACHE_DIR", "-O0")
    compiler_module._memo.clear()
    assert cache.configured_cache_dir() == tmp_path / "-O0"
    f = pc.compile(pc.kernel("B[i] = A[i] * 2.0", name="dash_dir"))
    assert f(A=np.arange(3.0)).tolist() == [0.0, 2.0, 4.0]


def test_a_compiler_that_succeeds_without_a_library_is_a_compile_error(private_cache, monkeypatch):
    monkeypatch.setenv("POLYC_CC", "/bin/true")
    compiler_module._memo.clear()
    with pytest.raises(pc.CompileError, match="reported success but wrote no library"):
        compile_c(SOURCE)
    assert cache.cache_entries() == []


def test_a_cache_directory_that_is_a_file_says_so(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("POLYC_CACHE_DIR", str(blocker))
    lib = compile_warning("is not a directory")
    assert_private_fallback(lib, blocker)


def test_no_compiler_on_the_path_is_said_as_such(monkeypatch, tmp_path):
    from polyc.runtime.compiler import resolve_compiler
    monkeypatch.delenv("POLYC_CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pc.CompileError, match="no C compiler found"):
        resolve_compiler("cc")           # the host target's default, not something the user asked for
