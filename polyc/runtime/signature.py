"""The C-level calling convention shared by the code generator and the runtime.

A `KernelSignature` is the contract between the two: the code generator emits
`void <symbol>(<params...>)` with exactly these parameters in this order, and the runtime binds
the user's call to them (`BoundCall.c_args`) and declares them to ctypes (`load_function`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from ..ir import DType

#: The kinds of kernel parameter: a pointer to tensor data, an integer size symbol, a scalar value.
PARAM_KINDS = ("array", "size", "scalar")


@dataclass(frozen=True)
class KernelParam:
    """One parameter of the generated C function.

    - kind "array": `<ctype> *restrict name` (the tensor's element type is `dtype`);
    - kind "size": `int64_t name` (a size symbol; `dtype` should be `i64`);
    - kind "scalar": `<ctype> name` (`float`, `double`, `int32_t` or `int64_t`).
    """

    name: str
    kind: str
    dtype: DType

    def __post_init__(self) -> None:
        if self.kind not in PARAM_KINDS:
            raise ValueError(f"kernel parameter {self.name!r}: kind must be one of {PARAM_KINDS}, got {self.kind!r}")

    def c_declaration(self) -> str:
        """The C spelling of this parameter, e.g. `float *restrict A` or `int64_t N`."""
        if self.kind == "array":
            return f"{self.dtype.c_name} *restrict {self.name}"
        if self.kind == "size":
            return f"int64_t {self.name}"
        return f"{self.dtype.c_name} {self.name}"


@dataclass(frozen=True)
class KernelSignature:
    """The generated C function: its exported `symbol` and its parameters in order."""

    symbol: str
    params: Tuple[KernelParam, ...]

    def c_prototype(self) -> str:
        """`void symbol(float *restrict A, int64_t N)` (without the trailing semicolon)."""
        args = ", ".join(p.c_declaration() for p in self.params) or "void"
        return f"void {self.symbol}({args})"

    def param(self, name: str) -> KernelParam:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)
