"""Arrays from other libraries, seen through DLPack: numpy views of their host memory.

`host_view` turns a DLPack-capable host array (a PyTorch CPU tensor, a JAX CPU array) into a numpy
view of the same memory, so a kernel reads and writes it in place; `mark_written` tells PyTorch
afterwards which of its tensors a kernel changed.
"""
from __future__ import annotations

import sys
from typing import Any, Collection, Mapping

import numpy as np

from ..errors import ArgumentError


#: DLPack device types whose memory the CPU can address: CPU, CUDA host (pinned), ROCm host,
#: CUDA managed.  numpy's `from_dlpack` decides which of these it can view.
_HOST_DLPACK_DEVICES = {1: "CPU", 3: "CUDA host", 11: "ROCm host", 13: "CUDA managed"}


def host_view(name: str, value: Any) -> Any:
    """A numpy view of a DLPack-capable host array (PyTorch CPU tensors, JAX CPU arrays, CuPy
    pinned host memory, ...), sharing its memory: never a copy, so outputs passed this way are
    written in place.  numpy arrays, device arrays (`__cuda_array_interface__`, handled by the
    CUDA target) and non-arrays are returned unchanged for the usual checks.
    """
    if isinstance(value, np.ndarray) or not hasattr(value, "__dlpack__") \
            or hasattr(value, "__cuda_array_interface__"):
        return value
    try:
        kind = int(value.__dlpack_device__()[0])
    except Exception:  # noqa: BLE001 - no usable device query: let numpy try, and say so if it fails
        kind = 1
    if kind not in _HOST_DLPACK_DEVICES:
        raise ArgumentError(f"{name} is a {type(value).__name__} on DLPack device type {kind}, not in host "
                            f"memory; a CPU kernel reads host memory only: move it to the CPU first "
                            f"(e.g. {name}.cpu()), or pass a device array with __cuda_array_interface__ "
                            f"to a kernel compiled with target='cuda'")
    is_neg = getattr(value, "is_neg", None)
    if callable(is_neg) and is_neg():     # numpy's from_dlpack would drop the sign
        raise ArgumentError(f"{name} is a {type(value).__name__} with PyTorch's lazy negation bit set (a view "
                            f"such as x.conj().imag); pass {name}.resolve_neg()")
    try:
        try:
            return np.from_dlpack(value, copy=False)
        except TypeError:  # numpy < 2.1 has no `copy`; on the CPU it never copies
            return np.from_dlpack(value)
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        raise ArgumentError(f"{name}: cannot view the {type(value).__name__} through DLPack without a copy "
                            f"({type(e).__name__}: {e}); pass a numpy array, e.g. np.asarray({name})") from None


def mark_written(kwargs: Mapping[str, Any], written: Collection[str]) -> None:
    """Tell PyTorch that the tensors passed for written arrays changed: a write through the DLPack
    view does not bump a tensor's version counter, so autograd would use a saved tensor the kernel
    overwrote (`y = x.exp()` saves `y`) without the error an in-place torch op raises."""
    torch = sys.modules.get("torch")
    increment = getattr(getattr(getattr(torch, "autograd", None), "graph", None), "increment_version", None)
    if increment is None:
        return
    for name in written:
        value = kwargs.get(name)
        if value is not None and isinstance(value, torch.Tensor):
            increment(value)


def contiguous_hint(name: str, original: Any) -> str:
    """How the caller makes `original` (as passed) C-contiguous: in its own library's terms."""
    if hasattr(original, "__dlpack__") and not isinstance(original, np.ndarray) and hasattr(original, "contiguous"):
        return f"{name}.contiguous()"          # PyTorch
    return f"np.ascontiguousarray({name})"
