"""The `polyc` command line (also `python -m polyc`): look at a kernel without writing Python.

    polyc codegen kernels.py::matmul --schedule "tile(i=32, j=32).parallel('i_outer')"
    polyc codegen matmul.tc --target cuda --dtype f64
    polyc dependences kernels.py::matmul
    polyc outline kernels.py::matmul --schedule auto
    polyc cache info
    polyc cache clear

A kernel file is either Python (`.py`: it is run, and its module-level `pc.kernel` objects are the
kernels; `FILE::NAME` picks one when there are several) or Einstein-notation text (any other
suffix; the kernel is named after the file).  A schedule is `source` (the loops as written, the
default), `auto`, a primitive chain as written in Python after `kernel.schedule()`, or a JSON file
written by `Schedule.to_json()`.  Every primitive is proven legal as usual; an illegal one is
reported with its dependence, like every other polyc error, on stderr with exit status 1.
"""
from __future__ import annotations

import argparse
import ast
import os
import runpy
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .errors import PolycError

#: Exit statuses: 0 success, 1 a polyc error (illegal schedule, parse error...), 2 a usage error.
EXIT_ERROR, EXIT_USAGE = 1, 2


class UsageError(Exception):
    """A command-line mistake (missing file, unknown kernel name, malformed schedule text)."""


# -- kernels from files -----------------------------------------------------------------------

def load_kernels(path: Path, only: Optional[str] = None) -> Dict[str, Any]:
    """The kernels a file defines, by name: module-level `Kernel`s of a Python file, each
    Tensor Comprehensions `def` of a text file (only the one named `only`, when it has one: a
    sibling definition's error is not this kernel's), or else the one Einstein-notation kernel of
    a text file (named after the file's stem)."""
    import polyc as pc
    if path.exists() and not path.is_file():
        raise UsageError(f"the kernel file {path} is not a regular file (a folder, a pipe or a device): "
                         f"polyc reads kernels from files, not from standard input")
    if not path.is_file():
        raise UsageError(f"no such kernel file: {path}")
    if path.suffix == ".py":
        # Run as a script: the file's own folder comes first on sys.path, as for `python file.py`.
        sys.path.insert(0, str(path.parent.resolve()))
        try:
            scope = runpy.run_path(str(path), run_name="__polyc_cli__")
        except PolycError:
            raise  # a kernel the file defines is wrong: reported like every polyc error
        except SystemExit as e:    # exit() in the file: not ours to obey silently
            raise UsageError(f"running {path} failed{_where_in(path, e)}: it called exit({e.code!r})") from None
        except Exception as e:  # noqa: BLE001 - the user's file failed: say where, without our frames
            raise UsageError(f"running {path} failed{_where_in(path, e)}: {type(e).__name__}: {e}") from None
        finally:
            sys.path.pop(0)
        return _kernels_by_name(scope)
    from .frontend.einsum import program_from_einsum
    from .frontend.tc_def import is_tc_definition, program_from_tc, tc_definitions
    text = read_text(path, "kernel file")
    if is_tc_definition(text):      # Tensor Comprehensions' `def`s: each kernel under its own name
        defs = tc_definitions(text, str(path))
        picked = [d for d in defs if d.name == only] or defs    # FILE::NAME builds that one alone
        return {d.name: pc.Kernel(program_from_tc(d, str(path), text)) for d in picked}
    name = path.stem.replace("-", "_") or "kernel"
    # Built as pc.kernel does, but parse errors point into the file rather than into this module.
    return {name: pc.Kernel(program_from_einsum(text, name, {}, filename=str(path)))}


def _kernels_by_name(scope: Dict[str, Any]) -> Dict[str, Any]:
    """Each module-level kernel under its kernel name, or, where two kernels share one
    (`a = pc.kernel(...)` and `b = pc.kernel(...)` are both named `kernel`), under its variable's
    names; each kernel is also found under those (`FILE::b`)."""
    import polyc as pc
    variables: Dict[int, List[str]] = {}
    kernels: Dict[int, Any] = {}
    for var, value in scope.items():
        if isinstance(value, pc.Kernel):
            kernels.setdefault(id(value), value)
            variables.setdefault(id(value), []).append(var)
    named: Dict[str, List[int]] = {}
    for key, k in kernels.items():
        named.setdefault(k.name, []).append(key)
    found: Dict[str, Any] = {}
    for key, k in kernels.items():
        found[k.name if len(named[k.name]) == 1 else variables[key][0]] = k
    for key, k in kernels.items():      # aliases, where no other kernel has the name
        for var in variables[key]:
            found.setdefault(var, k)
    return found


#: The largest kernel or schedule file read (a file past it is refused before it is read whole).
MAX_FILE_CHARS = 16 * 1024 * 1024


def read_text(path: Path, what: str, limit: Optional[int] = None) -> str:
    """The UTF-8 text of file `path`, of at most `limit` characters; a UsageError naming it when it
    cannot be read as such (a directory or a named pipe, which would block, is not read) or is
    longer (than `MAX_FILE_CHARS` by default)."""
    limit = MAX_FILE_CHARS if limit is None else limit
    if path.exists() and not path.is_file():
        raise UsageError(f"the {what} {path} is not a regular file")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(limit + 1)
        if len(text) > limit:
            raise UsageError(f"the {what} {path} is longer than {limit} characters; polyc reads no such file")
        return text
    except UnicodeDecodeError as e:
        raise UsageError(f"the {what} {path} is not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise UsageError(f"cannot read the {what} {path}: {e.strerror or e}") from None


def _where_in(path: Path, error: BaseException) -> str:
    """` at line N` for the innermost frame of `error` inside the file `path` (or nothing)."""
    import traceback
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path]
    return f" at line {frames[-1].lineno}" if frames else ""


def pick_kernel(spec: str) -> Any:
    """`FILE` or `FILE::NAME` -> the kernel (a file with several kernels needs the name)."""
    file_part, _, name = spec.partition("::")
    kernels = load_kernels(Path(file_part), name or None)
    if not kernels:
        raise UsageError(f"{file_part} defines no kernel (no module-level pc.kernel(...) object)")
    distinct = {id(k): n for n, k in reversed(list(kernels.items()))}     # one name each, the first
    listing = ", ".join(sorted(distinct.values()))
    if name:
        if name not in kernels:
            sharing = sorted(n for k, n in distinct.items() if kernels[n].name == name)
            if len(sharing) > 1:
                raise UsageError(f"{file_part} has {len(sharing)} kernels named {name!r} ({', '.join(sharing)}); "
                                 f"pick one by its variable, e.g. {file_part}::{sharing[0]}")
            raise UsageError(f"{file_part} has no kernel {name!r}; it defines {listing}")
        return kernels[name]
    if len(distinct) > 1:
        raise UsageError(f"{file_part} defines several kernels ({listing}); pick one with {file_part}::NAME")
    return next(iter(kernels.values()))


# -- schedules --------------------------------------------------------------------------------

def parse_chain(text: str) -> List[Tuple[str, Tuple[Any, ...], Dict[str, Any]]]:
    """`tile(i=32).parallel('i_outer')` -> [("tile", (), {"i": 32}), ("parallel", ("i_outer",), {})].

    Only primitive calls with literal arguments are accepted (nothing is evaluated); a leading
    `schedule().` or `kernel.schedule().` is ignored, so text copied from `Schedule.to_text` works.
    """
    source = text.strip()
    if source.startswith("."):
        source = source[1:]
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError as e:
        raise UsageError(f"cannot read the schedule {text!r}: {e.msg} (expected primitive calls such as "
                         f"tile(i=32, j=32).parallel('i_outer'))") from None
    except (RecursionError, MemoryError):
        raise UsageError(f"the schedule chain is too long to read ({len(text)} characters); save the "
                         f"schedule to a file with Schedule.to_json and pass that") from None
    calls: List[Tuple[str, Tuple[Any, ...], Dict[str, Any]]] = []
    while True:
        if not isinstance(node, ast.Call):
            raise UsageError(f"cannot read the schedule {text!r}: expected a chain of primitive calls, "
                             f"e.g. tile(i=32, j=32).parallel('i_outer')")
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name is None:
            raise UsageError(f"cannot read the schedule {text!r}: {ast.unparse(func)} is not a primitive name")
        if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
            raise UsageError(f"cannot read the schedule {text!r}: write the arguments of {name}(...) out, "
                             f"without * or **")
        try:
            args = tuple(ast.literal_eval(a) for a in node.args)
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        except ValueError:
            raise UsageError(f"cannot read the schedule {text!r}: arguments of {name}(...) must be "
                             f"literals (numbers, quoted strings, tuples)") from None
        calls.append((name, args, kwargs))
        if isinstance(func, ast.Name):
            break
        node = func.value
        if isinstance(node, ast.Name):  # `kernel.schedule()` or `s.tile(...)`: the receiver
            break
    calls.reverse()
    if calls and calls[0][0] == "schedule" and not calls[0][1] and not calls[0][2]:
        calls = calls[1:]
    return calls


def build_schedule(kernel: Any, spec: Optional[str]) -> Any:
    """None/"source", "auto", "tuned" (the best tuning record, else "auto"), a JSON file of
    `Schedule.to_json`, or a primitive chain."""
    from .schedule import Schedule
    if spec is None or spec == "source":
        return None
    if spec in ("auto", "tuned"):
        return spec
    if spec.endswith(".json") or (os.path.isfile(spec) and not spec.rstrip().endswith(")")):
        path = Path(spec)
        if not path.is_file():
            raise UsageError(f"no such schedule file: {path}")
        return Schedule.from_json(kernel, read_text(path, "schedule file"))
    from .schedule.registry import ALIASES, PRIMITIVES, apply_checked
    s = kernel.schedule()
    for name, args, kwargs in parse_chain(spec):
        if name not in PRIMITIVES and name not in ALIASES:
            raise UsageError(f"{name!r} is not a schedule primitive (they are: {', '.join(PRIMITIVES)})")
        s = apply_checked(s, name, args, kwargs)
    return s


def _dtypes(kernel: Any, spec: Optional[str]) -> Dict[str, Any]:
    """`--dtype f64` (every undeclared tensor) or `--dtype A=f32,B=f64`."""
    from .ir import types as t
    if not spec:
        return {}

    def one(name: str) -> Any:
        if name.strip() not in t.DTYPES:
            raise UsageError(f"unknown dtype {name!r}; use one of {', '.join(t.DTYPES)}")
        return t.DTYPES[name.strip()]

    if "=" not in spec:
        d = one(spec)
        return {x.name: d for x in kernel.program.tensors if x.dtype is None}  # declared types stay
    tensors = {x.name: x for x in kernel.program.tensors}
    out = {}
    for part in spec.split(","):
        name, _, dt = part.partition("=")
        name, d = name.strip(), one(dt)
        if name not in tensors:
            raise UsageError(f"--dtype names {name!r}, which is not a tensor of kernel {kernel.name} "
                             f"(tensors: {', '.join(tensors)})")
        if tensors[name].dtype not in (None, d):
            raise UsageError(f"--dtype gives {name} as {d.name}, but kernel {kernel.name} declares it "
                             f"{tensors[name].dtype.name}")
        if name in out and out[name] != d:
            raise UsageError(f"--dtype gives {name} twice, as {out[name].name} and as {d.name}")
        out[name] = d
    return out


# -- commands ---------------------------------------------------------------------------------

def read_target(spec: str) -> Any:
    """The `pc.Target` of `--target`: "c", "cuda", "cuda-emu", a description such as
    "c l2=256K vector_bytes=32 cores=8" or "cuda:sm_80", or a JSON file written by `Target.to_json()`."""
    from .target import Target
    if spec.endswith(".json"):
        return Target.from_json(read_text(Path(spec), "target file", limit=1 << 17))
    return Target.resolve(spec)


def cmd_codegen(args: argparse.Namespace) -> str:
    import polyc as pc
    kernel = pick_kernel(args.kernel)
    return pc.codegen(kernel, build_schedule(kernel, args.schedule), target=read_target(args.target),
                      dtypes=_dtypes(kernel, args.dtype))


def cmd_dependences(args: argparse.Namespace) -> str:
    kernel = pick_kernel(args.kernel)
    text = str(kernel.dependences())
    return text if text.strip() else f"{kernel.name}: no dependences"


def cmd_outline(args: argparse.Namespace) -> str:
    """The schedule `codegen` prints for the same arguments (on a CUDA target: its block and
    thread mapping)."""
    from .api import _resolve_schedule
    kernel = pick_kernel(args.kernel)
    return str(_resolve_schedule(kernel, build_schedule(kernel, args.schedule), read_target(args.target)))


def cmd_cache(args: argparse.Namespace) -> str:
    if args.action == "info":
        return cache_info_text()
    return cache_clear_text()


# -- the cache ----------------------------------------------------------------------------------
# `polyc.runtime.cache` owns the cache: where it lives, which files are entries, how they are
# verified and removed.  These commands only print what it reports.

def _size_text(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{int(n)} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"  # pragma: no cover


def _usable_cache_dir() -> Path:
    """The configured cache directory, or a UsageError saying why polyc does not use it (a
    process would fall back to a private temporary directory, which these commands must not
    report on as if it were the cache)."""
    import warnings
    from .runtime.cache import cache_dir, configured_cache_dir
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        directory = cache_dir()
    if directory != configured_cache_dir():
        reason = str(caught[-1].message).split("; compiled kernels go to")[0] if caught else "it cannot be used"
        raise UsageError(f"{reason}; polyc keeps no cache there (each process compiles into a private temporary "
                         f"directory)")
    return directory


def cache_info_text() -> str:
    from .runtime.cache import cache_entries
    directory = _usable_cache_dir()
    entries = cache_entries(directory)
    where = "POLYC_CACHE_DIR" if os.environ.get("POLYC_CACHE_DIR") else "the platform's cache directory"
    total = sum(e.size + (e.source.stat().st_size if e.source else 0) for e in entries)
    damaged = sum(1 for e in entries if not e.verified)
    return (f"cache directory: {directory} (from {where})\n"
            f"compiled kernels: {len(entries)}" + (f" ({damaged} unverified, rebuilt on next use)" if damaged else "")
            + f"\nsize: {_size_text(total)}")


def cache_clear_text() -> str:
    from .runtime.cache import clear_cache
    directory = _usable_cache_dir()
    removed = clear_cache(directory)
    return f"removed {removed} files from {directory}"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="polyc", description=__doc__.split("\n\n")[0],
                                 epilog="Kernel files: FILE.py (module-level pc.kernel objects; FILE.py::NAME "
                                        "picks one) or, in any other file, Einstein-notation text or "
                                        "Tensor Comprehensions defs (FILE.tc::NAME picks one).")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def kernel_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("kernel", metavar="FILE[::NAME]", help="kernel file, optionally ::kernel name")

    def schedule_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("-s", "--schedule", default=None,
                       help="source (default), auto, tuned, a primitive chain such as \"tile(i=32).parallel('i_outer')\", "
                            "or a JSON file from Schedule.to_json()")

    def target_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("-t", "--target", default="c",
                       help="c (default: this machine), cuda, cuda-emu, a description such as "
                            "\"c l2=256K vector_bytes=32 cores=8\" or cuda:sm_80, or a Target JSON file; "
                            "schedule 'auto' is chosen for that machine")

    p = sub.add_parser("codegen", help="print the generated C or CUDA of a kernel")
    kernel_arg(p)
    schedule_arg(p)
    target_arg(p)
    p.add_argument("--dtype", default=None,
                   help="element type of undeclared tensors: f32 (default), f64, ... or A=f32,B=f64")
    p.set_defaults(run=cmd_codegen)

    p = sub.add_parser("dependences", aliases=["deps"], help="print a kernel's exact dependences")
    kernel_arg(p)
    p.set_defaults(run=cmd_dependences)

    p = sub.add_parser("outline", help="print a schedule's loop outline")
    kernel_arg(p)
    schedule_arg(p)
    target_arg(p)
    p.set_defaults(run=cmd_outline)

    p = sub.add_parser("cache", help="inspect or clear the cache of compiled kernels")
    p.add_argument("action", choices=("info", "clear"))
    p.set_defaults(run=cmd_cache)
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 polyc error, 2 usage error)."""
    import warnings
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            try:
                out = args.run(args)
            finally:     # polyc's warnings as lines of the command's own, not Python's `file:line:` form
                for w in caught:
                    print(f"polyc {args.command}: warning: {w.category.__name__}: {w.message}", file=sys.stderr)
    except UsageError as e:
        print(f"polyc {args.command}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except PolycError as e:
        print(f"polyc {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_ERROR
    try:
        print(out.rstrip("\n"))
        sys.stdout.flush()
    except BrokenPipeError:  # `polyc codegen ... | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":  # pragma: no cover - `python -m polyc` goes through polyc/__main__.py
    sys.exit(main())
