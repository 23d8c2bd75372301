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

    - kind "array": `<ctype> *restrict d_<name>` (the tensor's element type is `dtype`);
    - kind "size": `int64_t n_<name>` (a size symbol; `dtype` should be `i64`);
    - kind "scalar": `<ctype> s_<name>` (`float`, `double`, `int32_t` or `int64_t`).

    `name` is the user's name (arguments bind by it); `c_name` is its C identifier.
    """

    name: str
    kind: str
    dtype: DType

    def __post_init__(self) -> None:
        if self.kind not in PARAM_KINDS:
            raise ValueError(f"kernel parameter {self.name!r}: kind must be one of {PARAM_KINDS}, got {self.kind!r}")

    @property
    def c_name(self) -> str:
        """The C identifier of this parameter: the user's name mangled by kind (`d_A` for tensor A's
        data pointer, `n_N`, `s_alpha`; see polyc.codegen.names), never a C keyword or macro."""
        from ..codegen.names import DATA, SCALAR, SIZE, mangle
        return mangle({"array": DATA, "size": SIZE, "scalar": SCALAR}[self.kind], self.name)

    def c_type(self) -> str:
        """The C type of this parameter as a function-pointer prototype spells it (`float *`)."""
        if self.kind == "array":
            return f"{self.dtype.c_name} *"
        return "int64_t" if self.kind == "size" else self.dtype.c_name

    def c_declaration(self) -> str:
        """The C spelling of this parameter, e.g. `float *restrict d_A` or `int64_t n_N`."""
        if self.kind == "array":
            return f"{self.dtype.c_name} *restrict {self.c_name}"
        if self.kind == "size":
            return f"int64_t {self.c_name}"
        return f"{self.dtype.c_name} {self.c_name}"


@dataclass(frozen=True)
class KernelSignature:
    """The generated C function: its exported `symbol` and its parameters in order."""

    symbol: str
    params: Tuple[KernelParam, ...]

    def c_prototype(self) -> str:
        """`void symbol(float *restrict d_A, int64_t n_N)` (without the trailing semicolon)."""
        args = ", ".join(p.c_declaration() for p in self.params) or "void"
        return f"void {self.symbol}({args})"

    def param(self, name: str) -> KernelParam:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)
