"""The library escape hatch: an operator that is a plain matrix product may run as a vendor call
(BLAS `gemm` through numpy's `matmul` on the CPU) instead of generated code.

Recognition is structural, on the kernel's IR: exactly an initialisation `C[i, j] = 0` and an update
`C[i, j] += A[.] * B[.]` (or `B[.] * A[.]`) where `A` is indexed `[i, k]` or `[k, i]` and `B`
`[k, j]` or `[j, k]`, every range starting at 0 and the whole tensors used.  Anything else stays
compiled.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import islpy as isl
import numpy as np

from ..ir import Access, Binary, Const
from ..poly.islutil import affine_str, isl_name
from .trace import Node

#: A product of at least this many floating-point operations is compute-bound: BLAS's packed
#: micro-kernels beat what fusing it would save in memory traffic (2 * M * N * K >= 2**28).
VENDOR_FLOPS = 2 ** 28


@dataclass(frozen=True)
class Gemm:
    """`C = op(A) @ op(B)` with `op` a transpose where `transpose_a` / `transpose_b`."""

    a: str
    b: str
    c: str
    transpose_a: bool
    transpose_b: bool
    sizes: tuple  # kernel size names (M, N, K) in program terms, resolved at call time

    def flops(self, values: Mapping[str, int]) -> int:
        m, n, k = (s.evaluate(values) for s in self.sizes)
        return 2 * m * n * k

    def run(self, arrays: Mapping[str, np.ndarray], out: np.ndarray) -> np.ndarray:
        a = arrays[self.a].T if self.transpose_a else arrays[self.a]
        b = arrays[self.b].T if self.transpose_b else arrays[self.b]
        return np.matmul(a, b, out=out)


def runs_over_box(model, st, iterators, extents: Mapping[str, object]) -> bool:
    """isl: statement `st` of `model` runs exactly over `0 <= it < extents[it]` for each iterator
    (in the kernel's size context)."""
    if set(st.iterators) != set(iterators) or len(st.iterators) != len(iterators):
        return False
    cons = " and ".join(f"0 <= {isl_name(it)} < {affine_str(extents[it])}" for it in iterators)
    box = isl.Set(f"{model.pstr} -> {{ {isl_name(st.name)}[{', '.join(isl_name(x) for x in st.iterators)}]"
                  f"{' : ' + cons if cons else ''} }}")
    return box.intersect_params(model.context).is_equal(model.domains[st.name].intersect_params(model.context))


def recognise_gemm(node: Node) -> Optional[Gemm]:
    """The node as a `Gemm`, or None when it is anything but a plain matrix product."""
    p = node.kernel.program
    if len(p.statements) != 2:
        return None
    init, upd = p.statements
    if init.update is not None or not isinstance(init.value, Const) or init.value.value != 0:
        return None
    if upd.update != "+" or not isinstance(upd.value, Binary) or upd.value.op != "*":
        return None
    lhs, rhs = upd.value.lhs, upd.value.rhs
    if not (isinstance(lhs, Access) and isinstance(rhs, Access)) or init.target != upd.target:
        return None
    c = upd.target
    if len(c.indices) != 2 or len(lhs.indices) != 2 or len(rhs.indices) != 2:
        return None
    i, j = (x.as_single_var() for x in c.indices)
    if i is None or j is None or len(upd.iterators) != 3 or len(upd.reduction) != 1:
        return None
    k = upd.reduction[0]
    a = tuple(x.as_single_var() for x in lhs.indices)
    b = tuple(x.as_single_var() for x in rhs.indices)
    if a in ((k, j), (j, k)) and b in ((i, k), (k, i)):   # `B * A`: the product commutes elementwise
        lhs, rhs, a, b = rhs, lhs, b, a
    if a not in ((i, k), (k, i)) or b not in ((k, j), (j, k)):
        return None
    if len({lhs.tensor, rhs.tensor, c.tensor}) != 3:
        return None
    declared = {t.dtype for t in p.tensors if t.dtype is not None}
    if any(not d.is_float for d in declared) or len(declared) > 1:
        return None     # an integer or narrower C converts after every step: BLAS computes no such thing
    # every index must range over a whole tensor dimension, from 0: the tensors' shapes are then
    # exactly the loop extents (inference made them so); a `where` clause would have narrowed them
    shapes = {t.name: t.shape for t in p.tensors}
    extents: Dict[str, object] = {}
    for acc in (c, lhs, rhs):
        for idx, dim in zip(acc.indices, shapes[acc.tensor]):
            v = idx.as_single_var()
            if extents.setdefault(v, dim) != dim:
                return None
    model = node.kernel.model
    if not runs_over_box(model, upd, (i, j, k), extents) or not runs_over_box(model, init, (i, j), extents):
        return None
    names = {kn: pn for kn, pn in node.bindings}
    sizes = dict(node.sizes)
    resolve = [extents[x].substitute(sizes) for x in (i, j, k)]
    return Gemm(names[lhs.tensor], names[rhs.tensor], names[c.tensor], a == (k, i), b == (j, k), tuple(resolve))


def vendor_choices(nodes: Sequence[Node], gemms: Mapping[int, Optional[Gemm]], sizes: Mapping[str, int],
                   target: str, vendor: Union[str, bool], products_apart: bool
                   ) -> Tuple[Tuple[int, ...], Tuple[str, ...]]:
    """The matrix products of `nodes` bound to the vendor at these sizes (`vendor` True, or "auto"
    and at least VENDOR_FLOPS; the C target only), and a line per product saying why."""
    vendored: List[int] = []
    decisions: List[str] = []
    for n in nodes:
        g = gemms[n.index]
        if g is None:
            continue
        flops = g.flops(sizes)
        use = target == "c" and (vendor is True or (vendor == "auto" and flops >= VENDOR_FLOPS))
        if use:
            vendored.append(n.index)
        why = "BLAS gemm through numpy" if use else (
            "generated code, kept apart from its neighbours (contract=True fuses it row by row)"
            if products_apart else "generated code")
        reason = ("vendor=True" if vendor is True else f"{flops / 1e9:.4g} GFLOP "
                  f"{'>=' if flops >= VENDOR_FLOPS else '<'} {VENDOR_FLOPS / 1e9:.4g}") \
            if target == "c" and vendor else f"target {target}, vendor={vendor}"
        decisions.append(f"{n.name}: a matrix product -> {why} ({reason})")
    return tuple(vendored), tuple(decisions)
