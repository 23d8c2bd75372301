"""Program-level clean-ups on the traced operator list: common subexpressions and dead operators.

- Two calls of the same kernel on the same tensors with the same folded scalars compute the same
  values: the later one is dropped and its results are the earlier one's.
- An operator none of whose results reaches a returned tensor is removed.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Sequence, Tuple

from .trace import Node


def share_common(nodes: Sequence[Node], returned: Sequence[str]) -> Tuple[List[Node], Dict[str, str], List[str]]:
    """Nodes without repeated computations, the renaming of dropped results, and notes."""
    alias: Dict[str, str] = {}
    seen: Dict[tuple, Node] = {}
    out: List[Node] = []
    notes: List[str] = []
    for n in nodes:
        roles = {t.name: t.role for t in n.kernel.program.tensors}
        bindings = tuple((k, alias.get(p, p)) if roles[k] == "input" else (k, p) for k, p in n.bindings)
        n = replace(n, bindings=bindings)
        key = (id(n.kernel), tuple((k, p) for k, p in bindings if roles[k] == "input"), _exact(n.scalars))
        if key in seen:
            first = seen[key]
            for k, p in bindings:
                if roles[k] == "output":
                    alias[p] = first.binding(k)
            notes.append(f"{n.name} computes what {first.name} computes: shared")
            continue
        seen[key] = n
        out.append(n)
    return out, alias, notes


def _exact(scalars: Sequence[Tuple[str, object]]) -> tuple:
    """Scalars as a key that tells apart what `==` does not: 0.0 and -0.0 (a product by -0.0 gives
    -0.0 where one by 0.0 gives 0.0), 1 and 1.0."""
    return tuple((k, type(v).__name__, float(v).hex() if isinstance(v, float) else v) for k, v in scalars)


def remove_dead(nodes: Sequence[Node], returned: Sequence[str]) -> Tuple[List[Node], List[str]]:
    """Nodes that contribute to a returned tensor, and notes on the ones removed."""
    needed = set(returned)
    keep: List[Node] = []
    notes: List[str] = []
    for n in reversed(nodes):
        if any(p in needed for p in n.outputs):
            keep.append(n)
            needed |= set(n.inputs)
        else:
            notes.append(f"{n.name}: results never used, removed")
    return list(reversed(keep)), list(reversed(notes))
