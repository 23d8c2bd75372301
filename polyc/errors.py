"""The typed errors polyc raises.  Every failure a user can cause derives from `PolycError`.

Messages are written for the person who wrote the kernel: they name the statement, the array and
the source position, and say what to change, rather than describing compiler internals.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class SourceLocation:
    """A position in user source: `line` and `column` are 1-based; `text` is the whole line."""

    line: int
    column: int
    text: str = ""
    filename: str = "<kernel>"

    def caret(self) -> str:
        """The source line with a caret under the column (empty when the text is unknown)."""
        if not self.text:
            return ""
        return f"    {self.text}\n    {' ' * (self.column - 1)}^"

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.column}"


class PolycError(Exception):
    """Base class of every error polyc raises on bad input."""


class ParseError(PolycError):
    """Kernel text or a Python loop kernel that polyc cannot read; carries line, column and a caret."""

    def __init__(self, message: str, location: Optional[SourceLocation] = None):
        self.location = location
        self.line = location.line if location else None
        self.column = location.column if location else None
        self.reason = message
        text = message
        if location is not None:
            text = f"{location}: {message}"
            caret = location.caret()
            if caret:
                text += "\n" + caret
        super().__init__(text)


class ShapeInferenceError(ParseError):
    """An index range or tensor shape that cannot be inferred and must be stated (`where`)."""


class LiteralRangeError(ParseError):
    """An integer literal that does not fit the integer type it takes in its expression."""

    def __init__(self, message: str, location: Optional[SourceLocation] = None, literal: Optional[int] = None,
                 dtype: object = None):
        self.literal = literal
        self.dtype = dtype
        super().__init__(message, location)


class ExpressionTooDeepError(ParseError):
    """An expression nested deeper than polyc's documented limit (`polyc.ir.depth.MAX_EXPRESSION_DEPTH`)."""


class OutOfBoundsError(PolycError):
    """isl proved that an access can leave its tensor for some valid sizes."""


class UninitializedReadError(PolycError):
    """A statement reads an intermediate element that no earlier statement writes."""


class IllegalScheduleError(PolycError):
    """A transformation would reverse a dependence; names the dependence and a violating pair."""

    def __init__(self, message: str, dependence: object = None):
        self.dependence = dependence
        super().__init__(message)


class ArgumentError(PolycError, TypeError):
    """Arrays or scalars passed at call time that do not fit the kernel (shape, dtype, layout, device)."""


class CompileError(PolycError):
    """The system compiler rejected generated code; keeps the source and the compiler's message."""

    def __init__(self, message: str, source: str = "", compiler_output: str = "", command: str = ""):
        self.source = source
        self.compiler_output = compiler_output
        self.command = command
        super().__init__(message)


class IslBudgetError(PolycError):
    """An isl computation exceeded polyc's operation budget (instead of hanging)."""


class TargetUnavailableError(PolycError):
    """The requested target (e.g. CUDA) cannot run here: no driver, no GPU, or pycuda missing."""


class ScheduleArgumentError(PolycError, ValueError):
    """A schedule primitive got an integer argument that is not a plain int or is out of range
    (one that could overflow the generated code's 64-bit loop arithmetic); `.argument` names it."""

    def __init__(self, message: str, argument: str = ""):
        self.argument = argument
        super().__init__(message)


class ScheduleFileError(PolycError):
    """A saved schedule (`Schedule.from_json`) that is malformed, tampered with, or not provably a
    correct schedule of this kernel; `.where` is the place in the file (e.g. `dims[3].name`)."""

    def __init__(self, message: str, where: str = ""):
        self.where = where
        super().__init__(f"saved schedule, {where}: {message}" if where else f"saved schedule: {message}")


class CompileFlagsError(PolycError, ValueError):
    """Compiler flags polyc refuses: not a string or a sequence of strings, or flags that would
    change where or what the compiler writes (`-o`, `-c`, `-E`, ...) and so break the cache."""


class CacheError(PolycError):
    """Neither the configured cache directory nor a private fallback directory can be used."""


class PolycWarning(UserWarning):
    """Base class of the warnings polyc emits."""


class CacheWarning(PolycWarning):
    """The compiled-kernel cache fell back to a private directory or refused an entry."""


class NameClashError(PolycError, ValueError):
    """A name given to a new loop (`split(..., outer="K")`) that the kernel already uses for a loop,
    an index, a size, a scalar or a tensor: it would change what that name means."""


class LoopGenerationError(PolycError):
    """isl generated loops that would not run every statement instance exactly once (a defect of
    isl's code generation, caught by polyc's check of the generated loops); nothing is compiled."""


class TargetError(PolycError, ValueError):
    """A `pc.Target` (or a saved or described one) that polyc refuses: an unknown kind, a field of
    the wrong type or out of range, unsafe compiler flags; `.field` names the field at fault."""

    def __init__(self, message: str, field: str = ""):
        self.field = field
        super().__init__(f"target field {field!r}: {message}" if field else message)


class GradError(PolycError):
    """A kernel `pc.grad` cannot differentiate: a non-invertible or non-affine read, a value the
    gradient needs that the kernel overwrites, a non-differentiable operation.  The message names
    the statement, the array and the source line, and says what would make it differentiable."""


class TuneError(PolycError):
    """Autotuning could not run as asked (bad arguments, no candidate could be measured)."""


class TuneRecordError(TuneError):
    """A tuning record (database row or imported JSON line) is malformed or tampered with; says where."""

    def __init__(self, message: str, where: str = ""):
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class PackingDroppedWarning(PolycWarning):
    """A primitive applied after `Schedule.pack` changed a packed statement's loops, so the packed
    code for it is no longer generated (it runs as ordinary loops).  Pack last, or pack again."""


class TuningWarning(PolycWarning):
    """`schedule="tuned"` found no usable tuning record and used `"auto"` instead."""


class ProgramError(PolycError):
    """A `@pc.program` that cannot be traced (a shape mismatch between operators, a tensor used
    before it is produced, a call of something that is not a polyc kernel); `.location` is the
    line of the program function where it happened."""

    def __init__(self, message: str, location: Optional[SourceLocation] = None):
        self.location = location
        self.reason = message
        text = f"{location}: {message}" if location is not None else message
        if location is not None and location.text:
            text += f"\n    {location.text.strip()}"
        super().__init__(text)


class ReferenceFailedError(PolycError):
    """`kernel.reference` of a loop kernel ran the kernel's Python code, and Python refused a value
    the compiled kernel computes anyway (`int(nan)`, a Python int out of a uint8's range, a
    division by zero): the two do not agree on such inputs.  Carries the line of the kernel."""


class NotPicklableError(PolycError, TypeError):
    """An object polyc cannot send to another process (a compiled kernel, a schedule, an operator
    program): the message says what to send instead."""


def not_picklable(what: str, instead: str) -> NotPicklableError:
    """The error `__reduce__` raises for `what`, naming what a worker should be sent instead."""
    return NotPicklableError(f"{what} cannot be pickled (it holds compiled code or isl objects of this "
                             f"process); send {instead} instead")
