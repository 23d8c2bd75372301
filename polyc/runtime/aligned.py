"""Arrays that start on a cache-line boundary.

numpy aligns the data it allocates to 16 bytes only, so a 64-byte vector load or store of such an
array straddles two cache lines every time.  On this project's AVX-512 machine that cost a layernorm
backward 2048x1024 a sixth of its time (0.61 ms with its 8 MiB output 64-byte aligned against
0.71-0.73 ms from `np.empty`); PyTorch's allocator aligns to 64 bytes too.  Arrays polyc makes
(kernel outputs, temps, a program's buffers) are therefore 64-byte aligned past `ALIGN_FROM`
bytes.  An aligned array costs about a microsecond more to make than `np.empty`'s 0.2: below
256 KiB that is a noticeable part of the kernel's time (matmul 128^3: 23 us, its output 64 KiB).
"""
from __future__ import annotations

import ctypes
from typing import Tuple

import numpy as np

#: Cache line, and the widest vector (AVX-512).
ALIGNMENT = 64
#: Arrays of fewer bytes come straight from numpy.
ALIGN_FROM = 1 << 18


def aligned_bytes(n: int, zero: bool = False) -> np.ndarray:
    """`n` bytes starting on a cache line (zero-filled with `zero`), whatever `n`."""
    return _aligned((n,), np.dtype(np.uint8), n, zero)


def aligned_empty(shape: Tuple[int, ...], dtype, zero: bool = False) -> np.ndarray:
    """`np.empty(shape, dtype)` (`np.zeros` with `zero`) starting on a cache line when it is large."""
    dtype = np.dtype(dtype)
    n = dtype.itemsize
    for d in shape:
        n *= d
    if n < ALIGN_FROM:
        return (np.zeros if zero else np.empty)(shape, dtype=dtype)
    return _aligned(shape, dtype, n, zero)


def _aligned(shape: Tuple[int, ...], dtype: np.dtype, n: int, zero: bool) -> np.ndarray:
    """An array of `shape` and `dtype` (`n` bytes) in fresh memory, starting on a cache line."""
    raw = (np.zeros if zero else np.empty)(n + ALIGNMENT, dtype=np.uint8)
    return np.ndarray(shape, dtype, buffer=raw, offset=-_address(raw) % ALIGNMENT)


def _address(raw: np.ndarray) -> int:
    """The address of a fresh (writable) array's data, through the buffer protocol (a quarter of
    `raw.ctypes.data`'s cost)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(raw))
