"""`Target`: everything polyc knows about the machine it generates code for, in one value.

The automatic scheduler (tile sizes from cache sizes, SIMD width, whether to use several cores),
packing (BLAS-style blocking), the C compiler command (compiler, flags, OpenMP, libmvec) and the
CUDA back end (nvcc `-arch`, shared memory, threads per block) read machine facts only from a
Target that is passed to them explicitly.  `Target.host()` is the one place that asks the
operating system (`/proc/cpuinfo`, `/sys/devices/system/cpu`, the scheduler affinity mask, glibc's
libmvec, `$POLYC_CC` / `$POLYC_CFLAGS` / `$POLYC_VECTOR_MATH`); a Target made by hand or read from
JSON makes the same decisions on any machine, so a schedule chosen for one machine is reproducible
on another.  A Target is immutable, validated when made (it may come from an untrusted file:
`TargetError` names the field at fault), serialisable (`to_dict`, `to_json`, `from_json`) and has a
stable `fingerprint()` that is part of the compiled-library cache key.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import functools
import hashlib
import json
import os
import platform
import re
import shutil
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Mapping, Optional, Tuple, Union

from .compile_flags import normalise_flags
from .target_text import (WORD, check_word, target_flags, target_from_description, target_from_dict,
                          target_from_json)
from .errors import CompileFlagsError, TargetError

KINDS = ("c", "cuda", "cuda-emu")

#: The optimisation flags of the host target when `$POLYC_CFLAGS` is not set.
DEFAULT_OPT_FLAGS: Tuple[str, ...] = ("-O3", "-march=native")
#: nvcc's optimisation flags for the CUDA targets.
DEFAULT_CUDA_FLAGS: Tuple[str, ...] = ("-O3",)
#: C compiler flags of the CUDA emulator's builds (fast to compile; run only at small test sizes).
EMULATION_FLAGS: Tuple[str, ...] = ("-O1",)
#: The CUDA architecture used when none is given and no GPU can be asked.
DEFAULT_CUDA_ARCH = "sm_90"

#: libmvec functions polyc may call in vector loops, with their vector-ABI argument letters
#: (one `v` per vector argument).  A host Target has feature `libmvec:<fn>` for each one this
#: machine's libmvec provides in every x86 ISA variant.
MVEC_FUNCTIONS = {"exp": "v", "log": "v", "sin": "v", "cos": "v", "tanh": "v", "pow": "vv"}
#: x86 vector ABI ISA letters with (float lanes, double lanes).
_MVEC_ISAS = {"b": (4, 2), "c": (8, 4), "d": (8, 4), "e": (16, 8)}

#: CPU flags from /proc/cpuinfo that a host Target records as features (the ones decisions use).
_CPU_FEATURES = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "asimd", "sve")

#: Per-block limits of NVIDIA GPUs since Volta (static shared memory, 32-bit registers, threads).
CUDA_SHARED_MEMORY_BYTES = 48 * 1024
CUDA_REGISTERS_PER_BLOCK = 64 * 1024
CUDA_MAX_THREADS_PER_BLOCK = 1024

#: The fewest threads per block a GPU target may allow: polyc's tree reductions run in blocks of
#: 256 threads (`polyc.codegen.cuda_ir.REDUCE_THREADS`).
MIN_GPU_THREADS = 256

_KIB = 1024
_LIMITS = {   # field -> (smallest, largest) accepted value
    "vector_bytes": (4, 256),
    "l1": (1 * _KIB, 1 << 30),
    "l2": (1 * _KIB, 1 << 36),
    "l3": (1 * _KIB, 1 << 40),
    "cores": (1, 1 << 16),
    "shared_memory_bytes": (0, 1 << 24),
    "registers_per_block": (0, 1 << 24),
    "max_threads_per_block": (0, 1 << 16),
}
_ARCH = re.compile(r"sm_[1-9][0-9]{1,2}a?\Z")
_MAX_FLAGS = 256


@dataclass(frozen=True)
class Target:
    """The machine code is generated for.

    `kind`: "c" (C + OpenMP on a CPU), "cuda" (an NVIDIA GPU) or "cuda-emu" (the CUDA program's
    semantics on the CPU); `isa`: the CPU architecture ("x86_64", "aarch64"); `vector_bytes`: the
    widest SIMD register; `l1`, `l2`, `l3`: data-cache sizes in bytes (L1 and L2 per core);
    `cores`: cores the kernels may use; `compiler` and `flags`: the C compiler (name or path) and
    its optimisation flags; `features`: "openmp", CPU flags ("avx2", "avx512f", ...) and
    "libmvec:<fn>" for each SIMD math function; `cuda_arch` ("sm_90"), `shared_memory_bytes`,
    `registers_per_block`, `max_threads_per_block`: the GPU's per-block limits (0 / None on CPUs).
    """

    kind: str
    isa: str
    vector_bytes: int
    l1: int
    l2: int
    l3: int
    cores: int
    compiler: str
    flags: Tuple[str, ...]
    features: FrozenSet[str]
    cuda_arch: Optional[str] = None
    shared_memory_bytes: int = 0
    registers_per_block: int = 0
    max_threads_per_block: int = 0

    def __post_init__(self) -> None:
        # Normalise the collection fields (lists from a caller) before checking them.
        if isinstance(self.flags, (list, str)):
            object.__setattr__(self, "flags", target_flags(self.flags))
        if isinstance(self.features, (list, tuple, set)):
            object.__setattr__(self, "features", frozenset(self.features))
        _validate(self)

    # -- construction ------------------------------------------------------------------------
    @staticmethod
    def host() -> "Target":
        """This machine as a C target: probed once per process (caches, cores, SIMD width, CPU
        flags, libmvec), with the compiler and flags from `$POLYC_CC` / `$POLYC_CFLAGS` and the
        cores capped by `$OMP_NUM_THREADS` (`openmp_threads`; all read on each call, so a changed
        environment takes effect)."""
        facts = _host_facts()
        env_flags = os.environ.get("POLYC_CFLAGS")
        flags = normalise_flags(env_flags, "$POLYC_CFLAGS") if env_flags is not None else DEFAULT_OPT_FLAGS
        features = set(facts["features"]) | {"openmp"}
        if os.environ.get("POLYC_VECTOR_MATH", "1") != "0":
            features |= {f"libmvec:{fn}" for fn in facts["libmvec"]}
        return Target("c", facts["isa"], facts["vector_bytes"], facts["l1"], facts["l2"], facts["l3"],
                      openmp_threads(facts["cores"]), _host_compiler(), flags or (), frozenset(features))

    @staticmethod
    def cuda(arch: Optional[str] = None) -> "Target":
        """An NVIDIA GPU of compute capability `arch` ("sm_90"; default: the GPU pycuda finds, else
        `DEFAULT_CUDA_ARCH`), with the per-block limits of current GPUs.  The host facts (caches,
        cores) describe the CPU that runs the host side."""
        arch = detected_cuda_arch() if arch is None else arch
        return _cuda_like("cuda", arch)

    @staticmethod
    def cuda_emu() -> "Target":
        """The CUDA program run on this CPU (blocks and threads as loops), with a GPU's limits."""
        return _cuda_like("cuda-emu", None)

    @staticmethod
    def resolve(target: Union[str, "Target", None]) -> "Target":
        """`target` as a Target: a Target itself, "c" (`host()`), "cuda" (`cuda()`), "cuda-emu"
        (`cuda_emu()`), or any other description `from_description` reads; None means "c"."""
        if target is None:
            return Target.host()
        if isinstance(target, Target):
            return target
        if target == "c":
            return Target.host()
        if target == "cuda":
            return Target.cuda()
        if target == "cuda-emu":
            return Target.cuda_emu()
        if isinstance(target, (str, dict)):
            return Target.from_description(target)
        raise TargetError(f"a target is 'c', 'cuda', 'cuda-emu' or a pc.Target, not {type(target).__name__}",
                          "target")

    @staticmethod
    def from_description(description: Union[str, Mapping[str, Any]]) -> "Target":
        """A Target from a short description, starting from the kind's default and changing the
        fields given (`target_text.target_from_description`): `"c l2=256K vector_bytes=32 cores=8
        -avx512f"`, `"cuda:sm_80"`, or a dict of `kind` plus fields."""
        return target_from_description(Target, KINDS, description)

    def with_(self, **changes: Any) -> "Target":
        """A copy with the given fields changed (validated): `Target.host().with_(l2=256 * 1024)`."""
        unknown = set(changes) - set(_FIELDS)
        if unknown:
            name = sorted(unknown)[0]
            raise TargetError(f"Target has no field {name!r}; fields: {', '.join(_FIELDS)}", name)
        return dataclasses.replace(self, **changes)

    # -- serialisation -----------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """Every field as plain JSON values (flags as a list, features as a sorted list)."""
        out: Dict[str, Any] = {}
        for name in _FIELDS:
            value = getattr(self, name)
            if name == "flags":
                value = list(value)
            elif name == "features":
                value = sorted(value)
            out[name] = value
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @staticmethod
    def from_dict(data: Any) -> "Target":
        """The Target `to_dict` wrote; every field required and checked (untrusted input, read by
        `target_text.target_from_dict`)."""
        return target_from_dict(Target, data)

    @staticmethod
    def from_json(text: Union[str, bytes]) -> "Target":
        """The Target `to_json` wrote (a TargetError for anything malformed)."""
        return target_from_json(Target, text)

    @staticmethod
    def for_kind(kind: str, arch: Optional[str] = None) -> "Target":
        """The default Target of a kind: "c" (this machine), "cuda" (`arch` or the GPU found), "cuda-emu"."""
        if kind == "c":
            return Target.host()
        if kind == "cuda":
            return Target.cuda(arch)
        if kind == "cuda-emu":
            return Target.cuda_emu()
        raise TargetError(f"unknown target kind {kind!r}; choose one of {', '.join(KINDS)} (or 'host')", "kind")

    def fingerprint(self) -> str:
        """A stable hex digest (sha256) of every field: equal for equal targets, on any machine.
        Computed once per value (it is part of every compiled library's cache key)."""
        cached = self.__dict__.get("_fingerprint")
        if cached is None:
            cached = hashlib.sha256(self.to_json().encode("utf-8")).hexdigest()
            object.__setattr__(self, "_fingerprint", cached)   # not a field: equality and repr ignore it
        return cached

    # -- what consumers ask ------------------------------------------------------------------
    @property
    def is_cpu(self) -> bool:
        """Whether kernels run as C on the CPU (the "c" kind)."""
        return self.kind == "c"

    @property
    def is_gpu(self) -> bool:
        """Whether the kernels are CUDA programs (on a GPU or emulated)."""
        return self.kind in ("cuda", "cuda-emu")

    @property
    def openmp(self) -> bool:
        return "openmp" in self.features

    @property
    def vector_math(self) -> Tuple[str, ...]:
        """The libmvec functions the generated C may call in vector loops (in `MVEC_FUNCTIONS` order)."""
        return tuple(fn for fn in MVEC_FUNCTIONS if f"libmvec:{fn}" in self.features)

    @property
    def vector_registers(self) -> int:
        """SIMD registers the compiler may allocate: 32 on AArch64 and with AVX-512 (zmm0-31, and
        ymm16-31 under AVX-512VL), 16 on other x86-64 (ymm0-15 / xmm0-15) and on unknown ISAs.
        Derived from `isa`, `vector_bytes` and `features`, so it is never saved or described."""
        if self.isa == "aarch64" or self.vector_bytes >= 64 or "avx512f" in self.features:
            return 32
        return 16

    def lanes(self, elem_bytes: int) -> int:
        """SIMD lanes of an element of `elem_bytes` bytes."""
        return max(1, self.vector_bytes // max(1, elem_bytes))

    # -- display -----------------------------------------------------------------------------
    def summary(self) -> str:
        """One line: kind, ISA, SIMD width, caches, cores (and the GPU limits for CUDA kinds)."""
        text = (f"{self.kind} {self.isa}, {self.vector_bytes * 8}-bit SIMD, L1 {_size(self.l1)}, "
                f"L2 {_size(self.l2)}, L3 {_size(self.l3)}, {self.cores} core{'s' if self.cores != 1 else ''}")
        if self.is_gpu:
            text += (f"; {self.cuda_arch or 'emulated GPU'}, {_size(self.shared_memory_bytes)} shared memory, "
                     f"{self.max_threads_per_block} threads per block")
        return text

    def __repr__(self) -> str:
        return f"<polyc Target {self.summary()} [{self.fingerprint()[:12]}]>"

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        import html
        rows = "".join(f"<tr><td style='text-align:left'>{html.escape(k)}</td>"
                       f"<td style='text-align:left'><code>{html.escape(_display(k, v))}</code></td></tr>"
                       for k, v in self.to_dict().items())
        return (f"<div><b>polyc Target</b> {html.escape(self.summary())}"
                f"<details><summary>fields</summary><table>{rows}</table></details></div>")


_FIELDS = tuple(f.name for f in dataclasses.fields(Target))


# -- validation ---------------------------------------------------------------------------------------

def _validate(t: Target) -> None:
    """Check every field of `t` (types, ranges, known kinds); TargetError with the field at fault."""
    if not isinstance(t.kind, str) or t.kind not in KINDS:
        raise TargetError(f"kind must be one of {', '.join(KINDS)}, not {t.kind!r}", "kind")
    check_word(t.isa, "isa")
    for name, (lo, hi) in _LIMITS.items():
        value = getattr(t, name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise TargetError(f"{name} must be an integer, not {type(value).__name__} {value!r}", name)
        if not lo <= value <= hi:
            raise TargetError(f"{name} must be between {lo} and {hi}, not {value}", name)
    if t.vector_bytes & (t.vector_bytes - 1):
        raise TargetError(f"vector_bytes must be a power of two, not {t.vector_bytes}", "vector_bytes")
    if not isinstance(t.compiler, str) or not t.compiler or len(t.compiler) > 4096 or "\0" in t.compiler \
            or t.compiler.startswith("-") or any(c.isspace() for c in t.compiler):
        raise TargetError(f"compiler must be a program name or path (no spaces, not a flag), not {t.compiler!r}",
                          "compiler")
    if not isinstance(t.flags, tuple) or len(t.flags) > _MAX_FLAGS:
        raise TargetError(f"flags must be a list of at most {_MAX_FLAGS} strings", "flags")
    try:
        normalise_flags(t.flags, "the target's flags")
    except CompileFlagsError as e:
        raise TargetError(str(e), "flags") from None
    if not isinstance(t.features, frozenset) or len(t.features) > 256:
        raise TargetError("features must be a set of at most 256 names", "features")
    for f in t.features:
        check_word(f, "features")
    if t.cuda_arch is not None and (not isinstance(t.cuda_arch, str) or not _ARCH.match(t.cuda_arch)):
        raise TargetError(f"cuda_arch must look like 'sm_90' (sm_ and the compute capability), not "
                          f"{t.cuda_arch!r}", "cuda_arch")
    if t.kind == "cuda" and t.cuda_arch is None:
        raise TargetError("a 'cuda' target needs cuda_arch (e.g. 'sm_90')", "cuda_arch")
    if t.kind == "c" and t.cuda_arch is not None:
        raise TargetError("a 'c' target has no cuda_arch", "cuda_arch")
    if t.is_gpu:
        for name in ("shared_memory_bytes", "registers_per_block", "max_threads_per_block"):
            if getattr(t, name) <= 0:
                raise TargetError(f"a {t.kind!r} target needs a positive {name}", name)
        if t.max_threads_per_block < MIN_GPU_THREADS:
            raise TargetError(f"max_threads_per_block must be at least {MIN_GPU_THREADS} (polyc's tree reductions "
                              f"use blocks of that many threads)", "max_threads_per_block")


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def _display(field: str, value: Any) -> str:
    if isinstance(value, list):
        return " ".join(value) or "(none)"
    if isinstance(value, int) and field in ("l1", "l2", "l3", "shared_memory_bytes"):
        return _size(value)
    return str(value)


# -- probing the host (the only place polyc asks the operating system about the machine) ---------------

def _host_compiler() -> str:
    requested = os.environ.get("POLYC_CC")
    if requested:
        return requested
    for name in ("cc", "gcc"):
        if shutil.which(name):
            return name
    return "cc"


@functools.lru_cache(maxsize=1)
def _host_facts() -> Dict[str, Any]:
    """Caches, cores, CPU flags, SIMD width and libmvec functions of this machine (once per process)."""
    l1, l2, l3 = _cache_sizes()
    cpu_flags = _cpu_flags()
    if "avx512f" in cpu_flags:
        vbytes = 64
    elif "avx" in cpu_flags or "avx2" in cpu_flags:
        vbytes = 32
    else:
        vbytes = 16
    isa = platform.machine() or "unknown"
    isa = {"AMD64": "x86_64", "arm64": "aarch64"}.get(isa, isa)
    if not WORD.match(isa):
        isa = "unknown"
    return {"isa": isa, "vector_bytes": vbytes, "l1": l1, "l2": l2, "l3": l3, "cores": _cores(),
            "features": frozenset(f for f in _CPU_FEATURES if f in cpu_flags),
            "libmvec": _libmvec_functions(isa)}


def _parse_size(text: str) -> Optional[int]:
    text = text.strip().upper()
    try:
        if text.endswith("K"):
            return int(text[:-1]) * 1024
        if text.endswith("M"):
            return int(text[:-1]) * 1024 * 1024
        return int(text)
    except ValueError:
        return None


def _cache_sizes() -> Tuple[int, int, int]:
    """Data-cache sizes (bytes) of cpu0 from sysfs; 32 KiB / 1 MiB / 8 MiB where unknown."""
    sizes = {1: 32 * 1024, 2: 1024 * 1024, 3: 8 * 1024 * 1024}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        entries = []
    for entry in entries:
        if not entry.startswith("index"):
            continue
        path = os.path.join(base, entry)
        try:
            with open(os.path.join(path, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(path, "level")) as f:
                level = int(f.read().strip())
            with open(os.path.join(path, "size")) as f:
                size = _parse_size(f.read())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size and level in sizes:
            sizes[level] = size
    clamp = [min(max(sizes[k], _LIMITS[f"l{k}"][0]), _LIMITS[f"l{k}"][1]) for k in (1, 2, 3)]
    return clamp[0], clamp[1], clamp[2]


def host_cpus() -> Tuple[int, ...]:
    """The ids of the CPUs this process may run on (empty where the OS does not say): for pinning
    worker processes (the tuner's measurements), not for decisions, which read `Target.cores`."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return ()


def openmp_threads(cores: int, environ: Mapping[str, str] = os.environ) -> int:
    """The threads the kernels' OpenMP regions get on `cores` cores: `OMP_NUM_THREADS` (its first
    entry) where set, at most `cores`.  The automatic scheduler decides for these (a time-tiled
    stencil's wavefront, balanced tiles, which loops run in parallel): deciding for two cores a
    kernel that runs on one thread cost jacobi-2d N=1300 T=50 a fifth of its time (45 against 37
    ms: a wave over every tile loop, made to start time tiles on both cores, loses locality)."""
    first = environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return min(cores, int(first)) if first.isdigit() and int(first) > 0 else cores


def _cores() -> int:
    cores = len(host_cpus()) or os.cpu_count() or 1
    return min(max(cores, 1), _LIMITS["cores"][1])


def _cpu_flags() -> FrozenSet[str]:
    try:
        with open("/proc/cpuinfo") as f:
            line = next((ln for ln in f if ln.startswith(("flags", "Features"))), "")
    except OSError:
        return frozenset()
    return frozenset(line.partition(":")[2].split())


def _libmvec_functions(isa: str) -> Tuple[str, ...]:
    """The functions whose SIMD versions glibc's libmvec has in every x86 variant (x86-64 only)."""
    if isa != "x86_64":
        return ()
    name = ctypes.util.find_library("mvec")
    if not name:
        return ()
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return ()

    def symbols(fn: str, args: str):
        for letter, (f_lanes, d_lanes) in _MVEC_ISAS.items():
            yield f"_ZGV{letter}N{f_lanes}{args}_{fn}f"
            yield f"_ZGV{letter}N{d_lanes}{args}_{fn}"

    return tuple(fn for fn, args in MVEC_FUNCTIONS.items() if all(hasattr(lib, s) for s in symbols(fn, args)))


@functools.lru_cache(maxsize=1)
def detected_cuda_arch() -> str:
    """`sm_XY` of the GPU pycuda sees (device 0), else `DEFAULT_CUDA_ARCH` (no pycuda, driver or GPU)."""
    try:
        import pycuda.driver as drv
        drv.init()
        if drv.Device.count() > 0:
            major, minor = drv.Device(0).compute_capability()
            return f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001 - no pycuda, no driver, no GPU: all mean "not detectable"
        pass
    return DEFAULT_CUDA_ARCH


def _cuda_like(kind: str, arch: Optional[str]) -> Target:
    if kind == "cuda" and (not isinstance(arch, str) or not _ARCH.match(arch)):
        raise TargetError(f"cuda_arch must look like 'sm_90' (sm_ and the compute capability), not {arch!r}",
                          "cuda_arch")
    facts = _host_facts()
    return Target(kind, facts["isa"], facts["vector_bytes"], facts["l1"], facts["l2"], facts["l3"], facts["cores"],
                  "nvcc" if kind == "cuda" else _host_compiler(),
                  DEFAULT_CUDA_FLAGS if kind == "cuda" else EMULATION_FLAGS, frozenset(),
                  cuda_arch=arch, shared_memory_bytes=CUDA_SHARED_MEMORY_BYTES,
                  registers_per_block=CUDA_REGISTERS_PER_BLOCK, max_threads_per_block=CUDA_MAX_THREADS_PER_BLOCK)
