"""Vector math from glibc's libmvec: SIMD `exp`, `log`, `sin`, `cos`, `tanh`, `pow` in vector loops.

GCC vectorises a loop that calls `expf` only when it knows SIMD versions exist; glibc's headers
declare them only under `-ffast-math`, which polyc never uses (it would change far more than math
calls).  Instead the generated C declares them itself (`#pragma omp declare simd` on each function,
guarded by `POLYC_VMATH_<fn>`), and the compile command defines those macros and links libmvec for
the functions this machine's libmvec provides in every x86 ISA variant (SSE, AVX, AVX2, AVX-512).

libmvec's functions are accurate to 4 ulp (glibc's scalar ones to 1); numpy's SIMD loops make the
same trade.  `POLYC_VECTOR_MATH=0` turns this off.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import platform
from typing import Tuple

from ..codegen.c import VECTOR_MATH_FUNCTIONS as FUNCTIONS

#: Candidate functions and their vector ABI argument letters (`FUNCTIONS`): the generated C declares
#: them, so the list lives with the code generator.
#: x86 vector ABI ISA letters with (float lanes, double lanes).
_ISAS = {"b": (4, 2), "c": (8, 4), "d": (8, 4), "e": (16, 8)}


def _symbols(fn: str, args: str):
    for isa, (f_lanes, d_lanes) in _ISAS.items():
        yield f"_ZGV{isa}N{f_lanes}{args}_{fn}f"
        yield f"_ZGV{isa}N{d_lanes}{args}_{fn}"


@functools.lru_cache(maxsize=1)
def available() -> Tuple[str, ...]:
    """The functions whose SIMD versions this machine's libmvec has in every variant (x86-64 only)."""
    if os.environ.get("POLYC_VECTOR_MATH", "1") == "0" or platform.machine() not in ("x86_64", "AMD64"):
        return ()
    name = ctypes.util.find_library("mvec")
    if not name:
        return ()
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return ()
    return tuple(fn for fn, args in FUNCTIONS.items() if all(hasattr(lib, s) for s in _symbols(fn, args)))


def compile_flags() -> Tuple[str, ...]:
    """`-D` flags enabling the generated declarations of the available functions."""
    return tuple(f"-DPOLYC_VMATH_{fn}" for fn in available())


def link_flags(flags: Tuple[str, ...]) -> Tuple[str, ...]:
    """`-lmvec` when the flags enable any vector math function."""
    return ("-lmvec",) if any(f.startswith("-DPOLYC_VMATH_") for f in flags) else ()
