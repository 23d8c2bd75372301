"""Load a compiled kernel with ctypes and expose it as a Python callable.

Libraries are memoised per process by path: a cache entry's path is determined by its content
hash, so a path seen before always names the same code and need not be dlopen'ed again.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union

import numpy as np

from ..errors import CacheWarning, CompileError
from ..ir import DType
from ..codegen.signature import KernelParam, KernelSignature
from .forksafe import ForkSafeLock

_SCALAR_CTYPES: Dict[str, Any] = {
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
    "i32": ctypes.c_int32,
    "i64": ctypes.c_int64,
    "u8": ctypes.c_uint8,
    "u16": ctypes.c_uint16,
}

_libraries: Dict[str, ctypes.CDLL] = {}
_libraries_lock = ForkSafeLock()

#: OpenMP environment polyc sets before the first kernel library (and so libgomp) loads, unless
#: the user set any of `OMP_WAIT_POLICY_OVERRIDES`.  libgomp's default lets idle threads spin for
#: a while after each parallel region: on a loaded or oversubscribed machine every region then
#: costs milliseconds and the spinning pool steals a core from the next computation (issue #16).
#: A short spin (10,000 iterations, microseconds) instead of libgomp's 300,000 keeps back-to-back
#: regions of one call as fast as the default on an idle machine (matmul 512^3: 1.69 ms vs 1.64 ms;
#: passive sleeping, 3.5 ms, wakes threads too slowly) and is 16x faster than the default on an
#: oversubscribed one (mvt MEDIUM: 0.72 ms vs 11.8 ms; passive 0.23 ms).
OMP_WAIT_DEFAULTS: Dict[str, str] = {"GOMP_SPINCOUNT": "10000"}

#: Variables by which the user states a wait policy of their own; any one set leaves all alone.
OMP_WAIT_POLICY_OVERRIDES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def default_openmp_environment(environ=os.environ) -> Dict[str, str]:
    """Set `OMP_WAIT_DEFAULTS` in `environ` where the user set none of `OMP_WAIT_POLICY_OVERRIDES`;
    returns what was set.  libgomp reads its environment once, when it is loaded, so this must run
    before the first OpenMP library is dlopen'ed (`load_library` calls it); afterwards it is moot."""
    if any(name in environ for name in OMP_WAIT_POLICY_OVERRIDES):
        return {}
    for name, value in OMP_WAIT_DEFAULTS.items():
        environ[name] = value
    return dict(OMP_WAIT_DEFAULTS)


_OPENMP_RUNTIME: Any = None


def _openmp_runtime() -> Any:
    """The OpenMP runtime the kernels use (libgomp), or None where it cannot be loaded."""
    global _OPENMP_RUNTIME
    if _OPENMP_RUNTIME is None:
        default_openmp_environment()
        try:   # gcc's runtime, already loaded by the kernels: dlopen returns the same instance
            _OPENMP_RUNTIME = ctypes.CDLL("libgomp.so.1")
        except OSError:
            _OPENMP_RUNTIME = False
    return _OPENMP_RUNTIME or None


@contextlib.contextmanager
def openmp_team(threads: int) -> Iterator[None]:
    """Within the block, parallel regions started by the calling thread use `threads` threads
    (OpenMP's per-thread `nthreads` setting, restored after).  Threads of Python that run kernels
    side by side use `openmp_team(1)`: each is its own serial team, no pool is oversubscribed.
    Where the runtime cannot be loaded the block runs with the default team (correct, slower)."""
    rt = _openmp_runtime()
    if rt is None:
        yield
        return
    before = rt.omp_get_max_threads()
    rt.omp_set_num_threads(threads)
    try:
        yield
    finally:
        rt.omp_set_num_threads(before)


def scalar_ctype(dtype: DType) -> Any:
    """The ctypes type of a scalar parameter of element type `dtype`."""
    try:
        return _SCALAR_CTYPES[dtype.name]
    except KeyError:
        raise ValueError(f"no ctypes type for element type {dtype!r}") from None


def param_ctype(param: KernelParam) -> Any:
    """ctypes argtype for a parameter: a data pointer for arrays, int64 for sizes, else by dtype."""
    if param.kind == "array":
        return ctypes.c_void_p
    if param.kind == "size":
        return ctypes.c_int64
    return scalar_ctype(param.dtype)


def load_library(lib_path: Union[str, Path]) -> ctypes.CDLL:
    """dlopen `lib_path` once per process (later calls return the same handle)."""
    key = str(Path(lib_path).resolve())
    with _libraries_lock:
        lib = _libraries.get(key)
        if lib is None:
            if not _libraries:
                default_openmp_environment()
            try:
                lib = ctypes.CDLL(key)
            except OSError as e:
                raise CompileError(f"could not load the compiled kernel library {key}: {e}") from e
            _libraries[key] = lib
            if _min_work is not None:
                _set_min_work(lib, _min_work)
        return lib


#: The parallel-loop work threshold set by `parallel_threshold` (None: each library's own default).
_min_work: Optional[float] = None


def _set_min_work(lib: ctypes.CDLL, value: float) -> None:
    from ..codegen.c_omp import MIN_WORK_SYMBOL
    try:
        ctypes.c_double.in_dll(lib, MIN_WORK_SYMBOL).value = value
    except ValueError:      # a library without parallel loops' threshold (a row driver, CUDA)
        pass


@contextlib.contextmanager
def parallel_threshold(work: float) -> Iterator[None]:
    """Within the block, every C kernel's parallel loops run in parallel from `work` estimated
    operations up (`codegen.c_omp.PARALLEL_MIN_WORK` otherwise): `check_kernel` sets 0, so that
    test sizes run the parallel code a real size runs, races included.  Process-wide: libraries
    loaded inside the block take it too; the default returns afterwards."""
    global _min_work
    from ..codegen.c_omp import PARALLEL_MIN_WORK
    with _libraries_lock:
        previous, _min_work = _min_work, float(work)
        for lib in _libraries.values():
            _set_min_work(lib, _min_work)
    try:
        yield
    finally:
        with _libraries_lock:
            _min_work = previous
            for lib in _libraries.values():
                _set_min_work(lib, float(PARALLEL_MIN_WORK) if previous is None else previous)


class KernelFunction:
    """A loaded C kernel: call it with the C arguments in signature order.

    Arrays are passed as numpy arrays (their data pointer is handed to C; the caller has already
    checked dtype and layout, see `bind_arguments`), sizes as ints, scalars as Python numbers.
    ctypes releases the GIL for the duration of the call.
    """

    def __init__(self, function: Any, signature: KernelSignature, lib_path: Path):
        self._function = function
        self.signature = signature
        self.lib_path = lib_path
        self._kinds: Tuple[str, ...] = tuple(p.kind for p in signature.params)

    @property
    def raw(self) -> Any:
        """The ctypes function itself: arguments as addresses and numbers, nothing checked."""
        return self._function

    def __call__(self, *args: Any) -> None:
        params = self.signature.params
        if len(args) != len(params):
            raise TypeError(f"{self.signature.symbol}() takes {len(params)} arguments "
                            f"({', '.join(p.name for p in params)}) but {len(args)} were given")
        c_args = []
        for param, kind, value in zip(params, self._kinds, args):
            if kind == "array":
                if not isinstance(value, np.ndarray):
                    raise TypeError(f"{self.signature.symbol}(): argument {param.name} must be a numpy "
                                    f"array, got {type(value).__name__}")
                c_args.append(value.ctypes.data)
            else:
                c_args.append(value)
        self._function(*c_args)

    def __repr__(self) -> str:
        return f"<KernelFunction {self.signature.c_prototype()} from {self.lib_path}>"


def load_function(lib_path: Union[str, Path], signature: KernelSignature) -> Callable[..., None]:
    """The function `signature.symbol` of the library at `lib_path`, with its argtypes declared."""
    lib = load_library(lib_path)
    try:
        function = lib[signature.symbol]
    except AttributeError:
        raise CompileError(f"the compiled library {lib_path} has no function {signature.symbol!r}; "
                           f"the generated source and the kernel signature disagree") from None
    # `lib[name]` (unlike `lib.name`) returns a fresh ctypes function object, so setting argtypes
    # here cannot disturb another KernelFunction bound to the same symbol.
    function.argtypes = [param_ctype(p) for p in signature.params]
    function.restype = None
    return KernelFunction(function, signature, Path(lib_path))


def load_or_rebuild(lib_path: Path, signature: KernelSignature, rebuild: Callable[[], Path]) -> KernelFunction:
    """`load_function(lib_path, signature)`; when the library cannot be loaded at all (a cache entry
    that passed its checks but is still unusable, e.g. written by a broken toolchain), warn, build
    it again with `rebuild()` and load that, so one bad entry never fails every later run."""
    try:
        load_library(lib_path)
    except CompileError as e:
        warnings.warn(f"{e}; rebuilding it", CacheWarning, stacklevel=2)
        lib_path = rebuild()
    return load_function(lib_path, signature)
