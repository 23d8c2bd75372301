"""Re-layout ahead of use: a matrix product that reads its right operand transposed (`B[j, k]`, the
reduction index last: `Q Kᵀ` in attention) gets that operand transposed once, into its own
buffer, and becomes a plain product `A[i, k] * Bᵀ[k, j]`.

Why: inside a fused row loop, the plain product's innermost loop runs along `j` over contiguous
memory (vectorised multiply-adds into the row), where the transposed one is a horizontal dot
product per element.  The transpose costs one pass over `B` (O(n·d) against the product's
O(n²·d)), and is itself an ordinary operator, so it is planned and proven like any other.

Where the plan binds the product to the vendor call (BLAS reads a transposed operand at no cost),
the transpose is not run: `Relayout` records which product reads which transpose of what.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Tuple

from .trace import Node, Tracer
from .vendor import recognise_gemm


@dataclass(frozen=True)
class Relayout:
    """Product node `product` reads `transposed`, made by node `transpose` from `original`."""

    product: int
    transpose: int
    transposed: str
    original: str

_KERNELS: Dict[str, object] = {}


def _kernel(name: str):
    if name not in _KERNELS:
        from ..api import kernel
        text = {"relayout_transpose": "T[j, i] = A[i, j]", "relayout_matmul": "C[i, j] +=! A[i, k] * B[k, j]"}
        _KERNELS[name] = kernel(text[name], name=name)
    return _KERNELS[name]


def relayout_transposed_operands(nodes: List[Node], tracer: Tracer
                                 ) -> Tuple[List[Node], Dict[str, str], List[str], Tuple[Relayout, ...]]:
    """Nodes with every `A @ Bᵀ` product split into a transpose of `B` and a plain product; the
    renaming of replaced results; notes; the products rewritten."""
    out: List[Node] = []
    alias: Dict[str, str] = {}
    notes: List[str] = []
    made: List[Relayout] = []
    for n in nodes:
        roles = {t.name: t.role for t in n.kernel.program.tensors}
        n = replace(n, bindings=tuple((k, alias.get(p, p)) if roles[k] == "input" else (k, p) for k, p in n.bindings))
        g = recognise_gemm(n)
        if g is None or not g.transpose_b or g.transpose_a:
            out.append(n)
            continue
        before = len(tracer.nodes)
        t = tracer.call(_kernel("relayout_transpose"), {"A": tracer.handles[g.b]})
        c = tracer.call(_kernel("relayout_matmul"), {"A": tracer.handles[g.a], "B": t})
        added = tracer.nodes[before:]
        out.extend(replace_location(m, n) for m in added)
        alias[g.c] = c.name
        made.append(Relayout(added[1].index, added[0].index, t.name, g.b))
        notes.append(f"{n.name}: reads {g.b} transposed; {g.b} is re-laid out once ({added[0].name}) and the "
                     f"product runs as {added[1].name}")
    return out, alias, notes, tuple(made)


def replace_location(node: Node, like: Node) -> Node:
    """`node` attributed to the user's line of `like` (errors and views point there)."""
    return replace(node, location=like.location)
