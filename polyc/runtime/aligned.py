"""Arrays that start on a cache-line boundary.

numpy aligns the data it allocates to 16 bytes only, so a 64-byte vector load or store of such an
array straddles two cache lines every time.  On this project's AVX-512 machine that cost a layernorm
backward 2048x1024 a sixth of its time (0.61 ms with its 8 MiB output 64-byte aligned against
0.71-0.73 ms from `np.empty`); PyTorch's allocator aligns to 64 bytes too.  Arrays polyc makes
(kernel outputs, temps, a program's buffers) are therefore 64-byte aligned past `ALIGN_FROM`
bytes; below it the view's extra Python costs more than the loads it saves.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

#: Cache line, and the widest vector (AVX-512).
ALIGNMENT = 64
#: Arrays of fewer bytes come straight from numpy.
ALIGN_FROM = 4096


def aligned_bytes(n: int, alignment: int = ALIGNMENT, zero: bool = False) -> np.ndarray:
    """`n` bytes starting on an `alignment` boundary (zero-filled with `zero`)."""
    raw = (np.zeros if zero else np.empty)(n + alignment, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + n]


def aligned_empty(shape: Tuple[int, ...], dtype, zero: bool = False) -> np.ndarray:
    """`np.empty(shape, dtype)` (`np.zeros` with `zero`) starting on a cache line when it is large."""
    dtype = np.dtype(dtype)
    n = dtype.itemsize
    for d in shape:
        n *= d
    if n < ALIGN_FROM:
        return (np.zeros if zero else np.empty)(shape, dtype=dtype)
    return aligned_bytes(n, zero=zero).view(dtype).reshape(shape)
