"""Reverse-mode differentiation of kernels: `pc.grad(kernel, of="Y", wrt=["X", "W"])`.

The result is an ordinary `Kernel` computing the vector-Jacobian product: it takes the forward
kernel's inputs (those the gradient reads), its scalars, and the adjoint of `of` as `<of>_grad`, and
returns the gradients `<X>_grad` (in `wrt` order; a dict when there are several).  It is built as a
`Program -> Program` transformation (`adjoint_program`), so programs of several kernels can be
differentiated the same way.  Unsupported kernels raise `GradError` with the reason.

`pc.grad` (the function) shadows this package as an attribute of `polyc`, as `pc.codegen` does:
import its modules with `from polyc.grad.adjoint import adjoint_program` (or `importlib`).
Modules: `derivative` (local adjoints of one expression), `gather` (inverting a read),
`analysis` (what may be differentiated), `fold`/`inline`/`domains` (fewer, simpler passes),
`adjoint` (the transformation).
"""
from __future__ import annotations

from typing import Sequence, Union

from ..errors import GradError
from .adjoint import GradNames, adjoint_program

__all__ = ["grad", "adjoint_program", "GradNames", "GradError"]


def grad(kernel, of: str, wrt: Union[str, Sequence[str]]):
    """The gradient kernel of `kernel`: the adjoint of tensor `of` in, the gradients of `wrt` out.

    `kernel.grad_names` on the result (a `GradNames`) says which names it chose: `<of>_grad` for the
    adjoint supplied and `<X>_grad` for each gradient, with a digit appended where the kernel
    already uses the name."""
    from ..api import Kernel
    if not isinstance(kernel, Kernel):
        raise GradError(f"pc.grad takes a kernel made by pc.kernel, not {type(kernel).__name__}")
    if not isinstance(of, str):
        raise GradError(f"of must be the name of one tensor, not {of!r}")
    wrt = (wrt,) if isinstance(wrt, str) else tuple(wrt)
    if not all(isinstance(x, str) for x in wrt):
        raise GradError(f"wrt must be tensor names, not {wrt!r}")
    program, names = adjoint_program(kernel.program, of, wrt)
    out = Kernel(program)
    out.grad_names = names  # type: ignore[attr-defined]
    return out
