"""A kernel compiled to C: specialised per dtype signature on first use, then called directly."""
from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Sequence, Tuple

from ..codegen.c import GeneratedC, generate_c
from ..codegen.typing import Typing, resolve_typing
from ..ir import f32
from .arguments import bind_arguments, passed_dtypes
from .compiler import command_flags, compile_c
from .loader import load_function


class CCompiledKernel:
    """The callable result of `pc.compile(kernel, schedule)` for target "c".

    Undeclared dtypes are taken from the arrays of each call; one C function is generated and
    compiled per distinct dtype signature (cached on disk across processes).  A call returns the
    single output array, or a dict by name when the kernel has several outputs.
    """

    target = "c"

    def __init__(self, kernel, schedule, *, flags: Optional[Sequence[str]] = None, openmp: bool = True):
        self.kernel = kernel
        self.schedule = schedule
        self.flags = tuple(flags) if flags is not None else None
        self.openmp = openmp
        self._variants: Dict[str, Tuple[GeneratedC, Any]] = {}
        self._last: Optional[GeneratedC] = None
        self._lock = threading.Lock()

    # -- specialisation ------------------------------------------------------------------------
    def variant(self, typing: Typing) -> Tuple[GeneratedC, Any]:
        key = typing.key()
        with self._lock:
            if key not in self._variants:
                gen = generate_c(self.schedule, typing)
                lib = compile_c(gen.source, flags=self.flags, openmp=self.openmp)
                self._variants[key] = (gen, load_function(lib, gen.signature))
            self._last = self._variants[key][0]
            return self._variants[key]

    def typing_for(self, kwargs) -> Typing:
        return resolve_typing(self.kernel.program, passed_dtypes(self.kernel.program, kwargs))

    # -- calling -------------------------------------------------------------------------------
    def __call__(self, **kwargs: Any) -> Any:
        program = self.kernel.program
        typing = self.typing_for(kwargs)
        gen, fn = self.variant(typing)
        bound = bind_arguments(program, kwargs, dtypes=typing.tensors)
        fn(*bound.c_args(gen.signature))
        outputs = {name: bound.arrays[name] for name in bound.outputs}
        if len(outputs) == 1:
            return next(iter(outputs.values()))
        return outputs or None

    # -- inspection ----------------------------------------------------------------------------
    @property
    def source(self) -> str:
        """The generated C of the last variant used (float32 for undeclared dtypes before any call)."""
        if self._last is None:
            self.variant(resolve_typing(self.kernel.program, {}, default=f32, require_inputs=False))
        return self._last.source  # type: ignore[union-attr]

    @property
    def compile_flags(self) -> Tuple[str, ...]:
        return command_flags(self.flags, self.openmp)

    def __repr__(self) -> str:
        return f"<compiled {self.kernel.name} for C, schedule {self.schedule!r}>"

    def _repr_html_(self) -> str:
        from ..viz.html import compiled_html
        return compiled_html(self)
