"""Device arrays at the kernel boundary: reading `__cuda_array_interface__` and checking it.

Anything exposing `__cuda_array_interface__` (pycuda `GPUArray`, CuPy, PyTorch CUDA tensors)
is passed to a "cuda" kernel without copies.  polyc needs what the C side relies on: a supported
element type, C-contiguous layout, no mask, a non-null pointer for non-empty arrays, memory on the
GPU (not the CPU), and writability for arrays the kernel writes.  Violations raise `ArgumentError`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from ..errors import ArgumentError
from ..ir import DType, Program, dtype_of_numpy

_WRITTEN_ROLES = ("output", "inout")


@dataclass(frozen=True)
class DeviceArray:
    """A checked device array: shape, dtype, data pointer, and the object itself."""

    name: str
    obj: Any
    shape: Tuple[int, ...]
    dtype: DType
    pointer: int
    readonly: bool

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.numpy.itemsize

    def stand_in(self) -> np.ndarray:
        """A host array of the same shape and dtype for size binding and shape checks.

        `np.empty` of a large shape maps pages lazily, so this costs no real memory.
        """
        out = np.empty(self.shape, dtype=self.dtype.numpy)
        if self.readonly:
            out.flags.writeable = False
        return out


def is_device_array(value: Any) -> bool:
    """True for objects that expose `__cuda_array_interface__` (and are not numpy arrays)."""
    if isinstance(value, np.ndarray):
        return False
    try:
        return hasattr(value, "__cuda_array_interface__")
    except Exception:  # noqa: BLE001 - torch raises on CPU tensors; that is "not a device array"
        return False


def _device_kind(value: Any) -> Optional[str]:
    """The device type a framework reports ("cuda", "cpu", ...), when it reports one."""
    dev = getattr(value, "device", None)
    kind = getattr(dev, "type", None)
    return str(kind) if kind is not None else None


def device_array(name: str, value: Any, *, device_ordinal: Optional[int] = None) -> DeviceArray:
    """Read and check the `__cuda_array_interface__` of `value` (argument `name`)."""
    kind = _device_kind(value)
    if kind is not None and kind != "cuda":
        raise ArgumentError(f"{name} lives on device {kind!r}, but a CUDA kernel needs GPU memory; "
                            f"move it with {name}.cuda() / {name}.to('cuda'), or pass a numpy array")
    try:
        cai = value.__cuda_array_interface__
    except Exception as e:  # noqa: BLE001
        raise ArgumentError(f"{name}: cannot read its __cuda_array_interface__ ({e}); pass a GPU array "
                            f"(CuPy, PyTorch CUDA tensor, pycuda GPUArray) or a numpy array") from e
    if not isinstance(cai, Mapping) or "shape" not in cai or "typestr" not in cai or "data" not in cai:
        raise ArgumentError(f"{name}: its __cuda_array_interface__ lacks shape, typestr or data")
    shape = tuple(int(s) for s in cai["shape"])
    try:
        np_dtype = np.dtype(cai["typestr"])
    except TypeError as e:
        raise ArgumentError(f"{name}: unknown element type {cai['typestr']!r} in __cuda_array_interface__") from e
    dtype = dtype_of_numpy(np_dtype)
    if dtype is None:
        raise ArgumentError(f"{name} has dtype {np_dtype}, which polyc kernels do not support "
                            f"(float32, float64, int32, int64); convert it on the device first")
    if cai.get("mask") is not None:
        raise ArgumentError(f"{name} is a masked device array; polyc kernels ignore masks, pass plain data")
    strides = cai.get("strides")
    if strides is not None and any(s > 1 for s in shape):
        expected, acc = [], np_dtype.itemsize
        for s in reversed(shape):
            expected.append(acc)
            acc *= max(s, 1)
        expected.reverse()
        if any(st != ex for st, ex, n in zip(strides, expected, shape) if n > 1):
            raise ArgumentError(f"{name} is not C-contiguous on the device (strides {tuple(strides)}, "
                                f"shape {shape}); make it contiguous first, e.g. {name}.contiguous() "
                                f"(PyTorch) or cupy.ascontiguousarray({name})")
    data = cai["data"]
    pointer, readonly = int(data[0]), bool(data[1])
    if pointer == 0 and int(np.prod(shape, dtype=np.int64)) > 0:
        raise ArgumentError(f"{name} has a null device pointer")
    if device_ordinal is not None:
        index = getattr(getattr(value, "device", None), "index", None)
        if index is None:
            index = getattr(getattr(value, "device", None), "id", None)
        if index is not None and int(index) != device_ordinal:
            raise ArgumentError(f"{name} is on GPU {index} but the kernel runs on GPU {device_ordinal}; "
                                f"copy it there first")
    return DeviceArray(name, value, shape, dtype, pointer, readonly)


def split_arguments(program: Program, kwargs: Mapping[str, Any], *,
                    device_ordinal: Optional[int] = None) -> Tuple[Dict[str, DeviceArray], Dict[str, Any]]:
    """Device arrays (checked) and the remaining keyword arguments (numpy arrays, sizes, scalars)."""
    tensors = {t.name: t for t in program.tensors}
    device: Dict[str, DeviceArray] = {}
    rest: Dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in tensors and is_device_array(value):
            arr = device_array(key, value, device_ordinal=device_ordinal)
            if tensors[key].role in _WRITTEN_ROLES and arr.readonly:
                raise ArgumentError(f"{key} is a read-only device array but the kernel writes it "
                                    f"(role {tensors[key].role})")
            device[key] = arr
        else:
            rest[key] = value
    _check_device_aliasing(program, device)
    return device, rest


def _check_device_aliasing(program: Program, device: Mapping[str, DeviceArray]) -> None:
    roles = {t.name: t.role for t in program.tensors}
    names = list(device)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if roles[a] not in _WRITTEN_ROLES and roles[b] not in _WRITTEN_ROLES:
                continue
            x, y = device[a], device[b]
            if x.nbytes and y.nbytes and x.pointer < y.pointer + y.nbytes and y.pointer < x.pointer + x.nbytes:
                raise ArgumentError(f"{a} and {b} overlap in device memory, but the kernel writes "
                                    f"{a if roles[a] in _WRITTEN_ROLES else b}; pass separate arrays")
