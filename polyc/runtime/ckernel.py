"""A kernel compiled to C: specialised per dtype signature (and, optionally, per size class) on
first use, then called directly."""
from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Sequence, Tuple

from ..codegen.c import GeneratedC, generate_c
from ..codegen.typing import Typing, resolve_typing
from ..ir import f32
from .arguments import arguments_by_name, bind_arguments, call_key, passed_dtypes
from .dlpack import mark_written
from .ready_call import ReadyCall
from ..target import Target
from .compiler import command_flags, compile_c, normalise_flags
from .loader import load_or_rebuild
from .forksafe import ForkSafeLock

#: Sizes up to this value are compiled in as constants when specialising: trip counts this small
#: decide unrolling and remainder code; larger ones stay symbolic, so one variant serves them all.
SMALL_SIZE = 16

#: Checked argument signatures a compiled kernel remembers (see `arguments.call_key`); a kernel
#: called with ever new scalar values starts over past this many.
MAX_REMEMBERED_CALLS = 64


class CCompiledKernel:
    """The callable result of `pc.compile(kernel, schedule)` for target "c".

    Undeclared dtypes are taken from the arrays of each call; one C function is generated and
    compiled per distinct dtype signature (cached on disk across processes).  With `specialise`,
    also one per *size class*: every size up to `SMALL_SIZE` is compiled in as a constant (isl's
    loops and gcc then know those trip counts), larger sizes stay symbolic.  An automatic schedule
    (`schedule="auto"`, untransformed) is moreover decided again per size class (each size by its
    power of two, `auto_size.size_key`), so parallel loops and time tiling appear only at the
    sizes where they pay (`auto.specialised`).  A call returns the single output array, or a dict
    by name when the kernel has several outputs.
    """

    def __reduce__(self):
        from ..errors import not_picklable
        raise not_picklable("a compiled kernel", "the kernel (and schedule.to_json()) and compile it in the worker")

    def __init__(self, kernel, schedule, *, flags: Optional[Sequence[str]] = None, openmp: bool = True,
                 specialise: bool = False, target: Optional[Target] = None):
        self.kernel = kernel
        #: The machine the library is built for (compiler, flags, OpenMP, libmvec; cache key).
        self.target = Target.host() if target is None else target
        self.specialise = specialise
        self.schedule = schedule
        self.flags = normalise_flags(flags)
        self.openmp = openmp
        self._variants: Dict[str, Tuple[GeneratedC, Any]] = {}
        self._schedules: Dict[str, Any] = {}  # size-class key -> the schedule decided for it
        self._typings: Dict[Tuple[Tuple[str, str], ...], Typing] = {}  # dtype signature -> typing
        self._calls: Dict[Tuple[Any, ...], ReadyCall] = {}  # call_key -> plan of a checked call
        # Per calling thread, the intermediates of its last call, reused by its next call of the
        # same shapes (fresh pages cost a page fault each: a quarter of a 4096^2 softmax).
        self._scratch = threading.local()
        self._last: Optional[GeneratedC] = None
        self._lock = ForkSafeLock()

    # -- specialisation ------------------------------------------------------------------------
    def size_class(self, sizes: Dict[str, int]) -> Dict[str, int]:
        """The sizes a call's variant is compiled for (empty without `specialise`)."""
        if not self.specialise:
            return {}
        return {k: v for k, v in sizes.items() if v <= SMALL_SIZE}

    def schedule_for(self, sizes: Optional[Dict[str, int]] = None) -> Tuple[str, Any]:
        """(size-class key, schedule) for a call with `sizes`: the compiled schedule, or, for an
        automatic one when specialising, the automatic schedule decided for the sizes' class
        (the first call of a class decides it)."""
        from ..schedule.auto import AutoRequest, specialised
        from ..schedule.auto_size import size_key
        request = self.schedule.auto_request
        if not (self.specialise and sizes and isinstance(request, AutoRequest) and request.applies_to(self.schedule)):
            return "", self.schedule
        key = "auto:" + ",".join(f"{k}{b}" for k, b in size_key(sizes).items())
        with self._lock:
            if key not in self._schedules:
                self._schedules[key] = specialised(self.kernel, self.schedule, sizes)
            return key, self._schedules[key]

    def variant(self, typing: Typing, fixed_sizes: Optional[Dict[str, int]] = None,
                sizes: Optional[Dict[str, int]] = None) -> Tuple[GeneratedC, Any]:
        """The compiled C for `typing`, with `fixed_sizes` compiled in, under the schedule for the
        size class of `sizes` (see `schedule_for`)."""
        fixed = dict(fixed_sizes or {})
        class_key, schedule = self.schedule_for(sizes)
        key = typing.key() + "|" + ",".join(f"{k}={v}" for k, v in sorted(fixed.items())) + "|" + class_key
        with self._lock:
            if key not in self._variants:
                gen = generate_c(schedule, typing, fixed)
                lib = compile_c(gen.source, flags=self.flags, openmp=self.openmp, target=self.target)
                fn = load_or_rebuild(lib, gen.signature,
                                     lambda: compile_c(gen.source, flags=self.flags, openmp=self.openmp, rebuild=True,
                                                       target=self.target))
                self._variants[key] = (gen, fn)
            self._last = self._variants[key][0]
            return self._variants[key]

    def typing_for(self, kwargs) -> Typing:
        """The types of a call (from the dtypes of the arrays passed), resolved once per dtype
        signature: resolving walks every expression of the program, a third of a small call."""
        passed = passed_dtypes(self.kernel.program, kwargs)
        key = tuple(sorted((name, dt.name) for name, dt in passed.items()))
        typing = self._typings.get(key)
        if typing is None:
            typing = self._typings[key] = resolve_typing(self.kernel.program, passed)
        return typing

    # -- calling -------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs = arguments_by_name(self.kernel, args, kwargs)
        scratch = getattr(self._scratch, "temps", None)
        if scratch is None:
            scratch = self._scratch.temps = {}
        key = call_key(kwargs)
        ready = self._calls.get(key) if key is not None else None
        if ready is not None:
            # Same dtypes, shapes, layouts and numbers as a call already checked: its sizes,
            # variant and plan hold; only what depends on the arrays' memory is checked again.
            return ready(kwargs, scratch)
        fully_written = self.kernel.model.fully_written
        typing = self.typing_for(kwargs)
        bound = bind_arguments(self.kernel.program, kwargs, dtypes=typing.tensors, fully_written=fully_written)
        gen, fn = self.variant(typing, self.size_class(bound.sizes), bound.sizes)
        fn(*bound.c_args(gen.signature, scratch))
        mark_written(kwargs, bound.outputs)
        if key is not None:
            if len(self._calls) >= MAX_REMEMBERED_CALLS:
                self._calls.clear()
            self._calls[key] = ReadyCall.plan(bound, kwargs.keys(), gen.signature, fn.raw, fully_written)
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
        return command_flags(self.flags, self.openmp, target=self.target)

    def __repr__(self) -> str:
        return f"<compiled {self.kernel.name} for C ({self.target.summary()}), schedule {self.schedule!r}>"

    def _repr_html_(self) -> str:
        from ..display import html_of
        return html_of("compiled", self)
