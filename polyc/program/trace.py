"""Tracing a `@pc.program` function once, on symbolic tensor handles, into a list of operator calls.

The function's parameters are annotated with tensor types (`pc.f32["S", "D"]`); tracing calls it
once with a `TensorHandle` per parameter.  Each kernel call inside (`matmul(A=x, B=w)`) does not
compute anything: it records a `Node` (the kernel, which program tensor each of its parameters is
bound to, folded scalar values) and returns handles for the kernel's outputs.  Shapes are checked
at the call, in the program's own size symbols, so a mismatch names the user's line.
"""
from __future__ import annotations

import inspect
import math
import numbers
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..errors import PolycError, ProgramError, SourceLocation
from ..ir import Affine, DType, TensorType, promote
from .dtypes import output_dtypes

_STATE = threading.local()


@dataclass(frozen=True)
class TensorHandle:
    """A symbolic tensor of a program being traced: a name, an element type and a shape in the
    program's size symbols.  It has no data; kernels called on it record operators."""

    name: str
    dtype: Optional[DType]
    shape: Tuple[Affine, ...]
    producer: Optional[int] = None     # index of the node that produces it (None: program input)
    tracer: Any = field(default=None, repr=False, compare=False)

    __polyc_traced__ = True

    def record_call(self, kernel: Any, kwargs: Mapping[str, Any]) -> Any:
        """What `Kernel.__call__` does when called on a traced tensor: record the operator (the API
        asks the tensor, so it never imports the program package, which builds on the API)."""
        return trace_call(kernel, kwargs)

    def refused_as_array(self, callee: str) -> ProgramError:
        """The error for passing this tensor where arrays are needed: a compiled kernel or a
        program called inside a program (the API asks the tensor, as for `record_call`)."""
        return ProgramError(f"{callee} got tensor {self.name}, which is symbolic while a program is traced; inside "
                            f"a @pc.program call kernels made by pc.kernel (kernel(X=...)), not compiled kernels "
                            f"(pc.compile(kernel)) or other programs", _user_location(self.tracer))

    def __array__(self, *args, **kwargs):  # numpy on a handle is a user error, not a silent object array
        raise ProgramError(f"tensor {self.name} is symbolic while a program is traced; only polyc kernels "
                           f"can be applied to it", _user_location(self.tracer))


@dataclass(frozen=True)
class Node:
    """One operator call: `kernel` with its tensor parameters bound to program tensors
    (`bindings`: kernel tensor name -> program tensor name), its scalar parameters folded
    (`scalars`), and its kernel sizes expressed in program sizes (`sizes`)."""

    index: int
    kernel: Any
    bindings: Tuple[Tuple[str, str], ...]
    scalars: Tuple[Tuple[str, Any], ...]
    sizes: Tuple[Tuple[str, Affine], ...]
    location: Optional[SourceLocation]
    #: The prefix of every name this call adds to the program (its results, statements, temps and
    #: iterators): unique in the trace (`Tracer.label`).
    name: str

    def binding(self, kernel_tensor: str) -> str:
        return dict(self.bindings)[kernel_tensor]

    @property
    def inputs(self) -> Tuple[str, ...]:
        roles = {t.name: t.role for t in self.kernel.program.tensors}
        return tuple(p for k, p in self.bindings if roles[k] == "input")

    @property
    def outputs(self) -> Tuple[str, ...]:
        roles = {t.name: t.role for t in self.kernel.program.tensors}
        return tuple(p for k, p in self.bindings if roles[k] == "output")

    @property
    def updates(self) -> Tuple[str, ...]:
        """Tensors the operator reads and updates in place (kernel role "inout"): only the
        accumulating halves that row blocks make (`blocking.split_accumulation`) have any."""
        roles = {t.name: t.role for t in self.kernel.program.tensors}
        return tuple(p for k, p in self.bindings if roles[k] == "inout")


def _defining(kernel: Any, kwargs: Mapping[str, Any]) -> Any:
    """`kernel` with each array it updates in place but defines first (a loop kernel's `c[j] = 0.0`
    then `c[j] += ...`: isl proves no read sees a value from before the call) made an output, when
    the call does not pass that array: its result is then the operator's, as an Einstein `+=!`'s."""
    program = kernel.program
    defining = [t.name for t in program.tensors if t.role == "inout" and t.name not in kwargs]
    if not defining or not set(defining) <= kernel.model.defined_before_read:
        return kernel
    tensors = tuple(replace(t, role="output") if t.name in defining else t for t in program.tensors)
    return type(kernel)(program.with_(tensors=tensors), function=kernel.function)


class Tracer:
    """Records the nodes of one trace; every handle it makes has a program-unique name."""

    def __init__(self, function: Callable):
        self.function = function
        self.nodes: List[Node] = []
        self.handles: Dict[str, TensorHandle] = {}
        self.sizes: List[str] = []
        #: a size `_rescale` made -> the input size it divides and by how much (names only)
        self.rescaled: Dict[str, Tuple[str, int]] = {}

    def input(self, name: str, declared: TensorType) -> TensorHandle:
        for dim in declared.shape:
            for v in dim.variables:
                if v not in self.sizes:
                    self.sizes.append(v)
        h = TensorHandle(name, declared.dtype, declared.shape, None, self)
        self.handles[name] = h
        return h

    def location(self) -> Optional[SourceLocation]:
        return _user_location(self)

    def call(self, kernel: Any, kwargs: Mapping[str, Any]) -> Any:
        """Record `kernel(**kwargs)` and return handles for its outputs (one, or a dict by name)."""
        where = self.location()
        kernel = _defining(kernel, kwargs)
        program = kernel.program
        if program.int_params:
            raise ProgramError(f"kernel {kernel.name} has integer parameters ({', '.join(program.int_params)}); "
                               f"programs take kernels whose sizes all come from their input shapes", where)
        roles = {t.name: t for t in program.tensors}
        scalar_names = {s.name for s in program.scalars}
        unknown = sorted(set(kwargs) - set(roles) - scalar_names)
        sized = [u for u in unknown if u in program.sizes]
        if sized:
            raise ProgramError(f"{sized[0]} is a size of kernel {kernel.name}; inside a program every size comes "
                               f"from the input shapes, so it cannot be passed", where)
        if unknown:
            raise ProgramError(f"kernel {kernel.name} has no parameter {', '.join(unknown)}", where)
        bindings: List[Tuple[str, str]] = []
        sizes: Dict[str, Affine] = {}
        pending: List[Tuple[str, int, Affine, Affine]] = []
        dtype: Optional[DType] = None
        for t in program.tensors:
            if t.role in ("inout",):
                raise ProgramError(f"kernel {kernel.name} updates {t.name} in place (it reads values {t.name} had "
                                   f"before the call); programs take kernels that define their outputs: write "
                                   f"every element before reading it (`{t.name}[j] = 0.0` first in a loop kernel, "
                                   f"`+=!` in Einstein notation)", where)
            if t.role != "input":
                continue
            if t.name not in kwargs:
                raise ProgramError(f"kernel {kernel.name} needs its input {t.name}", where)
            h = kwargs[t.name]
            if not isinstance(h, TensorHandle) or h.tracer is not self:
                raise ProgramError(f"input {t.name} of kernel {kernel.name} must be a tensor of this program "
                                   f"(a parameter or a kernel's result), not {type(h).__name__}", where)
            h = self.handles[h.name]    # its shape as the trace now sizes it (see `_rescale`)
            if len(h.shape) != len(t.shape):
                raise ProgramError(f"kernel {kernel.name} takes {t.name} of rank {len(t.shape)}, but {h.name} has "
                                   f"rank {len(h.shape)} (shape [{', '.join(map(str, h.shape))}])", where)
            if h.dtype is not None and t.dtype is not None and h.dtype != t.dtype:
                raise ProgramError(f"kernel {kernel.name} declares {t.name} as {t.dtype.name}, but {h.name} is "
                                   f"{h.dtype.name}", where)
            if h.dtype is not None and t.dtype is None and dtype is not None and h.dtype != dtype \
                    and h.dtype.is_float and dtype.is_float:      # as the kernel alone refuses them
                raise ProgramError(f"kernel {kernel.name} takes its undeclared float tensors in one type, but "
                                   f"{h.name} is {h.dtype.numpy_name} where an earlier one is {dtype.numpy_name}; "
                                   f"convert one with a kernel, or declare the kernel's types", where)
            if h.dtype is not None:
                dtype = h.dtype if dtype is None else promote(dtype, h.dtype)
            bindings.append((t.name, h.name))
            for axis, (mine, theirs) in enumerate(zip(t.shape, h.shape)):
                pending.append((t.name, axis, mine, theirs))
        while True:   # bind a kernel size from a dimension where it is the one unknown: `a*v + rest`
            ready = [(abs(mine.coeff(u[0])), k) for k, (_, _, mine, _) in enumerate(pending)
                     for u in [[v for v in mine.variables if v not in sizes]] if len(u) == 1]
            if not ready:
                break
            scale, k = min(ready)          # prefer `v + rest`: a scaled dimension may rescale the program
            t_name, axis, mine, _ = pending[k]
            var = next(v for v in mine.variables if v not in sizes)
            sign = 1 if mine.coeff(var) > 0 else -1
            theirs = self.handles[kwargs[t_name].name].shape[axis]
            multiple = (theirs - (mine - Affine.var(var, mine.coeff(var))).substitute(sizes)).scale(sign)
            if not _divisible(multiple, scale):
                mapping = self._rescale(multiple, scale, kernel.name, t_name, axis, where)
                sizes = {v: e.substitute(mapping) for v, e in sizes.items()}
                multiple = multiple.substitute(mapping)
            sizes[var] = _quotient(multiple, scale)
        pending = [(t_name, axis, mine, self.handles[kwargs[t_name].name].shape[axis])
                   for t_name, axis, mine, _ in pending]
        for t_name, axis, mine, theirs in pending:
            missing = [v for v in mine.variables if v not in sizes]
            if missing:
                raise ProgramError(f"size {missing[0]} of kernel {kernel.name} is not fixed by any input shape",
                                   where)
            if mine.substitute(sizes) != theirs:
                h = kwargs[t_name]
                raise ProgramError(f"shape mismatch: kernel {kernel.name} needs {t_name}.shape[{axis}] = "
                                   f"{mine.substitute(sizes)}, but {h.name}.shape[{axis}] = {theirs}", where)
        sizes.update(_derived(kernel, sizes, where))
        for s in program.sizes:
            if s not in sizes:
                raise ProgramError(f"size {s} of kernel {kernel.name} is not fixed by any input shape", where)
        scalars: List[Tuple[str, Any]] = []
        for s in program.scalars:
            if s.name not in kwargs:
                raise ProgramError(f"kernel {kernel.name} needs its scalar {s.name} (a Python number, folded "
                                   f"into the program)", where)
            v = kwargs[s.name]
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise ProgramError(f"scalar {s.name} of kernel {kernel.name} must be a Python number, not "
                                   f"{type(v).__name__}", where)
            scalars.append((s.name, v))
        index = len(self.nodes)
        label = self.label(kernel.name, index)
        results: Dict[str, TensorHandle] = {}
        known = {k: self.handles[p].dtype for k, p in bindings}
        # the kernel's own answer for these inputs (`scale` of an int32 by 0.5 is float64); with
        # an input whose type comes only with the call, the call decides (`dtypes.call_dtypes`)
        out_types = output_dtypes(kernel, known) if all(v is not None for v in known.values()) else {}
        for t in program.tensors:
            if t.role != "output":
                continue
            name = f"{label}_{t.name}"
            h = TensorHandle(name, out_types.get(t.name, t.dtype), tuple(d.substitute(sizes) for d in t.shape),
                             index, self)
            self.handles[name] = h
            bindings.append((t.name, name))
            results[t.name] = h
        self.nodes.append(Node(index, kernel, tuple(bindings), tuple(scalars), tuple(sizes.items()), where, label))
        return next(iter(results.values())) if len(results) == 1 else results

    def _rescale(self, multiple: Affine, scale: int, kernel: str, tensor: str, axis: int,
                 where: Optional[SourceLocation]) -> Dict[str, Affine]:
        """Make the program size `P` in `multiple = P + rest` a multiple of `scale` plus an offset:
        `P := scale * P2 - rest`, everywhere in the trace, so `multiple` becomes `scale * P2`.

        A kernel whose input is declared `2*H` (average pooling, a strided convolution) takes only
        even extents; called on a tensor of program extent `H - 2`, the program's `H` is not free
        any more but `2*H_2 + 2`.  The program's inputs then say so, and a call with an odd extent
        is refused by the argument check, as the kernel alone would refuse it.  Returns the
        substitution, for what the caller holds."""
        size = next((v for v in multiple.variables if v in self.sizes and multiple.coeff(v) == 1), None)
        if size is not None:         # `P + rest`: P := scale * P2 - rest
            step, mapping_of = scale, (lambda fresh: Affine.var(fresh, scale) - (multiple - Affine.var(size)))
        else:                        # `b * P + r` (pooled by 2, now by 3): P := (scale / g) * P2 + p0
            size = multiple.variables[0] if len(multiple.variables) == 1 and multiple.variables[0] in self.sizes \
                else None
            b, r = (multiple.coeff(size), multiple.constant) if size is not None else (0, 0)
            g = math.gcd(b, scale) if size is not None else 0
            if size is None or r % g:
                raise ProgramError(f"kernel {kernel} needs {tensor}.shape[{axis}] to be a multiple of {scale}, but "
                                   f"it is {multiple} in the program's sizes; declare the program input's extent "
                                   f"as a multiple of {scale}", where)
            p0 = next(p for p in range(scale // g) if (b * p + r) % scale == 0)
            step, mapping_of = scale // g, (lambda fresh: Affine.var(fresh, scale // g) + p0)
        base, before = self.rescaled.get(size, (size, 1))
        fresh = f"{base}_{before * step}"      # `H_2`; pooled twice, `H_4`
        while fresh in self.sizes or fresh in self.handles:
            fresh += "x"
        mapping = {size: mapping_of(fresh)}
        self.sizes[self.sizes.index(size)] = fresh
        self.rescaled[fresh] = (base, before * step)
        self.handles = {n: replace(h, shape=tuple(d.substitute(mapping) for d in h.shape))
                        for n, h in self.handles.items()}
        self.nodes = [replace(n, sizes=tuple((k, e.substitute(mapping)) for k, e in n.sizes)) for n in self.nodes]
        return mapping

    def label(self, kernel_name: str, index: int) -> str:
        """The prefix of the names call `index` adds: the kernel's name and the index, unless that
        is another call's (kernel `s1` at 0 and `s` at 10 both make `s10`) or begins a name the
        program already has (an input called `s0_Y`); then letters are added until it is free."""
        label = f"{kernel_name}{index}"
        taken = {n.name for n in self.nodes}
        while label in taken or any(h.startswith(label + "_") for h in self.handles):
            label += "x"     # a natural label ends in a digit: this one can be no other's
        return label


def _divisible(e: Affine, k: int) -> bool:
    return e.constant % k == 0 and all(c % k == 0 for _, c in e.terms)


def _quotient(e: Affine, k: int) -> Affine:
    """`e / k` for `e` whose coefficients `k` divides (its constant floored)."""
    return Affine.from_dict({v: c // k for v, c in e.terms}, e.constant // k)


def _user_location(tracer: Optional[Tracer]) -> Optional[SourceLocation]:
    """The line of the traced program function currently executing (the user's call site)."""
    if tracer is None:
        return None
    code = getattr(tracer.function, "__code__", None)
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code is code:
            info = inspect.getframeinfo(frame, context=1)
            text = info.code_context[0].rstrip("\n") if info.code_context else ""
            column = len(text) - len(text.lstrip()) + 1
            return SourceLocation(frame.f_lineno, column, text, frame.f_code.co_filename)
        frame = frame.f_back
    return None


def _traceback_location(error: BaseException, function: Callable) -> Optional[SourceLocation]:
    """The last line of `function` in the traceback of `error` (where the user's code failed)."""
    code = getattr(function, "__code__", None)
    found = None
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            found = tb
        tb = tb.tb_next
    if found is None:
        return None
    import linecache
    text = linecache.getline(code.co_filename, found.tb_lineno).rstrip("\n")
    return SourceLocation(found.tb_lineno, len(text) - len(text.lstrip()) + 1, text, code.co_filename)


def active_tracer() -> Optional[Tracer]:
    return getattr(_STATE, "tracer", None)


def trace_call(kernel: Any, kwargs: Mapping[str, Any]) -> Any:
    """The hook `Kernel.__call__` takes when called on traced handles."""
    tracer = next((v.tracer for v in kwargs.values() if isinstance(v, TensorHandle)), None)
    if tracer is None or tracer is not active_tracer():
        raise ProgramError(f"kernel {kernel.name} was called on a symbolic tensor outside the trace of its program")
    return tracer.call(kernel, kwargs)


def _derived(kernel: Any, sizes: Mapping[str, Affine], where: Optional[SourceLocation]) -> Dict[str, Affine]:
    """The kernel's sizes computed at call time (`floor(num / d)`: a strided output's extent) in
    the program's sizes.  A program's sizes are affine, so each must come out affine: the
    numerator's size coefficients divisible by `d` (a pooling by 2 of an input declared `2*H`)."""
    out: Dict[str, Affine] = {}
    for name, num, d in kernel.program.derived_sizes:
        n = num.substitute({**sizes, **out})
        if any(c % d for _, c in n.terms):
            raise ProgramError(f"kernel {kernel.name} computes its size {name} = floor(({num}) / {d}) at call "
                               f"time, which is floor(({n}) / {d}) here; inside a program every size is affine in "
                               f"the program's: declare the program input's extent so that {n} is a multiple "
                               f"of {d} plus a constant (e.g. pc.f32[\"{d}*H\"])", where)
        out[name] = _quotient(n, d)       # the coefficients divide exactly; the constant floors
    return out


def inline_program(name: str, function: Callable, declared: Mapping[str, TensorHandle],
                   given: Mapping[str, Any]) -> Any:
    """A program called inside another program's trace: its function runs on the caller's
    tensors, so its operators join the caller's program (one polyhedral program: fused, planned
    and differentiated across the boundary, as if written there).  The arguments are checked
    against the inner program's parameters: names, ranks, declared dtypes and the sizes they
    share (`X: [M, N]` and `b: [N]` given tensors of 5 and 4 columns is a mismatch)."""
    tracer = active_tracer()
    handles = [v for v in given.values() if isinstance(v, TensorHandle)]
    where = tracer.location() if tracer is not None else None
    if tracer is None or any(h.tracer is not tracer for h in handles):
        raise ProgramError(f"program {name} was called on a symbolic tensor outside the trace of its program", where)
    unknown = sorted(set(given) - set(declared))
    missing = [x for x in declared if x not in given]
    if unknown or missing:
        raise ProgramError(f"program {name} takes {', '.join(declared)}; " +
                           (f"{', '.join(unknown)} given" if unknown else f"{', '.join(missing)} missing"), where)
    sizes: Dict[str, Affine] = {}
    for x, want in declared.items():
        h = given[x]
        if not isinstance(h, TensorHandle):
            raise ProgramError(f"program {name}'s argument {x} must be a tensor of the calling program, not "
                               f"{type(h).__name__}", where)
        if len(h.shape) != len(want.shape):
            raise ProgramError(f"program {name} takes {x} of rank {len(want.shape)}, but {h.name} has rank "
                               f"{len(h.shape)}", where)
        if want.dtype is not None and want.dtype != h.dtype:
            raise ProgramError(f"program {name} declares {x} as {want.dtype.name}, but {h.name} is "
                               f"{h.dtype.name if h.dtype else 'of a type the call chooses (pc.tensor)'}", where)
        for d, (mine, theirs) in enumerate(zip(want.shape, h.shape)):
            v = mine.as_single_var()
            if v is not None and sizes.setdefault(v, theirs) != theirs:
                raise ProgramError(f"shape mismatch: program {name} needs {x}.shape[{d}] = {v}, which another "
                                   f"argument makes {sizes[v]}, but {h.name}.shape[{d}] = {theirs}", where)
    for x, want in declared.items():      # the other extents (`3`, `2*H`) once the sizes are bound
        for d, (mine, theirs) in enumerate(zip(want.shape, given[x].shape)):
            if mine.as_single_var() is not None:
                continue
            free = [v for v in mine.variables if v not in sizes]
            if len(free) == 1:               # `2*D` against the caller's `2*E`: D is E
                v, c = free[0], mine.coeff(free[0])
                rest = theirs - (mine - Affine.var(v, c)).substitute(sizes)
                if _divisible(rest, c):
                    sizes[v] = _quotient(rest, c)
            if not all(v in sizes for v in mine.variables):
                raise ProgramError(f"program {name} needs {x}.shape[{d}] = {mine}, which {given[x].name}.shape[{d}] "
                                   f"= {theirs} need not be; declare the calling program's extent as {mine} "
                                   f"(in its own sizes)", where)
            if mine.substitute(sizes) != theirs:
                here = f", which is {mine.substitute(sizes)} here" if mine.variables else ""
                raise ProgramError(f"shape mismatch: program {name} needs {x}.shape[{d}] = {mine}{here}, but "
                                   f"{given[x].name}.shape[{d}] = {theirs}; declare the calling program's extent "
                                   f"to match", where)
    return function(**given)


def trace(function: Callable) -> Tuple[Tracer, Dict[str, TensorHandle], Any]:
    """Run `function` once on handles for its annotated parameters; returns the tracer, the input
    handles and what the function returned (a handle, a tuple or a dict of handles)."""
    try:  # `from __future__ import annotations` leaves them as text
        sig = inspect.signature(function, eval_str=True)
    except Exception as e:
        raise ProgramError(f"the annotations of program {getattr(function, '__name__', function)} cannot be "
                           f"evaluated: {e}") from e
    tracer = Tracer(function)
    inputs: Dict[str, TensorHandle] = {}
    for p in sig.parameters.values():
        ann = p.annotation
        if isinstance(ann, DType):
            ann = TensorType(ann, ())
        if not isinstance(ann, TensorType):
            raise ProgramError(f"parameter {p.name} of program {function.__name__} needs a tensor type annotation "
                               f"such as pc.f32['N', 'D']")
        inputs[p.name] = tracer.input(p.name, ann)
    previous = active_tracer()
    _STATE.tracer = tracer
    try:
        result = function(**inputs)
    except PolycError:
        raise
    except Exception as e:   # numpy, arithmetic or a call of something that is not a kernel
        raise ProgramError(f"tracing program {getattr(function, '__name__', function)} raised {type(e).__name__}: {e} "
                           f"(a program's function applies polyc kernels to its tensors, nothing else)",
                           _traceback_location(e, function)) from e
    finally:
        _STATE.tracer = previous
    return tracer, inputs, result


def returned_handles(result: Any, function: Callable) -> Tuple[Tuple[str, TensorHandle], ...]:
    """The program's outputs as (name, handle): a dict keeps its keys; a single handle is `out`;
    a tuple is `out0`, `out1`, ..."""
    if isinstance(result, TensorHandle):
        items = [("out", result)]
    elif isinstance(result, dict):
        items = list(result.items())
    elif isinstance(result, (tuple, list)):
        items = [(f"out{k}", h) for k, h in enumerate(result)]
    else:
        raise ProgramError(f"program {function.__name__} must return tensors it computed (a handle, a tuple "
                           f"or a dict of them), not {type(result).__name__}")
    for name, h in items:
        if not isinstance(h, TensorHandle):
            raise ProgramError(f"program {function.__name__} returns {type(h).__name__} as {name}; return "
                               f"tensors computed by kernels")
    return tuple(items)
