"""The "cuda" backend: compile with nvcc through pycuda, launch on the GPU.

pycuda is optional (`pip install polyc[cuda]`).  The backend uses the device's *primary* context
(`pycuda.autoprimaryctx`), the one CuPy and PyTorch use, so their device pointers are valid here.
numpy arguments are copied to the device and written arrays back; device arrays
(`__cuda_array_interface__`) are used in place.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..codegen.cuda import GeneratedCUDA
from ..errors import CompileError, TargetUnavailableError
from .arguments import BoundCall
from .cuda_arrays import DeviceArray
from ..target import Target

_PREPARE = {"f32": "f", "f64": "d", "i32": "i", "i64": "q", "u8": "B", "u16": "H"}
_WRITTEN_ROLES = ("output", "inout")


_POOL: Any = None


def device_allocator() -> Callable[[int], Any]:
    """The allocator of the device arrays polyc makes (outputs not passed, programs' buffers):
    pycuda's memory pool, one per process, so repeated calls reuse freed blocks instead of paying
    a `cudaMalloc` (and the driver's page mapping) for every output of every call."""
    global _POOL
    if _POOL is None:
        from pycuda.tools import DeviceMemoryPool
        _POOL = DeviceMemoryPool()
    return _POOL.allocate


def import_driver():
    """pycuda's driver module, started; TargetUnavailableError (with what to do) when pycuda, the
    driver or a GPU is missing."""
    try:
        import pycuda  # noqa: F401
    except ImportError as e:
        raise TargetUnavailableError("target 'cuda' needs pycuda, which is not installed; install it with "
                                     "`pip install polyc[cuda]` (or use target='cuda-emu' to run the "
                                     "generated kernels on the CPU)") from e
    try:
        import pycuda.driver as drv
    except ImportError as e:
        raise TargetUnavailableError(f"target 'cuda': pycuda is installed but the CUDA driver cannot be "
                                     f"loaded ({e}); this machine has no usable NVIDIA driver/GPU "
                                     f"(use target='cuda-emu' to run on the CPU)") from e
    try:
        drv.init()
        count = drv.Device.count()
    except Exception as e:  # noqa: BLE001 - pycuda raises its own LogicError/RuntimeError types
        raise TargetUnavailableError(f"target 'cuda': the CUDA driver could not start ({e})") from e
    if count == 0:
        raise TargetUnavailableError("target 'cuda': the CUDA driver reports no GPU on this machine")
    return drv


class PyCudaBackend:
    """Loads CUDA modules with pycuda (nvcc underneath, cached by pycuda) and launches kernels."""

    name = "cuda"

    def __init__(self, drv, flags: Sequence[str], target: Optional[Target] = None):
        self.drv = drv
        import pycuda.autoprimaryctx  # noqa: F401 - makes the primary context current
        self.device = drv.Context.get_device()
        self.device_ordinal = next((k for k in range(drv.Device.count()) if drv.Device(k) == self.device), 0)
        major, minor = self.device.compute_capability()
        #: nvcc's `-arch`: the target's CUDA architecture (default: this device's).
        self.arch = target.cuda_arch if target is not None and target.cuda_arch else f"sm_{major}{minor}"
        self.target = target
        self.flags = list(flags)
        self._scratch_memory: Dict[Any, Any] = {}

    @classmethod
    def create(cls, flags: Optional[Sequence[str]] = None, target: Optional[Target] = None) -> "PyCudaBackend":
        drv = import_driver()
        default = target.flags if target is not None else ("-O3",)
        return cls(drv, tuple(flags) if flags is not None else default, target)

    def check_device_arrays(self, device: Mapping[str, DeviceArray]) -> None:
        return None

    def _scratch(self, gen: GeneratedCUDA, name: str, nbytes: int) -> Any:
        """Device memory for an intermediate, kept per kernel variant and reused by later calls
        (launches are stream-ordered, so consecutive calls never overlap on it)."""
        key = (id(gen), name)
        held = self._scratch_memory.get(key)
        if held is None or held[0] < nbytes:
            held = (max(nbytes, 1), self.drv.mem_alloc(max(nbytes, 1)))
            self._scratch_memory[key] = held
        return held[1]

    def load(self, gen: GeneratedCUDA) -> Dict[str, Any]:
        from pycuda.compiler import SourceModule
        try:
            module = SourceModule(gen.source, no_extern_c=True, arch=self.arch, options=self.flags)
        except Exception as e:  # noqa: BLE001 - pycuda.driver.CompileError
            raise CompileError(f"nvcc (through pycuda) rejected the generated CUDA: {e}", source=gen.source,
                               compiler_output=str(getattr(e, "stderr", "") or e)) from e
        base = "".join("P" if p.kind == "array" else "q" if p.kind == "size" else _PREPARE[p.dtype.name]
                       for p in gen.signature.params)
        fns: Dict[str, Any] = {"_module": module}
        for k in gen.launch.kernels:
            fn = module.get_function(k.symbol)
            fn.prepare(base + "q" * len(k.host_iterators))
            fns[k.symbol] = fn
        return fns

    def prepare(self, gen: GeneratedCUDA, fns: Dict[str, Any], bound: BoundCall,
                device: Mapping[str, DeviceArray], passed: frozenset = frozenset()) -> Callable[[], Any]:
        """A replayable run: device memory set up once; each call copies numpy inputs in, replays
        the recorded launches, copies written numpy arrays back, and returns the outputs."""
        from pycuda import gpuarray
        from ..codegen.cuda_ir import walk_host
        drv = self.drv
        roles = {t.name: t.role for t in bound.program.tensors}
        keep_alive: List[Any] = []
        pointers: Dict[str, int] = {}
        results: Dict[str, Any] = {}
        copy_in: List[Any] = []
        copy_back: List[Any] = []
        for p in gen.signature.params:
            if p.kind != "array":
                continue
            if p.name in device:
                pointers[p.name] = device[p.name].pointer
                results[p.name] = device[p.name].obj
                continue
            host = bound.arrays.get(p.name)
            if host is None:                                   # an intermediate: scratch memory
                mem = self._scratch(gen, p.name, bound._temp(p.name, p.dtype).nbytes)
            elif device and roles[p.name] == "output" and p.name not in passed:
                arr = gpuarray.zeros(host.shape, host.dtype, allocator=device_allocator())  # stays on the device
                results[p.name] = arr
                pointers[p.name] = int(arr.gpudata)
                continue
            else:
                mem = drv.mem_alloc(max(host.nbytes, 1))
                if host.nbytes:
                    copy_in.append((mem, host))
                    if roles[p.name] in _WRITTEN_ROLES:
                        copy_back.append((host, mem))
                results[p.name] = host
            keep_alive.append(mem)
            pointers[p.name] = int(mem)
        args: List[Any] = []
        for p in gen.signature.params:
            if p.kind == "array":
                args.append(pointers[p.name])
            elif p.kind == "size":
                args.append(np.int64(bound.sizes[p.name]))
            else:
                args.append(p.dtype.numpy.type(bound.scalars[p.name]))
        launches: List[Any] = []
        walk_host(gen.launch, bound.sizes, lambda kernel, grid, block, host_values: launches.append(
            (fns[kernel.symbol].prepared_call, grid, block, tuple(args) + tuple(np.int64(v) for v in host_values))),
            self.target.max_threads_per_block if self.target is not None else None)
        outputs = {name: results[name] for name in bound.outputs}
        value = next(iter(outputs.values())) if len(outputs) == 1 else (outputs or None)

        def replay() -> Any:
            _ = keep_alive
            for mem, host in copy_in:
                drv.memcpy_htod(mem, host)
            for call, grid, block, call_args in launches:
                call(grid, block, *call_args)
            for host, mem in copy_back:
                drv.memcpy_dtoh(host, mem)
            return value

        return replay
