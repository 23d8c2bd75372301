"""The public entry points: `kernel`, `compile`, `codegen`, and the `Kernel` / `CompiledKernel` types."""
from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Union

from .errors import ArgumentError, ParseError, PolycError, ProgramError
from .ir import DType, Program, TensorType
from .poly import Dependences, PolyModel, check_bounds, check_initialized, empty_size_requirements, infer_shapes
from .poly.checks import derived_size_constraints
from .schedule.schedule import Schedule
from .target import Target
from .runtime.forksafe import ForkSafeLock

TARGETS = ("c", "cuda", "cuda-emu")


def _check_integer_range(program: Program) -> None:
    """Refuse, where it is written, a subscript or bound whose integers no call could keep inside
    64-bit arithmetic (`ir.magnitude.oversized_statement`), before isl meets its constants."""
    from .ir.magnitude import SAFE_MAGNITUDE, oversized_statement
    st = oversized_statement(program)
    if st is not None:
        raise ParseError(f"`{st.text}` computes subscripts or loop bounds beyond {SAFE_MAGNITUDE} (2**60) times "
                         f"its sizes: a coefficient, constant or divisor this large cannot be computed in the "
                         f"64-bit integers of the generated loops", st.location)


class Kernel:
    """A checked kernel: its IR (`program`), polyhedral model, dependences and schedules.

    Created by `pc.kernel(...)`.  Definition-time checks run here: shape inference, bounds
    (`OutOfBoundsError`) and initialisation of intermediates (`UninitializedReadError`).
    Calling a kernel compiles it once (source order, C) and runs it.
    """

    def __init__(self, program: Program, function: Optional[Callable] = None):
        self.source_program = program
        _check_integer_range(program)
        self.program: Program = infer_shapes(program)
        _check_integer_range(self.program)      # with the ranges inferred
        self.model = PolyModel(self.program)
        floors: list = []   # floors of per-call sizes that requirements use: derived sizes
        requirements = check_bounds(self.model, floors)
        if requirements:  # sizes only the call knows (undeclared inputs, int parameters): checked then
            self.program = self.program.with_(
                assumptions=self.program.assumptions + derived_size_constraints(floors) + requirements,
                sizes=self.program.sizes + tuple(n for n, _, _ in floors),
                derived_sizes=self.program.derived_sizes + tuple(floors),
                int_params=self.program.int_params + tuple(n for n, _, _ in floors))  # any sign
            self.model = PolyModel(self.program)
        nonempty = tuple(c for c in empty_size_requirements(self.model) if c not in self.program.assumptions)
        if nonempty:   # `B[0] = ...` needs a non-empty B: a call with a size 0 is refused, never run
            self.program = self.program.with_(assumptions=self.program.assumptions + nonempty)
            self.model = PolyModel(self.program)
        check_initialized(self.model)
        self.function = function
        #: The module globals a loop kernel was defined with (its constants are compiled in): its
        #: reference runs with them too, whatever the module rebinds later.
        self.function_globals = dict(inspect.unwrap(function).__globals__) if function is not None else None
        self._default: Optional["CompiledKernel"] = None
        self._lock = ForkSafeLock()

    @property
    def name(self) -> str:
        return self.program.name

    def schedule(self) -> Schedule:
        """The source-order schedule; every primitive on it returns a new Schedule."""
        return Schedule.source_order(self.model)

    def dependences(self) -> Dependences:
        """Exact dependences (flow value-based; anti and output memory-based)."""
        return self.model.dependences

    def reference(self, *args: Any, **kwargs: Any) -> Any:
        """Run the kernel as written, as an oracle.

        Affine-Python kernels run their own Python code on numpy arrays (in place); Einstein
        kernels run a direct numpy interpretation of their statements.  Returns what a call of the
        compiled kernel returns.
        """
        from .runtime.arguments import arguments_by_name
        from .runtime.interpreter import interpret
        return interpret(self, arguments_by_name(self, args, kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args:
            from .runtime.arguments import arguments_by_name
            traced = next((v for v in args if getattr(v, "__polyc_traced__", False)), None)
            try:
                kwargs = arguments_by_name(self, args, kwargs)
            except ArgumentError as e:   # inside a @pc.program: at the user's line, as its other errors
                if traced is None:
                    raise
                raise ProgramError(str(e), traced.tracer.location()) from None
        traced = next((v for v in kwargs.values() if getattr(v, "__polyc_traced__", False)), None)
        if traced is not None:   # inside a @pc.program: the traced tensor records the operator
            return traced.record_call(self, kwargs)
        with self._lock:
            if self._default is None:
                self._default = compile(self)
        return self._default(**kwargs)

    def __reduce__(self) -> Any:
        """Pickled as what defines it: its program, and a loop kernel's function by reference
        (`KernelRef`: the worker imports its module), so kernels can be sent to worker processes;
        the tuner sends them so too (`tune.measure.kernel_blob`)."""
        if self.function is None:
            return (Kernel, (self.source_program,))
        ref = kernel_ref(self.function)
        return (_unpickled_loop_kernel, (self.source_program, ref if ref is not None else self.function))

    def __repr__(self) -> str:
        sig = ", ".join(f"{t.name}: {t.role}" for t in self.program.tensors)
        return f"<polyc kernel {self.name}({sig}), {len(self.program.statements)} statements>"

    def _repr_html_(self) -> str:
        from .display import html_of
        return html_of("kernel", self)


def _unpickled_loop_kernel(program: Program, function: Any) -> "Kernel":
    """The loop kernel of `program` and `function` (or the `KernelRef` to it): the module's own
    Kernel where the reference names one of this program (`@pc.kernel` at module level)."""
    if isinstance(function, KernelRef):
        found = function.bound()
        if isinstance(found, Kernel) and found.source_program == program:
            return found
        function = function.resolve()
    return Kernel(program, function=function)


@dataclass(frozen=True)
class KernelRef:
    """A loop kernel's function, found again in a worker by module and qualified name: the name
    binds the function itself, or (`@pc.kernel def f`, where the decorator rebinds the function's
    name, so pickle cannot send the function) the Kernel made of it.  `folder` is where the
    module's top package lies, for a worker whose import path lacks it (a script run from
    elsewhere that imports a module beside it)."""

    module: str
    qualname: str
    folder: Optional[str] = None

    def bound(self) -> Any:
        """What the module (imported, from `folder` if need be) binds at the qualified name."""
        import importlib
        if self.folder and self.folder not in sys.path:
            try:
                importlib.import_module(self.module)
            except ModuleNotFoundError:
                sys.path.append(self.folder)
        obj: Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            obj = getattr(obj, part, None)
        return obj

    def resolve(self) -> Any:
        """The loop function (TuneError where the name binds neither it nor a loop kernel)."""
        from .errors import TuneError
        obj = self.bound()
        if isinstance(obj, Kernel):
            obj = obj.function
        if not callable(obj):
            raise TuneError(f"{self.module}.{self.qualname} is not a loop kernel's function in the worker process")
        return obj


def kernel_ref(function: Any) -> Optional[KernelRef]:
    """A KernelRef for a loop function that a worker can import: its module (not the script being
    run) binds, at the function's own qualified name, the function or a Kernel made of it.  None
    for a lambda, a closure, or a function that its module does not bind by that name."""
    module, qualname = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if obj is not function and getattr(obj, "function", None) is not function:
        return None
    origin = getattr(sys.modules.get(module.split(".")[0]), "__file__", None)
    folder = None
    if origin:
        folder = os.path.dirname(os.path.abspath(origin))
        if os.path.basename(origin) == "__init__.py":   # a package: the folder that holds it
            folder = os.path.dirname(folder)
    return KernelRef(module, qualname, folder)



def kernel(source: Union[str, Callable, None] = None, *, name: Optional[str] = None,
           outputs: Optional[Sequence[str]] = None, **declared: Union[TensorType, DType]) -> Any:
    """Define a kernel from Einstein-notation text or an affine-Python loop function.

    `pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul", A=pc.f32["M", "K"])`, or as a
    decorator on a loop function whose array parameters are annotated `pc.f64["N", "N"]`.
    Tensor Comprehensions' own form is read as written: `pc.kernel("def mm(float(M, K) A,
    float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }")`; with several `def`s, `name`
    picks one.
    `outputs=["O", ...]` (Einstein notation) names the tensors a call returns; the others it
    writes are intermediates.  By default a tensor is returned when no statement reads it after
    its last write.
    """
    if source is None:
        return lambda fn: kernel(fn, name=name, outputs=outputs, **declared)
    if callable(source) and not isinstance(source, str):
        from .frontend.pyloops import program_from_function
        if declared or outputs is not None:
            raise PolycError("declare a loop kernel's types in its annotations, not as keyword arguments "
                             "(its outputs are the arrays it writes)")
        program = program_from_function(source)
        if name:
            program = program.with_(name=name)
        k = Kernel(program, function=source)
        try:
            k.__doc__ = source.__doc__
            k.__wrapped__ = source  # type: ignore[attr-defined]
        except AttributeError:
            pass
        return k
    if not isinstance(source, str):
        raise PolycError(f"pc.kernel takes Einstein-notation text or a function, not {type(source).__name__}")
    from .frontend.einsum import program_from_einsum
    filename = "<kernel>"
    frame = inspect.currentframe()
    caller = frame.f_back if frame is not None else None
    while caller is not None and caller.f_code.co_filename == __file__:   # `pc.kernel(name=...)("...")`
        caller = caller.f_back
    if caller is not None:
        filename = f"<kernel defined at {caller.f_code.co_filename}:{caller.f_lineno}>"
    from .frontend.tc_def import is_tc_definition, program_from_tc, tc_definition
    if is_tc_definition(source):     # Tensor Comprehensions' `def name(float(M, K) A, ...) -> (C) { ... }`
        return Kernel(program_from_tc(tc_definition(source, filename, name, declared, outputs), filename, source))
    program = program_from_einsum(source, name or "kernel", declared, filename=filename, outputs=outputs)
    return Kernel(program)


def returning(k: Kernel, *tensors: str) -> Kernel:
    """Kernel `k` whose calls also return the intermediates `tensors` (a call then returns a dict of
    every output): a forward that keeps the values a gradient built with
    `pc.grad(k, ..., saved=[...])` reads instead of recomputing them.  Outputs named are returned
    anyway; inputs, and a loop kernel's local scalars, cannot be returned (`PolycError`)."""
    if not isinstance(k, Kernel):
        raise PolycError(f"pc.returning takes a kernel made by pc.kernel, not {type(k).__name__}")
    decls = k.source_program.tensor_map
    temps = [t.name for t in k.source_program.tensors if t.role == "temp"]
    for t in tensors:
        if not isinstance(t, str) or t not in decls:
            raise PolycError(f"pc.returning: {t!r} is not a tensor of kernel {k.name!r}; its intermediates are "
                             f"{', '.join(temps) or 'none'}")
        if decls[t].role == "input":
            raise PolycError(f"pc.returning: {t!r} is an input of kernel {k.name!r}; only values it computes "
                             f"can be returned")
        if decls[t].role == "temp" and k.function is not None:
            raise PolycError(f"pc.returning: {t!r} is a local scalar of loop kernel {k.name!r}; write it to an "
                             f"array parameter to return it")
    names = set(tensors)
    program = k.source_program.with_(tensors=tuple(
        replace(d, role="output") if d.name in names and d.role == "temp" else d for d in k.source_program.tensors))
    return Kernel(program, function=k.function)


#: Named schedules that packages above the API provide: name -> resolver(kernel, target) giving a
#: Schedule, or None to fall back to "auto".  `polyc.tune` registers "tuned" (the best tuning
#: record), so the API needs no import of the tuner, which itself compiles through the API.
NAMED_SCHEDULES: Dict[str, Callable[[Kernel, Target], Optional[Schedule]]] = {}


def _expanded_for_auto(k: Kernel) -> Kernel:
    """`k`, or the kernel `"auto"` compiles instead: with a temporary that outer loops reuse expanded
    where that makes a statement a contraction (`polyc.schedule.expansion`; same parameters, same
    results).  `expansion_notes` on the result says what was expanded.  Decided once per kernel."""
    with k._lock:
        if not hasattr(k, "_auto_kernel"):
            from .schedule.expansion import expand_for_contraction
            program, notes = expand_for_contraction(k.program)
            if notes:
                expanded = Kernel(program, k.function)
                expanded.expansion_notes = notes  # type: ignore[attr-defined]
                k._auto_kernel = expanded  # type: ignore[attr-defined]
            else:
                k._auto_kernel = k  # type: ignore[attr-defined]
        return k._auto_kernel  # type: ignore[attr-defined]


def _resolve_schedule(k: Kernel, schedule: Union[Schedule, str, None], target: Target,
                      reassociate: Optional[bool] = None) -> Schedule:
    if target.is_gpu:
        # On a GPU every schedule is mapped by the scheduler unless the user mapped it: "auto", the
        # default and an unmapped schedule all get `auto_gpu_schedule` (blocks/threads, tiled
        # shared-memory contractions, tree reductions); code generation prints what it says.
        from .schedule.auto_gpu import auto_gpu_schedule
        base = k.schedule() if schedule in (None, "source", "auto") else _resolve_schedule(k, schedule, Target.host())
        return auto_gpu_schedule(base, target, reassociate)
    if schedule is None or schedule == "source":
        return k.schedule()
    if isinstance(schedule, str):
        if schedule in NAMED_SCHEDULES:
            named = NAMED_SCHEDULES[schedule](k, target)   # None: nothing recorded (warned); "auto" instead
            if named is not None:
                return named
            schedule = "auto"
        if schedule == "auto":
            from .schedule.auto import auto_schedule
            return auto_schedule(k, target, reassociate=reassociate)
        raise PolycError(f"unknown schedule {schedule!r}; pass a Schedule, 'auto', 'tuned' or None")
    if not isinstance(schedule, Schedule):
        raise PolycError(f"schedule must be a Schedule, 'auto' or None, not {type(schedule).__name__}")
    if schedule.model is not k.model:
        raise PolycError("this schedule was made for another kernel; use kernel.schedule() of this kernel")
    # Proven again whatever made it (its primitives did; a mark set without one, `with_mark`, is
    # proven here): no schedule reaches code generation unproven.  Cheap: proofs are cached.
    from .schedule.rewrite import validate
    validate(schedule, "the schedule")
    return schedule


def _resolve_target(target: Union[str, Target, None]) -> Target:
    """The Target meant by `target`: "c" (`Target.host()`), "cuda" (`Target.cuda()` for the GPU
    found, else `sm_90`), "cuda-emu" (`Target.cuda_emu()`), a description
    (`Target.from_description`) or a Target itself; a `TargetError` for anything else."""
    return Target.resolve(target)


def _require_kernel(k: Any, what: str) -> None:
    """`k` is a polyc Kernel, else a PolycError saying what to pass instead."""
    if isinstance(k, Kernel):
        return
    if hasattr(k, "kernel") and isinstance(getattr(k, "kernel", None), Kernel):     # an operator program
        raise PolycError(f"{what} takes a kernel made by pc.kernel, not the operator program {k.name!r}: call the "
                         f"program itself (it compiles its fused groups), or pass {k.name}.kernel (all its "
                         f"statements as one kernel)")
    raise PolycError(f"{what} takes a kernel made by pc.kernel, not {type(k).__name__}")


def compile(k: Kernel, schedule: Union[Schedule, str, None] = None, *, target: Union[str, Target] = "c",
            flags: Optional[Sequence[str]] = None, openmp: bool = True,
            specialise: Optional[bool] = None, reassociate: Optional[bool] = None) -> "CompiledKernel":
    """Compile kernel `k` with `schedule` (source order by default, or "auto") for `target`.

    `target`: "c" (this machine, `pc.Target.host()`), "cuda", "cuda-emu", or a `pc.Target`
    (`pc.Target.host().with_(l2=256 * 1024)`): `schedule="auto"`, packing, the compiler command
    and the CUDA architecture are decided for that machine, whatever machine runs this.
    `flags` replaces the target's optimisation flags.
    `specialise` (C target): compile one variant per size class, with every size up to
    `polyc.runtime.ckernel.SMALL_SIZE` fixed to its value (default: on for `schedule="auto"`).
    `reassociate` (`schedule="auto"`): False keeps every reduction in its written order; True lets
    loop kernels' reductions be reassociated too (default: Einstein reductions only)."""
    _require_kernel(k, "pc.compile")
    tgt = _resolve_target(target)
    from .runtime.compiler import normalise_flags
    flags = normalise_flags(flags)  # a string is split like a shell would; anything else refused
    if schedule == "auto" and tgt.is_cpu:
        k = _expanded_for_auto(k)
    sched = _resolve_schedule(k, schedule, tgt, reassociate)
    if tgt.is_cpu:
        from .runtime.ckernel import CCompiledKernel
        return CCompiledKernel(k, sched, flags=flags, openmp=openmp,
                               specialise=(schedule == "auto") if specialise is None else specialise,
                               target=tgt)
    from .runtime.cuda import cuda_compiled_kernel
    return cuda_compiled_kernel(k, sched, target=tgt, flags=flags)


def codegen(k: Kernel, schedule: Union[Schedule, str, None] = None, *, target: Union[str, Target] = "c",
            dtypes: Optional[Mapping[str, DType]] = None, reassociate: Optional[bool] = None) -> str:
    """The generated source text for `target` ("c", "cuda" or a `pc.Target`); nothing is compiled.

    Undeclared dtypes come from `dtypes` (tensor name -> pc.f32, 'f32' or a numpy dtype), else float32.
    """
    _require_kernel(k, "pc.codegen")
    tgt = _resolve_target(target)
    if schedule == "auto" and tgt.is_cpu:
        k = _expanded_for_auto(k)
    sched = _resolve_schedule(k, schedule, tgt, reassociate)
    from .codegen.typing import resolve_typing
    from .ir.types import as_dtype
    passed = {name: as_dtype(d, f"dtype for {name!r}") for name, d in dict(dtypes or {}).items()}
    typing = resolve_typing(k.program, passed, require_inputs=False)
    if tgt.is_cpu:
        from .codegen.c import generate_c
        return generate_c(sched, typing).source
    from .codegen.cuda import generate_cuda
    return generate_cuda(sched, typing).source


CompiledKernel = Any  # the concrete classes live in polyc.runtime (C) and polyc.runtime.cuda
