"""Device-resident runs of an operator program on target "cuda": inputs go to the GPU once, the
memory plan's buffers and the outputs are device allocations, and every group's kernel reads and
writes them in place (its device-array path), so intermediates never cross PCIe.  Numpy inputs
give numpy outputs (copied back once at the end); device inputs (pycuda, CuPy, PyTorch: anything
with `__cuda_array_interface__`) give pycuda device arrays."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Tuple

import numpy as np

from ..errors import ArgumentError


def stand_in(name: str, value: Any) -> np.ndarray:
    """A host array with device array `value`'s shape and dtype (sizes and dtypes are read from
    it; its pages are never touched)."""
    from ..runtime.cuda_arrays import device_array
    return device_array(name, value).stand_in()


class DeviceMemory:
    """The GPU side of one call: inputs uploaded, plan buffers and outputs allocated."""

    def __init__(self, arrays: Mapping[str, Any]):
        from ..runtime.cuda_pycuda import import_driver
        import_driver()      # no pycuda, driver or GPU: TargetUnavailableError, as pc.compile says
        import pycuda.autoprimaryctx  # noqa: F401 - polyc's kernels run in the primary context
        from pycuda import gpuarray
        from ..runtime.cuda_arrays import is_device_array
        from ..runtime.cuda_pycuda import device_allocator
        self.gpuarray = gpuarray
        self.allocate = device_allocator()
        self.host_inputs = not any(is_device_array(a) for a in arrays.values())
        self.inputs: Dict[str, Any] = {
            name: a if is_device_array(a) else gpuarray.to_gpu(np.ascontiguousarray(a), allocator=self.allocate)
            for name, a in arrays.items()}

    def pool(self, slot_bytes) -> list:
        return [self.gpuarray.empty(max(int(n), 1), np.uint8, allocator=self.allocate) for n in slot_bytes]

    def empty(self, shape: Tuple[int, ...], dtype: np.dtype) -> Any:
        return self.gpuarray.empty(shape, dtype, allocator=self.allocate)

    @staticmethod
    def view(slot: Any, nbytes: int, shape: Tuple[int, ...], dtype: np.dtype) -> Any:
        return slot[:nbytes].view(dtype).reshape(shape)

    def result(self, value: Any) -> Any:
        """Outputs as the caller passed inputs: numpy for numpy inputs, device arrays otherwise."""
        if not self.host_inputs:
            return value
        if isinstance(value, dict):
            return {k: v.get() for k, v in value.items()}
        if isinstance(value, tuple):
            return tuple(v.get() for v in value)
        return value.get()


def check_device_inputs(target: str, name: str, value: Any) -> None:
    """Device arrays are for target "cuda" only."""
    if target != "cuda":
        raise ArgumentError(f"argument {name} is a GPU array, but the program runs on target {target!r}; "
                            f"pass a numpy array, or build the program with target='cuda'")
