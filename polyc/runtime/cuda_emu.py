"""The "cuda-emu" backend: run a generated CUDA program's emulation C on the CPU.

The emulation C is printed from the same GPU program as the CUDA source (`codegen.cuda`): blocks
and threads are loops (run backwards), each per-thread region runs for all threads of a block
before the code after it (barrier semantics), shared memory is a per-block local.  The host side
(host loops, launch sizes) is the very code the "cuda" target runs.
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..codegen.cuda import GeneratedCUDA
from ..errors import ArgumentError, CompileError
from .arguments import BoundCall
from .compiler import compile_c
from .loader import load_library, param_ctype
from .cuda_arrays import DeviceArray
from ..target import Target


class EmuBackend:
    """Compiles emulation C with the C compiler and launches kernels as plain function calls."""

    name = "cuda-emu"
    device_ordinal: Optional[int] = None

    def __init__(self, flags: Optional[Sequence[str]] = None, target: Optional[Target] = None):
        #: The emulated device: its C compiler, flags (default -O1: emulation builds stay fast, the
        #: code only runs at small test sizes) and per-block thread limit.
        self.target = Target.cuda_emu() if target is None else target
        self.flags = tuple(flags) if flags is not None else self.target.flags

    def check_device_arrays(self, device: Mapping[str, DeviceArray]) -> None:
        if device:
            names = ", ".join(device)
            raise ArgumentError(f"{names}: device array(s) passed to the CUDA emulator, which runs on the "
                                f"CPU; pass numpy arrays (e.g. cupy.asnumpy(x)), or compile with target='cuda'")

    def load(self, gen: GeneratedCUDA) -> Dict[str, Any]:
        lib_path = compile_c(gen.emulation_source, flags=self.flags, openmp=False, target=self.target)
        lib = load_library(lib_path)
        fns: Dict[str, Any] = {}
        base = [param_ctype(p) for p in gen.signature.params]
        for k in gen.launch.kernels:
            try:
                fn = lib[k.symbol + "_emu"]
            except AttributeError:
                raise CompileError(f"emulation library {lib_path} lacks {k.symbol}_emu") from None
            fn.argtypes = base + [ctypes.c_int64] * (len(k.host_iterators) + 6)
            fn.restype = None
            fns[k.symbol] = fn
        return fns

    def prepare(self, gen: GeneratedCUDA, fns: Dict[str, Any], bound: BoundCall,
                device: Mapping[str, DeviceArray], passed: frozenset = frozenset()) -> Callable[[], Any]:
        """A replayable run over the bound arrays (updated in place, as the "cuda" target does)."""
        from ..codegen.cuda_ir import walk_host
        args: List[Any] = [v.ctypes.data if isinstance(v, np.ndarray) else v for v in bound.c_args(gen.signature)]
        launches: List[Any] = []
        walk_host(gen.launch, bound.sizes, lambda kernel, grid, block, host_values: launches.append(
            (fns[kernel.symbol], tuple(args) + tuple(host_values) + grid + block)),
            self.target.max_threads_per_block)
        outputs = {name: bound.arrays[name] for name in bound.outputs}
        value = next(iter(outputs.values())) if len(outputs) == 1 else (outputs or None)

        def replay() -> Any:
            _ = bound     # keeps the arrays behind the raw pointers (and the scratch temps) alive
            for fn, call_args in launches:
                fn(*call_args)
            return value

        return replay
