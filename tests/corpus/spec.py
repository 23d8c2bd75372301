"""The record every corpus kernel is written as, and the causes its expected failures cite.

A `CorpusKernel` is data: the kernel as its author wrote it (Einstein text or an affine-Python loop
function), the declarations its source language states (Tensor Comprehensions' signature types,
TVM's placeholder shapes), inputs at small sizes, and an independent numpy reference for every
output.  The test module builds, compiles and runs it under each variant; nothing here imports
polyc's compiler, so a kernel that polyc refuses still imports cleanly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union

import numpy as np

#: Why a kernel fails on today's polyc.  Each is a cause the "tc" branch is fixing, except those
#: marked as gaps (reported, owned by nobody yet).
OUTPUTS_LOST = ("outputs lost: a tensor the source names as an output is read by a later "
                "statement (in-place update after a reduction, or a TC signature output reused), "
                "so polyc makes it an intermediate and never returns it")
NEGATIVE_OFFSETS = ("intermediates with negative offsets: a chained stencil's intermediate is "
                    "taken to cover [0, shape) instead of the region written, so a read at x - 1 "
                    "is refused as uninitialised")
CONSUMER_REGIONS = ("intermediate regions from what consumers need (issue item 2, Halide's bounds "
                    "inference): an index of a pure definition appears on no right-hand side")
UNDECLARED_RANGES = ("undeclared inputs with explicit ranges: the shape an undeclared input needs "
                     "is checked at definition time with an invented size instead of at call time")
QUASI_AFFINE = "strided/quasi-affine subscripts, ranges and `//`, `%` (floor division and modulo by constants)"
SELECT_GUARDS = "guards in select not restricting bounds: an affine select condition does not restrict its reads"
INDEX_AS_VALUE = "index used only as a value (no subscript uses it)"
MULTILINE = "multi-line statements (continuation lines) are not parsed"
UNSIGNED = "unsigned 8/16-bit types"
CLAMPED_SUBSCRIPTS = ("GAP (not in tc's list): clamped subscripts (Halide's repeat_edge, "
                      "min/max of affine terms) are piecewise affine but refused")

SHAPE_FROM_FIRST_WRITE = ("GAP (not in tc's list): a tensor written by several statements takes its shape "
                          "from the first one, so the second statement's writes are refused as out of bounds")
UNUSED_SIZE_INPUT = ("GAP (not in tc's list): an input declared only to name a size (TC's signature binds N from "
                     "S's shape) is refused as 'declared but never used'")

VARIANTS = ("source", "auto", "cuda-emu")

Inputs = Callable[[np.random.Generator], Dict[str, Any]]
Reference = Callable[..., Dict[str, np.ndarray]]


@dataclass(frozen=True)
class CorpusKernel:
    """One kernel of the corpus.

    `source` is Einstein text or a loop function (not yet decorated, so a refusal happens inside
    the test, not at import).  `outputs` are the outputs as the source language names them (TC's
    `-> (...)`, Halide's output Func, a loop kernel's written arrays).  `regions` maps an output to
    the slices (in the output's own coordinates) that the source defines, for Halide-style outputs
    whose domain does not start at 0; the reference then returns just that region.  `xfail` is a
    cause for every variant, or a mapping variant -> cause.  `refused` marks a truly non-affine
    kernel: a regex its `PolycError` message must match.
    """

    name: str
    origin: str
    construct: str
    source: Union[str, Callable[..., None]]
    inputs: Inputs
    reference: Reference
    outputs: Tuple[str, ...]
    declared: Mapping[str, Any] = field(default_factory=dict)
    regions: Mapping[str, Tuple[slice, ...]] = field(default_factory=dict)
    xfail: Union[None, str, Mapping[str, str]] = None
    refused: Optional[str] = None
    slow: Tuple[str, ...] = ()
    tol: Optional[Tuple[float, float]] = None

    def xfail_reason(self, variant: str) -> Optional[str]:
        if self.xfail is None or isinstance(self.xfail, str):
            return self.xfail
        return self.xfail.get(variant)


#: Refusals must say why: the subscript is not affine / depends on data.
REFUSAL_MESSAGE = r"(?i)affine|data.dependent|indirect"


def rand(rng: np.random.Generator, *shape: int, dtype: Any = np.float32, lo: float = -1.0,
         hi: float = 1.0) -> np.ndarray:
    """Uniform random array of `shape` in [lo, hi) with the given dtype."""
    return rng.uniform(lo, hi, size=shape).astype(dtype)
