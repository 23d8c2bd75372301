"""The size symbols shape inference makes: placeholder sizes of undeclared inputs, grouped into
classes that must be equal (union-find) and bound to extents, and the names they finally get.

Kept apart from `inference`, which decides index ranges: this module only keeps the books."""
from __future__ import annotations

from typing import Dict, Set

from ..ir import Affine, Program


class SizeClasses:
    """Union-find over placeholder sizes of undeclared inputs, each class optionally bound to an extent."""

    def __init__(self) -> None:
        self.parent: Dict[str, str] = {}
        self.binding: Dict[str, Affine] = {}
        self.hint: Dict[str, str] = {}

    def add(self, p: str) -> None:
        self.parent.setdefault(p, p)

    def find(self, p: str) -> str:
        while self.parent[p] != p:
            self.parent[p] = self.parent[self.parent[p]]
            p = self.parent[p]
        return p

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra
            if rb in self.binding and ra not in self.binding:
                self.binding[ra] = self.binding[rb]
            if rb in self.hint and ra not in self.hint:
                self.hint[ra] = self.hint[rb]

    def bind(self, p: str, extent: Affine) -> None:
        r = self.find(p)
        # Never bind a class to an extent mentioning itself (an intermediate's shape derived from
        # this very input, like `I_dim0 - 1`): that would be a cycle, not a size.
        if r not in self.binding and not any(v in self.parent and self.find(v) == r for v in extent.variables):
            self.binding[r] = extent


def kernel_names_in(program: Program) -> Set[str]:
    """Every name `program` already uses: sizes, tensors, scalars and statement indices."""
    return (set(program.sizes) | {t.name for t in program.tensors} | {s.name for s in program.scalars}
            | {i for st in program.statements for i in st.iterators})


def fresh_size_name(base: str, taken: Set[str]) -> str:
    """The name of a new size: `base` (`I` for index `i`) when the kernel uses no name `base`, else
    `base_size`, `base_size2`, ...  A size must never share a name with an index, tensor or scalar
    (with `C[I, J] +=! A[I, K] * B[K, J]`, index `I` spanning a size `I` made the loop empty).
    Adds the name to `taken`."""
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_size" if k == 2 else f"{base}_size{k - 1}"
    taken.add(name)
    return name


def placeholder(tensor: str, dim: int) -> str:
    """The placeholder size of dimension `dim` of undeclared input `tensor` (renamed by `_finish`)."""
    return f"__{tensor}_{dim}"
