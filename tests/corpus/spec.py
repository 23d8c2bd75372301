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

#: Every kernel of the corpus passes today; a kernel that fails names its cause in `xfail` (a
#: string constant here, one per gap).  The causes it was written against -- outputs lost by
#: in-place updates, intermediates with negative offsets, undeclared inputs with explicit ranges,
#: quasi-affine subscripts (Einstein and loops), guards, integer parameters, indices used as values,
#: continuation lines, unsigned types, inputs that only name a size, local scalars in subscripts,
#: integer powers, float literals on indices -- are fixed, and the kernels that showed them pass.

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
