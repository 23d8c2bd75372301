"""Reverse-mode differentiation of kernels: `pc.grad(kernel, of="Y", wrt=["X", "W"])`.

The result is an ordinary `Kernel` computing the vector-Jacobian product: it takes the forward
kernel's inputs (those the gradient reads), its scalars, and the adjoint of `of` as `<of>_grad`, and
returns the gradients `<X>_grad` (in `wrt` order; a dict when there are several).  It is built as a
`Program -> Program` transformation (`adjoint_program`), so programs of several kernels can be
differentiated the same way.  Unsupported kernels raise `GradError` with the reason.

`pc.grad` (the function) shadows this package as an attribute of `polyc`, as `pc.codegen` does:
import its modules with `from polyc.grad.adjoint import adjoint_program` (or `importlib`).
Modules: `derivative` (local adjoints of one expression), `gather` (inverting a read),
`analysis` (what may be differentiated), `fold`/`inline`/`factor`/`domains` (fewer, simpler passes),
`adjoint` (the transformation).
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Union

from ..errors import GradError
from .adjoint import GradNames, adjoint_program

__all__ = ["grad", "adjoint_program", "GradNames", "GradError"]


#: The checkpointing strategies `pc.grad(..., checkpoint=...)` offers for kernels that overwrite
#: values the gradient needs: "store" keeps every value computed (`polyc.grad.expansion`).
CHECKPOINTS = ("store",)


def grad(kernel, of: str, wrt: Union[str, Sequence[str]], checkpoint: Optional[str] = None, *,
         pad_borders: bool = True, saved: Union[str, Sequence[str]] = ()):
    """The gradient kernel of `kernel`: the adjoint of tensor `of` in, the gradients of `wrt` out.

    `kernel.grad_names` on the result (a `GradNames`) says which names it chose: `<of>_grad` for the
    adjoint supplied and `<X>_grad` for each gradient, with a digit appended where the kernel
    already uses the name.

    `kernel` may also be an operator program (`@pc.program`): `of` names one of its outputs (as the
    program returns them: `out`, or the names of a returned dict/tuple) and `wrt` its inputs.  The
    program's traced kernel (every statement of every operator) is differentiated end to end, so
    the result is one gradient kernel of the whole program, scheduled (`"auto"` fuses and contracts
    what it can) and checked like any kernel.  `program.grad(of=..., wrt=...)` instead gives the
    backward as an operator program (operator by operator: fused groups, BLAS, a memory plan).

    `checkpoint="store"` differentiates kernels that overwrite values the gradient needs (in-place
    time loops, PolyBench's stencils): every value the kernel computes is kept in an array of its
    own (array expansion, exact by isl's dataflow analysis) and the gradient runs the kernel's
    loops forward, then backward (`polyc.grad.reverse`).  `wrt` may then also name arrays updated
    in place (the gradient is with respect to the values passed in), and `of` an array updated in
    place (its values at the end).  Memory: one copy of every value computed (for a stencil, one
    grid per time step).  Without it such kernels are refused with the reason.

    `saved=["Y", "s"]` names forward tensors (outputs or intermediates) whose values the caller
    passes to the gradient kernel, as the forward computed them, instead of the kernel recomputing
    them, as autograd saves them for its backward (`pc.returning` gives the forward returning its
    intermediates).  Every saved tensor is an input of the gradient, under its own name.  A saved
    division `V = T / W` also gives back `T = V * W` (softmax saved as `Y` and its row sums `s`:
    no `exp` in the backward); see `polyc.grad.saved`.

    The gradient's sums are Einstein reductions, unordered like any (`"auto"` may reassociate them).
    Where a sum's terms carry a factor constant along it that reads another sum's result (layernorm:
    `var_grad[i]` inside `mean_grad`'s sum), the factor is taken out and the sum split by term
    (`polyc.grad.factor`), so the sums of a row run in one pass; that rounds like a reassociation,
    whatever `reassociate=` a compile passes later."""
    from ..api import Kernel
    if not isinstance(pad_borders, bool):
        raise GradError(f"pad_borders must be True or False, not {pad_borders!r}")
    if checkpoint is not None and saved:
        raise GradError("checkpoint='store' keeps every forward value itself; pass saved=... without it")
    if checkpoint is not None and checkpoint not in CHECKPOINTS:
        raise GradError(f"checkpoint={checkpoint!r} is not a strategy pc.grad offers; use "
                        f"{' or '.join(map(repr, CHECKPOINTS))} (or None)")
    if not isinstance(of, str):
        raise GradError(f"of must be the name of one tensor, not {of!r}")
    if not isinstance(wrt, str) and not isinstance(wrt, (list, tuple)):
        raise GradError(f"wrt must be a tensor name or a list of them, not {wrt!r}")
    wrt = (wrt,) if isinstance(wrt, str) else tuple(wrt)
    if not all(isinstance(x, str) for x in wrt):
        raise GradError(f"wrt must be tensor names, not {wrt!r}")
    if _is_program(kernel):
        return _program_grad(kernel, of, wrt, pad_borders, saved, checkpoint)
    if not isinstance(kernel, Kernel):
        raise GradError(f"pc.grad takes a kernel made by pc.kernel or a @pc.program, not {type(kernel).__name__}")
    if checkpoint == "store":
        program, names = _stored_grad(kernel.program, of, wrt)
    else:
        program, names = adjoint_program(kernel.program, of, wrt, pad_borders=pad_borders, saved=saved)
    out = Kernel(program)
    out.grad_names = names  # type: ignore[attr-defined]
    return out


def _is_program(obj) -> bool:
    """An operator program (`polyc.program`, a layer beside this one: recognised by what it offers)."""
    return all(hasattr(obj, a) for a in ("kernel", "outputs", "inputs", "trace_nodes"))


def _program_grad(program, of: str, wrt: Sequence[str], pad_borders: bool = True,
                  saved: Union[str, Sequence[str]] = (), checkpoint: Optional[str] = None):
    """`grad` of an operator program: its outputs take their user-facing names in the traced kernel
    (so the adjoint input is `<output>_grad`), then the kernel is differentiated.  `saved` names
    tensors of that traced kernel (its outputs by their returned names)."""
    from ..api import Kernel
    from .exprs import program_with_tensor_names
    outputs = dict(program.outputs)   # user-facing output name -> traced tensor
    if of not in outputs:
        raise GradError(f"of={of!r} is not an output of program {program.name!r}; its outputs are "
                        f"{', '.join(outputs) or 'none'}")
    unknown = [x for x in wrt if x not in program.inputs]
    if unknown:
        raise GradError(f"wrt names {', '.join(map(repr, unknown))}, which are not inputs of program "
                        f"{program.name!r} (inputs: {', '.join(program.inputs)})")
    traced = program.kernel.program
    taken = {t.name for t in traced.tensors}
    unread = [x for x in wrt if x not in taken]
    if unread:
        raise GradError(f"{of!r} does not depend on input {unread[0]!r} of program {program.name!r} (no operator "
                        f"computing it reads it): its gradient is zero. Leave it out of wrt, or use "
                        f"{program.name}.grad(...), whose backward program returns zeros for it")
    renames: Dict[str, str] = {}     # a tensor returned twice takes the name `of` asks for
    for name, internal in sorted(outputs.items(), key=lambda item: item[0] != of):
        if name not in taken and internal not in renames:
            renames[internal] = name
    clash = [name for name, internal in outputs.items() if name in taken and name != internal]
    if clash:
        raise GradError(f"program {program.name!r} returns {clash[0]!r}, a name its trace also uses for "
                        f"another tensor; return it under another name to differentiate it")
    renamed = program_with_tensor_names(traced, renames)
    target = renames.get(outputs[of], outputs[of])
    if checkpoint == "store":
        adjoint, names = _stored_grad(renamed, target, wrt)
    else:
        adjoint, names = adjoint_program(renamed, target, wrt, pad_borders=pad_borders, saved=saved)
    out = Kernel(adjoint.with_(name=f"{program.name}_grad"))
    out.grad_names = names  # type: ignore[attr-defined]
    return out


def _stored_grad(program, of: str, wrt: Sequence[str]):
    """`checkpoint="store"`: the gradient of the array-expanded kernel, by a reverse sweep."""
    from .adjoint import check_request
    from .expansion import expand
    from .reverse import reverse_program
    check_request(program, of, wrt, inputs=("input", "inout"))
    return reverse_program(expand(program), of, wrt, f"{program.name}_grad")
