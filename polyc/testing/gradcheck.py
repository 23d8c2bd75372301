"""`check_grad`: a gradient kernel against central finite differences in random directions.

For a forward kernel `f`, the adjoint `ybar` of its output `of` (random, fixed by `seed`) and the
gradients `g_X = pc.grad(f, of, wrt)(..., of_grad=ybar)`, the directional derivative of
`phi(x) = <ybar, f(x)>` along a random direction `d_X` of each `wrt` tensor `X` in turn (the others
held) must equal `<g_X, d_X>`.  The finite difference is central, `(phi(x + h d) - phi(x - h d)) / 2h`, and is
evaluated in float64 whatever dtype the gradient runs in (the forward kernel is run on float64
copies when its dtypes are undeclared), so its own error is ~1e-10 relative and the tolerance
measures the gradient kernel.  A kernel declared float32 (`pc.f32[...]`) can only run in float32:
the step is then larger (3e-3 relative) and the float32 tolerance applies.  A few directions test every component of every gradient with
probability one, at the cost of a handful of forward calls.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .check import call_sizes

#: Relative tolerance of the directional derivative, by the dtype the gradient runs in.
GRAD_TOLERANCES = {"float64": 1e-6, "float32": 2e-3}


@dataclass(frozen=True)
class GradCheck:
    """What `check_grad` compared: per direction and `wrt` tensor (in that order), the gradient's
    and the finite differences' directional derivatives."""

    analytic: Tuple[float, ...]
    numeric: Tuple[float, ...]
    rtol: float

    @property
    def worst(self) -> float:
        """The largest relative disagreement over the directions."""
        return max((abs(a - n) / max(abs(a), abs(n), 1e-300) for a, n in zip(self.analytic, self.numeric)),
                   default=0.0)


def _output(result: Any, of: str, args: Mapping[str, Any], names: Sequence[str] = ()) -> np.ndarray:
    """The value of `of` after a call: returned (in a dict, or in a tuple whose entries are `names`:
    an operator program's `out0, out1, ...`), or (an array updated in place) in the call's arguments."""
    if isinstance(result, dict) and of in result:
        return np.asarray(result[of], dtype=np.float64)
    if isinstance(result, tuple) and of in names:
        return np.asarray(result[list(names).index(of)], dtype=np.float64)
    if result is None or (isinstance(result, dict) and of not in result):
        return np.asarray(args[of], dtype=np.float64)
    return np.asarray(result, dtype=np.float64)


def _output_dtype(result: Any, of: str, args: Mapping[str, Any], names: Sequence[str], default: np.dtype) -> np.dtype:
    """The dtype `of` comes in from a call (a float type; `default` where it is not one)."""
    raw = result.get(of) if isinstance(result, dict) else \
        (result[list(names).index(of)] if isinstance(result, tuple) and of in names else
         args.get(of) if result is None else result)
    dt = np.asarray(raw).dtype if raw is not None else default
    return dt if dt.kind == "f" else default


def _rounds_to_float32(kernel) -> bool:
    """Whether the kernel computes something in float32 whatever its inputs: a declared float32
    tensor or a conversion to float32 (finite differences of such a kernel see float32 rounding)."""
    from ..ir import Cast
    program = getattr(getattr(kernel, "kernel", kernel), "program", None)
    if program is None:
        return False
    if any(t.dtype is not None and t.dtype.name == "f32" for t in program.tensors):
        return True
    return any(isinstance(e, Cast) and e.dtype.name == "f32" for st in program.statements for e in st.value.walk())


def _as_f64(inputs: Mapping[str, Any], kernel) -> Dict[str, Any]:
    """Float arrays as float64 where the kernel leaves their dtype open."""
    program = getattr(kernel, "program", None)   # an operator program has none: its inputs are declared
    decl = program.tensor_map if program is not None else {}
    out = {}
    for k, v in inputs.items():
        if isinstance(v, np.ndarray) and v.dtype.kind == "f" and k in decl and decl[k].dtype is None:
            v = v.astype(np.float64)
        out[k] = v
    return out


def check_grad(kernel, of: str, wrt: Union[str, Sequence[str]], inputs: Optional[Mapping[str, Any]] = None, *,
               directions: int = 3, seed: int = 0, rtol: Optional[float] = None, step: Optional[float] = None,
               target: str = "c", schedule: Any = None, checkpoint: Optional[str] = None,
               saved: Sequence[str] = (), **kw_inputs: Any) -> GradCheck:
    """Check `pc.grad(kernel, of, wrt)` on `inputs` (a dict and/or keyword arrays and scalars).

    Raises AssertionError, with both values, when a directional derivative disagrees beyond `rtol`
    (default per the dtype of the `wrt` arrays, `GRAD_TOLERANCES`).  `target`/`schedule` choose how
    the gradient kernel is compiled, `checkpoint` is passed to `pc.grad` (an array updated in place
    may then be `of` or in `wrt`).  `saved` is passed to `pc.grad` too: the saved values come from
    the forward returning them (`pc.returning`).  Returns the comparison."""
    import polyc as pc
    from ..errors import GradError
    if isinstance(directions, bool) or not isinstance(directions, int) or directions < 1:
        raise GradError(f"check_grad: directions must be a positive int (each is one comparison), not {directions!r}")
    wrt = (wrt,) if isinstance(wrt, str) else tuple(wrt)
    given = dict(inputs or {})
    given.update(kw_inputs)
    saved = (saved,) if isinstance(saved, str) else tuple(saved)
    options = dict(checkpoint=checkpoint) if checkpoint else {}
    if saved:
        options["saved"] = saved
    for x in wrt:
        if x in given and np.asarray(given[x]).dtype.kind != "f":
            raise GradError(f"check_grad: {x} is an array of {np.asarray(given[x]).dtype}, and finite differences "
                            f"need values that can move a little: pass {x} as floats (the gradient is with "
                            f"respect to real values)")
    g = pc.grad(kernel, of=of, wrt=wrt, **options)
    rng = np.random.default_rng(seed)
    first = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in given.items()}
    # The forward as called: with `saved`, also returning what the gradient takes; with `of` an
    # intermediate (`pc.grad` takes one), also returning it, the value finite differences follow.
    program = getattr(kernel, "program", None)
    intermediate = program is not None and any(t.name == of and t.role == "temp" for t in program.tensors)
    extra = tuple(saved) + ((of,) if intermediate and of not in saved else ())
    forward = pc.returning(kernel, *extra) if extra else kernel
    result = forward(**first)
    names = tuple(n for n, _ in getattr(kernel, "outputs", ()))     # an operator program's returns
    out = _output(result, of, first, names)
    dtype = np.asarray(given[wrt[0]]).dtype
    seed_dtype = _output_dtype(result, of, first, names, dtype)

    ybar = rng.standard_normal(out.shape).astype(seed_dtype)    # the adjoint of `of`: `of`'s own dtype
    grad_args = {k: v for k, v in given.items()
                 if k in {t.name for t in g.program.tensors} | {s.name for s in g.program.scalars}
                 | set(g.program.sizes)}
    grad_args[g.grad_names.seed] = ybar
    # sizes no array of the gradient carries (`J` of `Y[i] +=! X[i + j, j]`, whose gradient reads no X)
    bound = call_sizes(kernel, first) if hasattr(getattr(kernel, "program", None), "sizes") else None
    for name, value in (bound or {}).items():
        if name in g.program.sizes:
            grad_args.setdefault(name, value)
    for t in saved:
        grad_args[t] = result[t] if isinstance(result, dict) else result
    compiled = pc.compile(g, schedule, target=target)
    res = compiled(**grad_args)
    grads = {x: np.asarray(res[g.grad_names[x]] if isinstance(res, dict) else res, dtype=np.float64) for x in wrt}

    base = _as_f64(given, kernel)
    ybar64 = ybar.astype(np.float64)
    # The finite differences' forward (on float64 copies where the kernel leaves dtypes open) has
    # its own precision: a cast to float32 inside a float64 kernel makes `of` float32 there too.
    if all(base[k] is given[k] for k in given):      # nothing converted: the first call's result
        probe, raw = first, result
    else:
        probe = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in base.items()}
        raw = forward(**probe)
    raw = raw.get(of) if isinstance(raw, dict) else (probe.get(of) if raw is None else
                                                     _output(raw, of, probe, names) if isinstance(raw, tuple) else raw)
    out_dtype = np.asarray(raw).dtype if raw is not None else dtype
    if _rounds_to_float32(kernel):      # a float32 step inside (`float32(X) * exp(X)`): its precision
        out_dtype = np.dtype(np.float32)
    tol = rtol if rtol is not None else max(GRAD_TOLERANCES.get(dtype.name, 1e-3),
                                            GRAD_TOLERANCES.get(out_dtype.name, 1e-3) if out_dtype.kind == "f" else 0.0)
    # float64 forward: a tiny step (truncation error ~h**2); a forward fixed to float32 by its
    # declarations needs a larger one, or rounding (~eps/h) would swamp the difference.
    exact = all(np.asarray(base[x]).dtype == np.float64 for x in wrt) and out_dtype != np.float32
    analytic, numeric = [], []
    for _ in range(directions):
        # One tensor at a time, each stepped at its own scale: a joint direction lets a large
        # gradient hide a small or wrong one (X ~ 1e4 and W ~ 1e-4 in `X * W`).
        for x in wrt:
            direction = rng.standard_normal(np.shape(given[x]))
            scale = max(float(np.max(np.abs(base[x]))) if np.size(base[x]) else 0.0, 1.0)
            h = step if step is not None else (1e-6 if exact else 3e-3) * scale
            phi = []
            for sign in (1.0, -1.0):
                args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in base.items()}
                args[x] = (base[x] + sign * h * direction).astype(base[x].dtype)
                phi.append(float(np.sum(ybar64 * _output(forward(**args), of, args, names))))
            n = (phi[0] - phi[1]) / (2 * h)
            a = float(np.sum(grads[x] * direction))
            numeric.append(n)
            analytic.append(a)
            # Relative to the size of the terms summed, so a directional derivative that cancels
            # to nearly zero is not held to a relative accuracy no computation has.
            magnitude = float(np.sum(np.abs(grads[x]))) / max(1, np.size(grads[x]))
            bound = tol * max(abs(a), abs(n), magnitude)
            if not abs(a - n) <= bound:
                raise AssertionError(f"gradient of {of} with respect to {x}: the gradient kernel gives a "
                                     f"directional derivative of {a!r}, finite differences {n!r} (difference "
                                     f"{abs(a - n):.3g} > {bound:.3g}, rtol {tol})")
    return GradCheck(tuple(analytic), tuple(numeric), tol)
