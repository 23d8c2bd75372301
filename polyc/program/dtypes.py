"""The element types of a program's tensors, by the kernels' own typing rules.

An operator's result has the type the kernel alone would give it for those inputs
(`codegen.typing.resolve_typing`): `scale(X=int32, alpha=0.5)` is float64, `add` of two int64 is
int64, a uint8 matmul wraps in uint8.  The tracer fixes it where the inputs' types are declared;
a program over `pc.tensor` inputs (types left to the call) fixes it per call, walking the nodes
in call order (`call_dtypes`), so buffers are sized and viewed in the types the kernels write.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np

from ..errors import PolycError
from ..ir import DType, dtype_of_numpy


def output_dtypes(kernel: Any, inputs: Mapping[str, DType]) -> Dict[str, DType]:
    """The dtype of each output of `kernel` when its inputs (kernel tensor name -> dtype) have
    these types: what a call of the kernel alone returns."""
    from ..codegen.typing import resolve_typing
    typing = resolve_typing(kernel.program, inputs)
    return {t.name: typing.tensors[t.name] for t in kernel.program.tensors if t.role == "output"}


def call_dtypes(nodes: Sequence[Any], handles: Mapping[str, Any], inputs: Mapping[str, np.dtype]
                ) -> Dict[str, np.dtype]:
    """numpy dtypes of every tensor of a call whose inputs (program name -> array dtype) are
    these: declared ones as declared, the others by walking `nodes` in order."""
    types: Dict[str, Optional[DType]] = {n: dtype_of_numpy(d) for n, d in inputs.items()}
    for node in nodes:
        roles = {t.name: t.role for t in node.kernel.program.tensors}
        known = {k: types.get(p) for k, p in node.bindings if roles[k] == "input"}
        if any(v is None for v in known.values()):
            continue
        try:
            outs = output_dtypes(node.kernel, known)   # type: ignore[arg-type]
        except PolycError:
            continue        # the combined kernel's own call reports it
        for k, p in node.bindings:
            if roles[k] == "output":
                declared = handles[p].dtype if p in handles else None
                types[p] = declared if declared is not None else outs[k]
    out: Dict[str, np.dtype] = {}
    for name, h in handles.items():
        t = h.dtype if h.dtype is not None else types.get(name)
        out[name] = t.numpy if t is not None else np.dtype(np.float64)
    return out
