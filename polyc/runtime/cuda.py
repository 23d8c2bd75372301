"""Compiled CUDA kernels: targets "cuda" (pycuda on a GPU) and "cuda-emu" (CPU emulation).

`cuda_compiled_kernel(kernel, schedule, target=..., flags=...)` returns a `CUDACompiledKernel`,
the callable `pc.compile` hands back.  A call binds arguments (numpy arrays and device arrays
exposing `__cuda_array_interface__`), specialises on dtypes, then walks the host program (host
loops, guards, launches with grid/block sizes evaluated from the sizes) through a backend:
`PyCudaBackend` (`cuda_pycuda`) or `EmuBackend` (`cuda_emu`).

`compile_cuda_check(source, arch)` compiles CUDA text with `nvcc --cubin` only to check it (CI
without a GPU uses it).
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from ..codegen.cuda import GeneratedCUDA, generate_cuda
from ..codegen.cuda_ir import LaunchFn, walk_host  # noqa: F401  (re-exported)
from ..codegen.typing import Typing, resolve_typing
from ..errors import CompileError, PolycError, TargetUnavailableError
from ..ir import f32
from ..target import Target
from .arguments import arguments_by_name, bind_arguments, passed_dtypes
from .dlpack import mark_written
from .compiler import trim_output
from .cuda_arrays import split_arguments
from .forksafe import ForkSafeLock

# The host side of a GPU program runs through `walk_host` (it lives with the GPU program form).


class CUDACompiledKernel:
    """The callable result of `pc.compile(kernel, schedule, target="cuda" | "cuda-emu")`.

    One CUDA program is generated per dtype signature.  A call returns the single output, or a
    dict by name for several: numpy arrays when only numpy arrays were passed, device arrays
    (the ones passed, or new pycuda `GPUArray`s) when any device array was passed.
    """

    def __reduce__(self):
        from ..errors import not_picklable
        raise not_picklable("a compiled CUDA kernel", "the kernel (and schedule.to_json()) and compile it in the worker")

    def __init__(self, kernel, schedule, *, backend, target: Union[str, Target]):
        self.kernel = kernel
        self.schedule = schedule
        self.backend = backend
        #: The device the program is generated for (limits, CUDA architecture).
        self.target = Target.resolve(target)
        self._variants: Dict[str, Tuple[GeneratedCUDA, Any]] = {}
        self._last: Optional[GeneratedCUDA] = None
        self._lock = ForkSafeLock()

    def variant(self, typing: Typing) -> Tuple[GeneratedCUDA, Any]:
        key = typing.key()
        with self._lock:
            if key not in self._variants:
                gen = generate_cuda(self.schedule, typing)
                self._variants[key] = (gen, self.backend.load(gen))
            self._last = self._variants[key][0]
            return self._variants[key]

    def bind(self, **kwargs: Any) -> Callable[[], Any]:
        """Check and bind a call once; the returned function runs it again and again.

        Each run copies numpy inputs to the device, replays the recorded launches (sizes, grid
        and block already evaluated) and copies written numpy arrays back; device arrays are used
        in place.  For timing and for calling one kernel on the same buffers repeatedly.
        """
        program = self.kernel.program
        device, rest = split_arguments(program, kwargs, device_ordinal=self.backend.device_ordinal)
        self.backend.check_device_arrays(device)
        stand_ins = dict(rest)
        stand_ins.update({n: d.stand_in() for n, d in device.items()})
        typing = resolve_typing(program, passed_dtypes(program, stand_ins))
        bound = bind_arguments(program, stand_ins, dtypes=typing.tensors)
        gen, handle = self.variant(typing)
        run = self.backend.prepare(gen, handle, bound, device, frozenset(kwargs))

        def run_and_mark() -> Any:
            result = run()
            mark_written(kwargs, bound.outputs)
            return result
        return run_and_mark

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs = arguments_by_name(self.kernel, args, kwargs)
        return self.bind(**kwargs)()

    @property
    def source(self) -> str:
        """The CUDA source of the last variant used (float32 for undeclared dtypes before any call)."""
        if self._last is None:
            gen = generate_cuda(self.schedule, resolve_typing(self.kernel.program, {}, default=f32, require_inputs=False))
            return gen.source
        return self._last.source

    @property
    def generated(self) -> Optional[GeneratedCUDA]:
        """Everything generated for the last variant used (CUDA, emulation C, launch plan)."""
        return self._last

    def _repr_html_(self) -> str:
        from ..display import html_of
        return html_of("compiled", self)

    def __repr__(self) -> str:
        return f"<compiled {self.kernel.name} for {self.target.kind} ({self.target.summary()}), " \
               f"schedule {self.schedule!r}>"


def cuda_compiled_kernel(kernel, schedule, *, target: Union[str, Target], flags: Optional[Sequence[str]] = None,
                         backend: Any = None) -> CUDACompiledKernel:
    """A compiled kernel for a "cuda" target (needs pycuda, a driver and a GPU; nvcc `-arch` is
    the target's `cuda_arch`) or a "cuda-emu" one (the target's C compiler and flags).  `flags`
    replaces the target's.

    Raises `TargetUnavailableError` for "cuda" when pycuda, the driver or a GPU is missing.
    `backend` replaces the backend (tests use it to exercise the host side without a GPU).
    """
    if isinstance(target, str) and target not in ("cuda", "cuda-emu"):
        raise PolycError(f"unknown CUDA target {target!r}; use 'cuda' or 'cuda-emu'")
    target = Target.resolve(target)
    if backend is None:
        if target.kind == "cuda-emu":
            from .cuda_emu import EmuBackend
            backend = EmuBackend(flags, target)
        elif target.kind == "cuda":
            from .cuda_pycuda import PyCudaBackend
            backend = PyCudaBackend.create(flags, target)
        else:
            raise PolycError(f"unknown CUDA target {target.kind!r}; use 'cuda' or 'cuda-emu'")
    return CUDACompiledKernel(kernel, schedule, backend=backend, target=target)


# -- compile-only checks --------------------------------------------------------------------------

def find_nvcc() -> Optional[str]:
    """Path of nvcc: `$POLYC_NVCC`, else `nvcc` on PATH, else `$CUDA_HOME/bin/nvcc`, else None."""
    env = os.environ.get("POLYC_NVCC")
    if env:
        return shutil.which(env)
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.exists(os.path.join(home, "bin", "nvcc")):
            return os.path.join(home, "bin", "nvcc")
    return None


def compile_cuda_check(source: str, arch: Union[str, Target] = "sm_90", flags: Optional[Sequence[str]] = None) -> None:
    """Compile CUDA `source` to a cubin for `arch` with nvcc and discard it; raise on rejection.

    `arch` is an `sm_XY` string or a "cuda" `Target` (its `cuda_arch` and flags); `flags`
    default to the target's, else `-O3`.

    Raises `TargetUnavailableError` when nvcc is missing and `CompileError` (keeping the source
    and nvcc's message) when nvcc rejects the code.
    """
    if isinstance(arch, Target):
        if arch.cuda_arch is None:
            raise PolycError(f"compile_cuda_check needs a target with a CUDA architecture, not {arch.summary()}")
        flags = arch.flags if flags is None else flags
        arch = arch.cuda_arch
    else:
        Target.cuda(arch)   # validates `sm_XY` (TargetError): it reaches nvcc's command line
    flags = ("-O3",) if flags is None else tuple(flags)
    nvcc = find_nvcc()
    if nvcc is None:
        raise TargetUnavailableError("nvcc was not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin); "
                                     "install the CUDA toolkit or set POLYC_NVCC")
    with tempfile.TemporaryDirectory(prefix="polyc-nvcc-") as tmp:
        src = os.path.join(tmp, "kernel.cu")
        with open(src, "w") as fh:
            fh.write(source)
        command = [nvcc, f"-arch={arch}", "--cubin", *flags, "-o", os.path.join(tmp, "kernel.cubin"), src]
        text = shlex.join(command)
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=600,
                                  env=dict(os.environ, LC_ALL="C"))
        except (OSError, subprocess.SubprocessError) as e:
            raise CompileError(f"could not run nvcc: {e}", source=source, command=text) from e
        if proc.returncode != 0:
            output = (proc.stderr or "") + (proc.stdout or "")
            raise CompileError(f"nvcc rejected the generated CUDA for {arch} (exit status {proc.returncode}):\n"
                               f"{trim_output(output)}\n  command: {text}",
                               source=source, compiler_output=output, command=text)
