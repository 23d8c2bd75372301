"""The polyc kernel library: each module defines kernels, their references and typical sizes.

Every module exposes `KERNELS`, a list of `LibraryKernel`.  `all_kernels()` collects them, so the
demo, the tests and the benchmarks all walk the same list.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np

#: Default tolerances (rtol, atol) per dtype name for comparing against a reference.
TOLERANCES = {"f32": (2e-4, 1e-5), "f64": (1e-10, 1e-12)}


@dataclass
class LibraryKernel:
    """One kernel of the library.

    - `kernel`: a `polyc` kernel (`pc.kernel(...)`).
    - `make_inputs(sizes, dtype, rng)`: keyword arguments for a call: input arrays (and inout
      arrays) as numpy arrays of `dtype` ("f32"/"f64"), scalars as Python numbers.
    - `reference(**inputs)`: the expected outputs: an array for one output, a dict for several.
      For inout kernels (in place), the reference returns the arrays as they must be afterwards.
      Defaults to `kernel.reference` (affine-Python kernels run as written).
    - `sizes`: presets by name ("small" for tests, "typical" for the demo, "bench" for benchmarks;
      PolyBench kernels use "MINI" ... "EXTRALARGE").
    - `dtypes`: the element types the kernel is checked in.
    - `tolerance`: optional per-dtype override of TOLERANCES.
    """

    name: str
    kernel: Any
    make_inputs: Callable[[Mapping[str, int], str, np.random.Generator], Dict[str, Any]]
    sizes: Dict[str, Dict[str, int]]
    reference: Optional[Callable[..., Any]] = None
    dtypes: tuple = ("f32", "f64")
    tolerance: Dict[str, tuple] = field(default_factory=dict)
    suite: str = "core"

    def tol(self, dtype: str) -> tuple:
        return self.tolerance[dtype] if dtype in self.tolerance else TOLERANCES[dtype]

    def expected(self, inputs: Dict[str, Any]) -> Any:
        """Run the reference on copies of `inputs` (a reference may update inout arrays)."""
        copies = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
        ref = self.reference if self.reference is not None else self.kernel.reference
        return ref(**copies)


def all_kernels(suite: Optional[str] = None) -> List[LibraryKernel]:
    """Every `LibraryKernel` defined in this package and its subpackages (optionally one suite)."""
    found: List[LibraryKernel] = []
    for info in sorted(pkgutil.walk_packages(__path__, prefix=__name__ + "."), key=lambda m: m.name):
        if info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        found.extend(getattr(module, "KERNELS", []))
    return [k for k in found if suite is None or k.suite == suite]


def by_name(name: str) -> LibraryKernel:
    for k in all_kernels():
        if k.name == name:
            return k
    raise KeyError(name)
