"""Element types and declared tensor types (`pc.f32["M", "K"]`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from ..errors import ArgumentError
from .affine import Affine


@dataclass(frozen=True)
class DType:
    """A scalar element type: its polyc name, its C spelling and its numpy dtype."""

    name: str
    c_name: str
    is_float: bool
    bits: int
    numpy_name: str

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(self.numpy_name)

    def __getitem__(self, shape) -> "TensorType":
        """`pc.f32["M", "K"]` declares a tensor type with symbolic (or integer) sizes."""
        return TensorType(self, tensor_shape(shape))

    def __call__(self, *shape) -> "TensorType":
        return self[tuple(shape)]

    def __repr__(self) -> str:
        return f"pc.{self.name}"


f32 = DType("f32", "float", True, 32, "float32")
f64 = DType("f64", "double", True, 64, "float64")
i32 = DType("i32", "int32_t", False, 32, "int32")
i64 = DType("i64", "int64_t", False, 64, "int64")

u8 = DType("u8", "uint8_t", False, 8, "uint8")     # image pixels
u16 = DType("u16", "uint16_t", False, 16, "uint16")

DTYPES = {d.name: d for d in (f32, f64, i32, i64, u8, u16)}


def dtype_of_numpy(dt: np.dtype) -> Optional[DType]:
    """The polyc element type for a numpy dtype, or None when polyc has no such type."""
    for d in DTYPES.values():
        if d.numpy == dt:
            return d
    return None


def as_dtype(value: object, what: str = "dtype") -> DType:
    """The element type named by `value`: a `DType`, a polyc name ('f32'), or a numpy dtype or its
    name ('float32', np.float32).  Anything else raises `ArgumentError` listing the accepted names:
    one place where user-written type names are checked, never looked up as attributes."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in DTYPES:
        return DTYPES[value]
    found = None
    if isinstance(value, (str, np.dtype, type)):
        try:
            found = dtype_of_numpy(np.dtype(value))
        except TypeError:
            found = None
    if found is None:
        names = ", ".join(DTYPES)
        raise ArgumentError(f"unknown {what} {value!r}; use one of {names} (or the numpy dtype of one)")
    return found


def promote(a: DType, b: DType) -> DType:
    """Result type of a binary arithmetic operation.

    The rule is written down once here: operands of the same type give that type; mixing two float
    types or two integer types gives the wider one; integer with float gives the float type.  Literals
    are typed separately (they adopt the other operand's type), so `0.5 * A` stays float32 for an
    float32 `A`.  Nothing is cast silently at the kernel boundary: array dtypes must match exactly.
    """
    if a == b:
        return a
    if a.is_float and b.is_float:
        return a if a.bits >= b.bits else b
    if a.is_float:
        return a
    if b.is_float:
        return b
    return a if a.bits >= b.bits else b


def promote_numpy(a: DType, b: DType) -> DType:
    """numpy's result type of a binary operation on two numpy scalars or arrays (not Python
    literals): as `promote`, except that a 32- or 64-bit integer with float32 gives float64
    (`np.int32(1) * np.float32(1)` is a float64), as no float32 holds every such integer.  Loop
    kernels compute with numpy's values, so they promote this way."""
    if a.is_float != b.is_float:
        flt, integer = (a, b) if a.is_float else (b, a)
        if flt.bits == 32 and integer.bits >= 32:
            return f64
    return promote(a, b)


@dataclass(frozen=True)
class TensorType:
    """A declared tensor type: element type plus shape (affine in size symbols); rank 0 is a scalar.

    `dtype=None` declares the shape only (`pc.tensor["N", "C"]`): the element type then comes from
    the arrays of each call, so one kernel serves float32 and float64.
    """

    dtype: Optional[DType]
    shape: Tuple[Affine, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        head = f"pc.{self.dtype.name}" if self.dtype is not None else "pc.tensor"
        return f"{head}[{', '.join(repr(str(s)) for s in self.shape)}]"


def tensor_shape(shape) -> Tuple[Affine, ...]:
    """The extents of `pc.f32[...]` / `pc.tensor[...]`: each an integer or an affine expression of
    sizes written as a string (`"N"`, `"2*H + 1"`); anything else is refused with `ArgumentError`."""
    out = []
    for extent in shape if isinstance(shape, tuple) else (shape,):
        if isinstance(extent, str):
            try:
                out.append(Affine.parse(extent))
            except ValueError:
                raise ArgumentError(f"tensor extent {extent!r} is not an affine expression of sizes "
                                    f"(write e.g. 'N', '2*H + 1' or an integer)") from None
        elif isinstance(extent, (int, np.integer)) and not isinstance(extent, (bool, np.bool_)):
            if extent < 1:
                raise ArgumentError(f"tensor extent {int(extent)} must be at least 1 (an extent that "
                                    f"is 0 at some call is a size: write it as a name, 'N')")
            out.append(Affine.const(int(extent)))
        else:
            raise ArgumentError(f"tensor extent {extent!r} must be an integer or a string naming sizes "
                                f"(pc.f32['N', 'C']); the element type goes before the brackets")
    return tuple(out)


class _ShapeOnly:
    """`pc.tensor["N", "C"]`: a tensor declaration fixing the shape and leaving the dtype open."""

    def __getitem__(self, shape) -> TensorType:
        return TensorType(None, tensor_shape(shape))

    def __repr__(self) -> str:
        return "pc.tensor"


tensor = _ShapeOnly()

