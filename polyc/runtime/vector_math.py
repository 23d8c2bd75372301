"""Vector math from glibc's libmvec: SIMD `exp`, `log`, `sin`, `cos`, `tanh`, `pow` in vector loops.

GCC vectorises a loop that calls `expf` only when it knows SIMD versions exist; glibc's headers
declare them only under `-ffast-math`, which polyc never uses (it would change far more than math
calls).  Instead the generated C declares them itself (`#pragma omp declare simd` on each function,
guarded by `POLYC_VMATH_<fn>`), and the compile command defines those macros and links libmvec for
the functions the `Target` has (feature `libmvec:<fn>`; `Target.host()` finds the ones this
machine's libmvec provides in every x86 ISA variant, SSE to AVX-512).

libmvec's functions are accurate to 4 ulp (glibc's scalar ones to 1); numpy's SIMD loops make the
same trade.  `POLYC_VECTOR_MATH=0` turns this off for the host target.
"""
from __future__ import annotations

from typing import Optional, Tuple

from ..target import MVEC_FUNCTIONS, Target

#: Candidate functions and their vector ABI argument letters (one `v` per vector argument).
FUNCTIONS = MVEC_FUNCTIONS


def available(target: Optional[Target] = None) -> Tuple[str, ...]:
    """The functions the generated C may call in vector loops on `target` (default: the host)."""
    return (Target.host() if target is None else target).vector_math


def compile_flags(target: Optional[Target] = None) -> Tuple[str, ...]:
    """`-D` flags enabling the generated declarations of the target's vector math functions."""
    return tuple(f"-DPOLYC_VMATH_{fn}" for fn in available(target))


def link_flags(flags: Tuple[str, ...]) -> Tuple[str, ...]:
    """`-lmvec` when the flags enable any vector math function."""
    return ("-lmvec",) if any(f.startswith("-DPOLYC_VMATH_") for f in flags) else ()
