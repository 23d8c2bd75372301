"""polyc: a polyhedral loop optimizer you drive from Python.

Write a kernel in Einstein notation or as affine Python loops, inspect its exact dependences,
transform it with schedules that are proven legal, and run generated C (OpenMP + SIMD) or CUDA
on numpy arrays.  This module only re-exports the public API.
"""
from . import codegen as _codegen_package  # noqa: F401  (load it first: see below)
from .api import Kernel, codegen, compile, kernel, returning
from .errors import (ArgumentError, CompileError, IllegalScheduleError, IslBudgetError, NameClashError,
                     OutOfBoundsError, ParseError, PolycError, ShapeInferenceError, TargetUnavailableError,
                     UninitializedReadError)
from .errors import ExpressionTooDeepError, GradError, LiteralRangeError, NotPicklableError, ReferenceFailedError, TargetError
from .errors import (CacheError, CacheWarning, CompileFlagsError, LoopGenerationError, PackingDroppedWarning,
                     PolycWarning, ProgramError, ScheduleArgumentError, ScheduleFileError, TuneError,
                     TuneRecordError, TuningWarning)
from .grad import grad
from .ir import DType, TensorType, f32, f64, i32, i64, u8, u16, tensor, stop_gradient
from .schedule import Schedule
from . import viz as _viz  # noqa: F401  (registers the Jupyter views the values' _repr_html_ look up)
from .target import Target
from .schedule import auto as _auto, auto_gpu as _auto_gpu  # noqa: F401,E402  (register the re-derivers of saved automatic schedules: serialize.REDERIVERS)
from . import tune  # noqa: E402  (a callable module: pc.tune(kernel, sizes, ...); see polyc.tune)
from .program.program import program

# The subpackage `polyc.codegen` and the function `pc.codegen` share a name.  Loading the
# subpackage binds it on this module, so it is loaded above and then the public function is bound
# last; later imports of its submodules do not rebind the name.
codegen = codegen  # noqa: PLW0127

__version__ = "0.1.0"

__all__ = [
    "kernel", "compile", "program", "codegen", "Kernel", "Schedule", "Target", "TargetError",
    "f32", "f64", "i32", "i64", "u8", "u16", "tensor", "DType", "TensorType",
    "PolycError", "ParseError", "ShapeInferenceError", "OutOfBoundsError", "UninitializedReadError",
    "IllegalScheduleError", "ArgumentError", "CompileError", "IslBudgetError", "TargetUnavailableError",
    "NameClashError", "LiteralRangeError", "ExpressionTooDeepError", "ReferenceFailedError", "NotPicklableError", "grad", "GradError", "tune",
    "stop_gradient", "returning", "ScheduleArgumentError", "ScheduleFileError", "CompileFlagsError",
    "CacheError", "LoopGenerationError", "TuneError", "TuneRecordError", "ProgramError",
    "PolycWarning", "CacheWarning", "PackingDroppedWarning", "TuningWarning",
]
