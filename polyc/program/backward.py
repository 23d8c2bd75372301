"""The backward pass of an operator program, as an operator program: `program.grad(of=..., wrt=...)`.

`pc.grad(program, ...)` differentiates the program's traced kernel as one kernel.  This module
builds the reverse-mode program operator by operator instead, so the backward runs like any
program: fused groups, BLAS for its matrix products, row blocks, a memory plan.

- **Forward values.** The backward program calls the forward operators again (those whose results
  the gradients read; `remove_dead` drops the rest) unless the caller passes them (`saved`).
- **One gradient kernel per operator** (`pc.grad` of the operator's kernel, of each of its results
  that has an adjoint, with respect to its inputs that depend on `wrt`), reading the operator's
  results where the kernel's gradient can use them (softmax's output) rather than recomputing them.
  A matrix product's gradient is split per operand, so each part is a plain product the vendor
  call recognises; a gradient that only copies its seed (a bias addition's `X_grad = Y_grad`) is
  not run: the adjoint is the seed itself.
- **Adjoints add up**: a tensor read by several operators (or twice by one) receives the sum of
  their contributions, through an elementwise addition that fusion folds into its producers.
- An input of `wrt` that the output does not depend on gets zeros.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import GradError
from ..ir import Access, Affine, TensorType
from .trace import Node, TensorHandle
from .vendor import recognise_gemm, runs_over_box


@dataclass(frozen=True)
class _Step:
    """One gradient kernel of an operator: `kernel` = `pc.grad(operator kernel, of=out, wrt=inputs)`
    (kernel tensor names), reading the operator's results and intermediates `reads`; `kernel` None:
    the gradient of the one input only copies the seed, which is then its adjoint."""

    out: str
    inputs: Tuple[str, ...]
    kernel: Any
    reads: Tuple[str, ...] = ()


class _Kernels:
    """The kernels the backward program calls, made once each, so that two calls of the same one
    on the same tensors are recognised as one (`share_common` compares kernels by identity)."""

    def __init__(self, pad_borders: bool):
        self.pad_borders = pad_borders
        self._made: Dict[tuple, Tuple[Any, Any]] = {}

    def _once(self, key: tuple, make: Any, keep_alive: Any = None) -> Any:
        if key not in self._made:
            self._made[key] = (make(), keep_alive)   # what `key` holds the id of is kept alive
        return self._made[key][0]

    def grad(self, kernel: Any, out: str, inputs: Tuple[str, ...]) -> Any:
        """The gradient kernel, taking the forward values it reads among the operator's results
        and its small intermediates (reductions' results: softmax's row sums, layernorm's mean)
        from the caller rather than recomputing them."""
        def make() -> Any:
            from ..grad import grad
            from ..grad.exprs import tensors_read

            def built(saved: Tuple[str, ...] = ()) -> Any:
                return grad(kernel, of=out, wrt=list(inputs), saved=list(saved), pad_borders=self.pad_borders)
            offered = _offered(kernel)
            if offered:
                try:
                    g = built(offered)
                except GradError:
                    return built()
                read = set().union(*(tensors_read(st.value) for st in g.program.statements))
                used = tuple(t for t in offered if t in read)
                if used == offered:
                    return g
                if used:   # only what it reads: each saved value is one the program keeps or recomputes
                    return built(used)
            return built()
        return self._once(("grad", id(kernel), out, inputs), make, kernel)

    def returning(self, kernel: Any, temps: Tuple[str, ...]) -> Any:
        from ..api import returning
        return self._once(("returning", id(kernel), temps), lambda: returning(kernel, *temps), kernel)

    def add(self, rank: int) -> Any:
        return self._make(("add", rank), "Y{ix} = A{ix} + B{ix}", f"adjoint_add{rank}", ("A", "B", "Y"))

    def copy(self, rank: int) -> Any:
        """`X` itself: the gradient of an input that reaches the output unchanged is the seed,
        and a program returns what it computed, not one of its inputs."""
        return self._make(("copy", rank), "Y{ix} = X{ix}", f"adjoint_copy{rank}", ("X", "Y"))

    def zeros(self, rank: int) -> Any:
        """Zeros shaped like its input `X` (which it declares, for the shape, and never reads)."""
        return self._make(("zeros", rank), "Y{ix} = 0.0", f"zeros{rank}", ("X", "Y"))

    def _make(self, key: tuple, text: str, name: str, tensors: Tuple[str, ...]) -> Any:
        """An elementwise kernel of rank `key[1]` over `tensors`, declared (rank 0: tensors, not
        scalars; any element type)."""
        def make() -> Any:
            from ..api import kernel
            rank = key[1]
            index = f"[{', '.join(f'i{d}' for d in range(rank))}]" if rank else ""
            shape = TensorType(None, tuple(Affine.var(f"N{d}") for d in range(rank)))
            return kernel(text.format(ix=index), name=name, **{t: shape for t in tensors})
        return self._once(key, make)


def _offered(kernel: Any) -> Tuple[str, ...]:
    """The forward values of an operator its gradient may take instead of recomputing: its results,
    and an Einstein kernel's intermediates of lower rank than its largest result (what reductions
    leave: a row's maximum and sum, a mean), which cost little memory to keep."""
    p = kernel.program
    outputs = [t for t in p.tensors if t.role == "output"]
    rank = max((len(t.shape) for t in outputs), default=0)
    small = [t.name for t in p.tensors if t.role == "temp" and len(t.shape) < rank] if kernel.function is None else []
    return tuple(t.name for t in outputs) + tuple(small)


def _node_steps(n: Node, active: set, kernels: _Kernels) -> List[_Step]:
    """The gradient kernels of operator `n`, per result: one for its inputs that depend on `wrt`,
    except a matrix product's (one per operand: each a plain product, for the vendor call) and an
    elementwise operator's inputs whose gradient only copies the seed (not run)."""
    roles = {t.name: t.role for t in n.kernel.program.tensors}
    wrt_k = tuple(dict.fromkeys(k for k, p in n.bindings if roles[k] == "input" and p in active))
    steps: List[_Step] = []
    gemm = recognise_gemm(n) is not None
    for out in (k for k, p in n.bindings if roles[k] == "output" and p in active):   # (an integer result has none)
        parts = [(x,) for x in wrt_k] if gemm else [wrt_k]
        if not gemm and len(wrt_k) > 1 and len(n.kernel.program.statements) == 1:
            copies = [x for x in wrt_k if _copies_seed(kernels.grad(n.kernel, out, (x,)))]
            steps += [_Step(out, (x,), None) for x in copies]
            rest = tuple(x for x in wrt_k if x not in copies)
            parts = [rest] if rest else []
        for part in parts:
            g = kernels.grad(n.kernel, out, part)
            if len(part) == 1 and _copies_seed(g):
                steps.append(_Step(out, part, None))
            else:
                steps.append(_Step(out, part, g, tuple(g.grad_names.saved)))
    return steps


def _copies_seed(g: Any) -> bool:
    """The gradient kernel only copies its seed: one statement `X_grad[idx] = seed[idx]` over the
    whole of both (isl compares the domain with the box of the shape)."""
    p = g.program
    if len(p.statements) != 1:
        return False
    st = p.statements[0]
    seed = g.grad_names.seed
    if st.update is not None or not isinstance(st.value, Access) or st.value.tensor != seed:
        return False
    if st.value.indices != st.target.indices:
        return False
    shapes = p.tensor_map
    if shapes[seed].shape != shapes[st.target.tensor].shape:
        return False
    loops = [ix.as_single_var() for ix in st.target.indices]
    if None in loops or len(st.iterators) != len(loops):
        return False
    return runs_over_box(g.model, st, loops, dict(zip(loops, shapes[seed].shape)))


def backward_program(program: Any, of: str, wrt: Union[str, Sequence[str]], *,
                     saved: Union[str, Sequence[str]] = (), pad_borders: bool = True) -> Any:
    """The reverse-mode program of operator program `program` (see the module docstring): its
    parameters are `program`'s inputs, the tensors named in `saved`, and the adjoint of output
    `of` (`<of>_grad`); it returns a dict of the gradients of `wrt` (`<x>_grad`).  Its options
    (target, vendor, fusion, blocks) are `program`'s; `.grad_names` records the names chosen."""
    from ..grad import GradNames
    from ..grad.exprs import fresh_name
    wrt = (wrt,) if isinstance(wrt, str) else tuple(wrt)
    saved = (saved,) if isinstance(saved, str) else tuple(saved)
    returned = dict(program.returned)
    if not isinstance(of, str) or of not in returned:
        raise GradError(f"of={of!r} is not an output of program {program.name!r}; its outputs are "
                        f"{', '.join(returned) or 'none'}")
    if not wrt or not all(isinstance(x, str) for x in wrt) or len(set(wrt)) != len(wrt):
        raise GradError(f"wrt must name distinct inputs of program {program.name!r}, not {list(wrt)!r}")
    unknown = [x for x in wrt if x not in program.inputs]
    if unknown:
        raise GradError(f"wrt names {', '.join(map(repr, unknown))}, which are not inputs of program "
                        f"{program.name!r} (inputs: {', '.join(program.inputs)})")
    handles: Mapping[str, TensorHandle] = program.handles
    integers = [x for x in wrt if handles[x].dtype is not None and not handles[x].dtype.is_float]
    if integers:
        raise GradError(f"input {integers[0]!r} of program {program.name!r} has the integer type "
                        f"pc.{handles[integers[0]].dtype.name}, which has no gradient")
    if not all(isinstance(s, str) for s in saved):
        raise GradError(f"saved must be tensor names, not {list(saved)!r}")
    if len(set(saved)) != len(saved):
        raise GradError(f"saved names a tensor twice: {list(saved)}")
    nodes: Sequence[Node] = program.trace_nodes
    computed = {p for n in nodes for p in n.outputs}
    saved_at: Dict[str, str] = {}     # saved name -> traced tensor
    for s in saved:
        t = returned.get(s, s)
        if t not in computed:
            raise GradError(f"saved names {s!r}, which is not a tensor program {program.name!r} computes (its "
                            f"outputs: {', '.join(returned)}; intermediates by their traced names: "
                            f"{', '.join(sorted(computed - set(returned.values())))})")
        saved_at[s] = t
    if len(set(saved_at.values())) != len(saved_at):
        raise GradError(f"saved names one tensor twice: {list(saved)}")
    for name, what in [(of, f"output {of!r}, whose adjoint is the parameter {of!r} + '_grad'")] + \
            [(s, f"saved tensor {s!r}") for s in saved]:
        if not name.isidentifier():
            raise GradError(f"program.grad makes a parameter of {what}, and parameters are Python identifiers; "
                            f"return it under a name like {_identifier(name)!r}, or use pc.grad(program, ...), "
                            f"whose kernel takes any name")
    target = returned[of]
    floats = {n for n, h in handles.items() if h.dtype is None or h.dtype.is_float}

    # Which tensors depend on `wrt` (forward) and which reach `of` (backward).
    active = set(wrt)
    for n in nodes:
        if any(p in active for p in n.inputs):
            active |= {p for p in n.outputs if p in floats}
    reaches = {target}
    on_path: List[Node] = []
    for n in reversed(nodes):
        if any(p in reaches for p in n.outputs) and any(p in active for p in n.inputs):
            on_path.append(n)
            reaches |= set(n.inputs)

    taken = set(program.inputs) | set(saved)
    seed = fresh_name(f"{of}_grad", taken)
    names = {x: fresh_name(f"{x}_grad", taken) for x in wrt}
    kernels = _Kernels(pad_borders)
    steps = [_node_steps(n, active, kernels) for n in on_path]
    keeps: Dict[int, Tuple[str, ...]] = {}   # node -> intermediates its gradients read
    for n, node_steps in zip(on_path, steps):
        temps = {t.name for t in n.kernel.program.tensors if t.role == "temp"}
        keeps[n.index] = tuple(sorted({t for st in node_steps for t in st.reads if t in temps}))

    def backward(**given: TensorHandle) -> Dict[str, TensorHandle]:
        env: Dict[str, TensorHandle] = {x: given[x] for x in program.inputs}
        env.update({t: given[s] for s, t in saved_at.items()})
        values: Dict[int, Dict[str, TensorHandle]] = {}   # node -> its kept intermediates
        for n in nodes:   # the forward values (unused ones are removed from the program as dead)
            keep = keeps.get(n.index, ())
            if all(p in env for p in n.outputs) and not keep:
                continue
            forward = kernels.returning(n.kernel, keep) if keep else n.kernel
            results = _call(forward, n, env)
            for k, p in n.bindings:
                if p in n.outputs and p not in env:
                    env[p] = results[k]
            values[n.index] = {t: results[t] for t in keep}
        adj: Dict[str, TensorHandle] = {target: given[seed]}

        def receive(tensor: str, value: TensorHandle) -> None:
            adj[tensor] = value if tensor not in adj else kernels.add(len(value.shape))(A=adj[tensor], B=value)

        for n, node_steps in zip(on_path, steps):
            bound = dict(n.bindings)
            for st in node_steps:
                if bound[st.out] not in adj:
                    continue
                seed_value = adj[bound[st.out]]
                if st.kernel is None:      # the gradient only copies its seed
                    receive(bound[st.inputs[0]], seed_value)
                    continue
                out = _call(st.kernel, n, env, values.get(n.index, {}), seed=(st.kernel.grad_names.seed, seed_value))
                for x in st.inputs:
                    receive(bound[x], out[st.kernel.grad_names[x]])
        result: Dict[str, TensorHandle] = {}
        for x in wrt:
            if x in adj and adj[x].producer is None:   # the seed itself (`u` in `f(x) + u`)
                result[names[x]] = kernels.copy(len(adj[x].shape))(X=adj[x])
            elif x in adj:
                result[names[x]] = adj[x]
            else:
                result[names[x]] = kernels.zeros(len(env[x].shape))(X=env[x])
        return result

    def param(name: str, tensor: str) -> inspect.Parameter:   # typed like the forward's tensor
        h = handles[tensor]
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=TensorType(h.dtype, h.shape))
    params = [param(x, x) for x in program.inputs] + [param(s, t) for s, t in saved_at.items()] + [param(seed, target)]
    backward.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    backward.__name__ = f"{program.name}_grad"
    out = type(program)(backward, **program.options)   # an OperatorProgram, as the forward
    out.grad_names = GradNames(of, seed, tuple((x, names[x]) for x in wrt), tuple(saved))  # type: ignore[attr-defined]
    return out


def _identifier(name: str) -> str:
    """`name` with what is not allowed in a Python identifier replaced by `_`."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "_"
    return out if out.isidentifier() else "_" + out


def _call(kernel: Any, node: Node, env: Mapping[str, TensorHandle], kept: Mapping[str, TensorHandle] = {},
          seed: Optional[Tuple[str, TensorHandle]] = None) -> Dict[str, TensorHandle]:
    """Call `kernel` (the operator's own or one of its gradients) on the program tensors the
    operator's parameters are bound to (its kept intermediates from `kept`, its adjoint `seed`),
    with the operator's scalars; its results by name."""
    bound = dict(node.bindings)
    kwargs: Dict[str, Any] = {}
    for t in kernel.program.tensors:
        if t.role != "input":
            continue
        if seed is not None and t.name == seed[0]:
            kwargs[t.name] = seed[1]
        elif t.name in kept:
            kwargs[t.name] = kept[t.name]
        else:
            kwargs[t.name] = env[bound[t.name]]
    scalars = dict(node.scalars)
    kwargs.update({s.name: scalars[s.name] for s in kernel.program.scalars})
    result = kernel(**kwargs)
    if isinstance(result, TensorHandle):
        outs = [t.name for t in kernel.program.tensors if t.role == "output"]
        return {outs[0]: result}
    return dict(result)
