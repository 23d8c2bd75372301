"""`check_kernel`: run a compiled kernel (any schedule) and its reference on the same random inputs.

Inputs are built from the kernel's own declarations: each non-temporary tensor gets an array of
the shape its `TensorDecl.shape` (affine in the size symbols) takes for the given sizes; scalars
get random values of their type; sizes that no array shape determines (e.g. a time-step count
`T` used only as a loop bound) are passed by keyword.  Float inputs take both signs (magnitudes
0.5 to 1.5), signed integers -9 to 9.  Outputs are passed filled with a value no computation gives
(`unwritten_value`: NaN for floats), so the compiled kernel and the reference write into
identical arrays and an element the compiled kernel forgets to initialise shows; the compiled
kernel then runs again allocating its outputs itself, which must agree.  Integer results compare
exactly, float results within their type's tolerances.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..ir import Call, DType, dtype_of_numpy
from ..codegen.typing import resolve_typing
from ..frontend.reference import with_derived_sizes
from ..runtime.loader import parallel_threshold
from ..ir import types as _types

#: Default comparison tolerances (rtol, atol) by element type name.
TOLERANCES = {"f32": (2e-4, 1e-5), "f64": (1e-9, 1e-11), "i32": (0, 0), "i64": (0, 0)}

_WRITTEN = ("output", "inout")


def check_proven(kernel, schedule: Any) -> None:
    """Prove `schedule` again, from scratch, against `kernel`'s exact dependences, as every
    primitive proves its result (`rewrite.validate`): the whole schedule is legal and every mark
    holds (parallel, vector, their reduction forms, CUDA blocks and threads: only what a mark may
    carry is carried).  Raises `IllegalScheduleError` naming the broken dependence; for tests of
    schedules built by hand, by `"auto"`, by the tuner, or read back from a file."""
    from ..schedule.rewrite import validate
    validate(schedule, "the schedule")


def as_kernel(kernel: Any) -> Any:
    """The kernel the testing tools check: a kernel itself, or an operator program's combined
    kernel (`prog.kernel`: every statement of every operator, its reference the interpreter's)."""
    if all(hasattr(kernel, a) for a in ("kernel", "outputs", "inputs", "trace_nodes")):
        return kernel.kernel
    if not hasattr(kernel, "program") or not hasattr(kernel, "schedule"):
        from ..errors import PolycError
        raise PolycError(f"the testing tools check a kernel (pc.kernel) or an operator program (@pc.program), "
                         f"not {type(kernel).__name__}")
    return kernel


def _dtype(name_or_dtype: Any) -> DType:
    return _types.as_dtype(name_or_dtype)


def default_sizes(kernel) -> Dict[str, int]:
    """Small, mutually different sizes (5, 6, 7, 5, ...) so that transposed indexing shows."""
    from ..runtime.arguments import size_symbols
    derived = {name for name, _, _ in kernel.program.derived_sizes}     # computed from the others
    free = [name for name in size_symbols(kernel.program) if name not in derived]
    return {name: 5 + k % 3 for k, name in enumerate(free)}


def _np(d: DType) -> np.dtype:
    return d.numpy


def random_inputs(kernel, sizes: Optional[Mapping[str, int]] = None, dtype: Any = "f64",
                  seed: int = 0) -> Dict[str, Any]:
    """Keyword arguments for one call: arrays for every non-temp tensor (outputs filled with
    `unwritten_value`), scalar values, and sizes no input shape determines."""
    program = kernel.program
    sizes = with_derived_sizes(program, default_sizes(kernel) if sizes is None else sizes)
    derived = {name for name, _, _ in program.derived_sizes}
    rng = np.random.default_rng(seed)
    base = _dtype(dtype)
    out: Dict[str, Any] = {}
    outputs: Dict[str, Tuple[int, ...]] = {}
    shaped = set()
    for t in program.tensors:
        if t.role == "temp":
            continue
        try:
            shape = tuple(int(e.evaluate(sizes)) for e in (t.shape or ()))
        except KeyError as missing:
            raise ValueError(f"sizes {sizes} do not give {t.name} a shape: they lack {missing}; the kernel's "
                             f"sizes are {', '.join(default_sizes(kernel))}") from None
        if any(n < 0 for n in shape):
            raise ValueError(f"sizes {sizes} give {t.name} the negative shape {shape}; choose other sizes")
        npd = _np(t.dtype or base)
        if t.role == "output":
            outputs[t.name] = shape
        elif npd.kind == "f":
            # magnitudes 0.5-1.5 (no division by a near-zero value) of both signs (a relu that
            # passes everything, C's fmod for `%` show), whole rows and columns negative (a `max=!`
            # started from 0 instead of -inf shows, whichever axis it reduces)
            out[t.name] = (rng.uniform(0.5, 1.5, size=shape) * _signs(rng, shape)).astype(npd)
        else:
            out[t.name] = rng.integers(-9 if npd.kind == "i" else 0, 10, size=shape).astype(npd)
        if t.role != "output":
            for e in t.shape or ():
                shaped.update(e.variables)
    # an undeclared output in the type the kernel would allocate it in for these inputs (a float64
    # array passed for a float32 product would make it compute in float64)
    typing = resolve_typing(program, {n: dtype_of_numpy(a.dtype) for n, a in out.items()})
    for name, shape in outputs.items():
        npd = typing.tensors[name].numpy if name in typing.tensors else _np(base)
        out[name] = np.full(shape, unwritten_value(npd), dtype=npd)
    for s in program.scalars:
        d = s.dtype or base
        out[s.name] = float(rng.uniform(0.5, 1.5)) if _np(d).kind == "f" else int(rng.integers(1, 4))
    for name, value in sizes.items():
        if name not in shaped and name not in derived:
            out[name] = int(value)
    return out


def _signs(rng: np.random.Generator, shape: Tuple[int, ...]) -> np.ndarray:
    """Random signs, with every fourth index of the first and of the last axis negative throughout."""
    signs = rng.choice([-1.0, 1.0], size=shape)
    if len(shape) >= 1:
        signs[3::4] = -1.0
        signs[..., 3::4] = -1.0
    return signs


def unwritten_value(dtype: np.dtype) -> Any:
    """What a generated output holds before the call: NaN, or for integers a value no small
    computation gives (-123456789 in 32-bit or wider types, 0xA5 / 0xA5A5 unsigned): an element the
    kernel never writes keeps it in both the compiled run and the reference, and a compiled kernel
    that forgets to initialise an output element reads it back."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "u":
        return (0xA5A5A5A5 & np.iinfo(dtype).max)
    return -123456789 if dtype.itemsize >= 4 else -91


def _copy(inputs: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}


def _written(kernel, result: Any, passed: Mapping[str, Any]) -> Dict[str, np.ndarray]:
    """Every written tensor's final value, from the call's result or the arrays passed in."""
    names = [t.name for t in kernel.program.tensors if t.role in _WRITTEN]
    got: Dict[str, Any] = {}
    if isinstance(result, dict):
        got.update(result)
    elif result is not None and len(names) == 1:     # an array, or a scalar or list a reference returns
        got[names[0]] = np.asarray(result)
    return {n: np.asarray(got[n] if n in got else passed[n]) for n in names if n in got or n in passed}


def tolerances_for(got: np.ndarray, want: np.ndarray, rtol: Optional[float] = None,
                   atol: Optional[float] = None) -> Tuple[float, float]:
    """(rtol, atol) for comparing `got` with `want`: the explicit values where given, else the
    defaults of the *less precise* element type of the two arrays.

    Tolerances follow the arrays compared, not a dtype argument: an f32 kernel is judged with f32
    tolerances whether its inputs were generated (`dtype="f32"`), passed (`inputs=`) or declared
    (`pc.f32[...]`), and an f32 result against an f64 reference is still an f32 result.
    """
    names = [_dtype_name(a) for a in (got, want)]
    loosest = max(names, key=lambda n: TOLERANCES.get(n, TOLERANCES["f64"]))
    default_rtol, default_atol = TOLERANCES.get(loosest, TOLERANCES["f64"])
    return (default_rtol if rtol is None else rtol, default_atol if atol is None else atol)




def reassociates(schedule: Any, target: Any = "c") -> bool:
    """Whether running `schedule` on `target` ("c", "cuda", "cuda-emu" or a `pc.Target`) may
    reassociate a reduction: a loop marked with a reduction strategy (`Dim.reduction`, see
    `Schedule.vectorize`/`parallel`(reduction=True)), or a GPU target (whose tree reductions
    combine partial sums)."""
    if getattr(target, "kind", target) != "c":
        return True
    dims = getattr(schedule, "dims", ())
    return any(d.reduction for d in dims)


def reduction_length(kernel, tensor: str, sizes: Optional[Mapping[str, int]]) -> int:
    """The most terms one element of `tensor` sums or multiplies (`+` / `*` updates): the product of
    the extents of the statements' reduction axes at `sizes` (isl), 1 when there is none.  Without
    sizes, 1 (see `check_kernel`, which then bounds it by the largest array)."""
    import islpy as isl
    from ..poly.islutil import isl_name
    model = kernel.model
    longest = 1
    for st in model.program.statements:
        if st.target.tensor != tensor or st.update not in ("+", "*"):
            continue
        axes = st.reduction or tuple(i for i in st.iterators
                                     if all(i not in e.variables for e in st.target.indices))
        if not axes or not sizes:
            continue
        fixed = " and ".join(f"{isl_name(k)} = {int(v)}" for k, v in sizes.items() if k in model.program.sizes)
        dom = model.domains[st.name]
        if fixed:
            dom = dom.intersect_params(isl.Set(f"{model.pstr} -> {{ : {fixed} }}"))
        if dom.is_empty():
            continue
        n = 1
        for axis in axes:
            k = st.iterators.index(axis)
            hi, lo = dom.dim_max_val(k), dom.dim_min_val(k)
            if not (hi.is_int() and lo.is_int()):
                return 0  # unbounded at these sizes: callers fall back to the array sizes
            n *= int(hi.to_python()) - int(lo.to_python()) + 1
        longest = max(longest, n)
    return longest


def reassociation_rtol(n: int, array: np.ndarray) -> float:
    """The relative tolerance a reassociated reduction of `n` terms needs: `n * eps` of the
    result's type (the classic bound on reordering a floating-point sum or product)."""
    kind = np.asarray(array).dtype
    if kind.kind not in "fc":
        return 0.0
    return float(n) * float(np.finfo(kind).eps)


def _dtype_name(array: np.ndarray) -> str:
    d = dtype_of_numpy(np.asarray(array).dtype)
    return d.name if d is not None else "f64"


def _diff_message(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    """Which elements differ: how many, the first (in C order) and the worst, with both values."""
    if got.shape != want.shape:
        return f"{name}: shape {got.shape}, expected {want.shape}"
    exact = got.dtype.kind in "iub" and want.dtype.kind in "iub"
    bad = (got != want) if exact else ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    err = np.where(np.isnan(err), np.inf, err)
    if got.ndim:
        first = np.unravel_index(int(np.argmax(bad)), got.shape)
        worst = np.unravel_index(int(np.argmax(np.where(bad, err, -1))), got.shape)
    else:
        first = worst = ()
    where = lambda ix: f"{tuple(int(i) for i in ix)}: got {got[ix]!r}, expected {want[ix]!r}"  # noqa: E731
    return (f"{name} ({got.dtype}): {int(bad.sum())} of {bad.size} elements differ (rtol={rtol}, "
            f"atol={atol}); first at {where(first)}; worst at {where(worst)}")


def _shapes_text(args: Mapping[str, Any]) -> str:
    """`A: f32(8, 300), B: ...` for the arrays among `args` (the sizes of given inputs)."""
    arrays = [f"{k}: {v.dtype}{tuple(v.shape)}" for k, v in args.items() if isinstance(v, np.ndarray)]
    return "inputs " + ", ".join(arrays) if arrays else "no arrays"


def call_sizes(kernel, args: Mapping[str, Any]) -> Optional[Dict[str, int]]:
    """The sizes a call with `args` binds (None when they do not bind: the caller's problem)."""
    from ..errors import PolycError
    from ..frontend.reference import bind_sizes
    arrays = {k: v for k, v in args.items() if isinstance(v, np.ndarray)}
    ints = {k: int(v) for k, v in args.items() if k in kernel.program.sizes and isinstance(v, (int, np.integer))}
    try:
        return bind_sizes(kernel.program, arrays, ints)
    except (PolycError, KeyError, TypeError, ValueError):
        return None


def _allocated_outputs_problems(kernel, fn: Any, args: Mapping[str, Any], got: Mapping[str, np.ndarray]) -> list:
    """The outputs the compiled kernel allocates itself (none passed): every element it wrote into
    the passed arrays must come out the same, and every one it did not write must be 0 (an
    output not fully written is zero-filled; one proven fully written is allocated uninitialised,
    so an error in that proof shows here as garbage)."""
    outputs = [t.name for t in kernel.program.tensors if t.role == "output" and t.name in args]
    if not outputs:
        return []
    rest = _copy({k: v for k, v in args.items() if k not in outputs})
    with parallel_threshold(0):
        fresh = _written(kernel, fn(**rest), rest)
    problems = []
    for name in outputs:
        g, f = got[name], fresh.get(name)
        if f is None or f.shape != g.shape:
            problems.append(f"{name}: an output the compiled kernel allocates is missing or of another shape")
            continue
        # each element: written alike in both runs, or unwritten (the fill value passed, 0 allocated)
        unwritten = (np.isnan(g) if g.dtype.kind == "f" else g == unwritten_value(g.dtype)) & \
            ((f == 0) | (np.isnan(f) if g.dtype.kind == "f" else False))
        if g.dtype.kind == "f":      # the same code twice: parallel reductions may combine in another order
            r, a = tolerances_for(g, g)
            same = np.isclose(f, g, rtol=r, atol=a, equal_nan=True)
        else:
            same = f == g
        if not np.all(same | unwritten):
            problems.append(f"{name}: allocated by the compiled kernel (not passed), it differs from the same call "
                            f"with the array passed, or an element no statement writes is not 0")
    return problems


def check_kernel(kernel, schedule: Any = None, sizes: Optional[Mapping[str, int]] = None,
                 rtol: Optional[float] = None, atol: Optional[float] = None, dtype: Any = "f64",
                 seed: int = 0, inputs: Optional[Mapping[str, Any]] = None, *, target: Any = "c",
                 reference: Optional[Callable[..., Any]] = None, compiled: Any = None,
                 flags: Optional[Any] = None) -> Dict[str, np.ndarray]:
    """Compile `kernel` with `schedule`, run it and the reference on the same inputs, and assert
    that every written tensor matches.  Returns the compiled kernel's written tensors.

    `dtype` is the element type of the random inputs (tensors declared with a type keep theirs).
    `rtol`/`atol` default to the tolerances of each compared array's element type (f32 results
    get f32 tolerances however the inputs came about; see `tolerances_for`).
    `inputs` replaces the random inputs; `reference` replaces `kernel.reference` (e.g. a library
    kernel's expected-output function); `compiled` reuses an already compiled kernel; `flags`
    replaces the C compiler's optimisation flags.  `target`: "c", "cuda", "cuda-emu" or a `pc.Target`.
    """
    from ..api import compile as compile_kernel
    kernel = as_kernel(kernel)
    d = _dtype(dtype)
    args = dict(inputs) if inputs is not None else random_inputs(kernel, sizes, d, seed)
    if compiled is not None:
        fn = compiled
    else:
        fn = compile_kernel(kernel, schedule, target=target, **({"flags": flags} if flags is not None else {}))
    scaled = reassociates(getattr(fn, "schedule", schedule), target)
    known_sizes = dict(sizes or default_sizes(kernel)) if inputs is None else call_sizes(kernel, args)

    def run(arrays: Mapping[str, Any]) -> Tuple[Dict[str, np.ndarray], List[str]]:
        """The compiled kernel's written tensors on `arrays`, and how they differ from the reference's."""
        mine, theirs = _copy(arrays), _copy(arrays)
        with parallel_threshold(0):         # parallel loops run in parallel at test sizes too
            got = _written(kernel, fn(**mine), mine)
        want = _written(kernel, (reference or kernel.reference)(**theirs), theirs)
        return got, _differences(kernel, got, want, arrays, rtol, atol, scaled, known_sizes)

    got, problems = run(args)
    if inputs is None and not problems:
        problems += _allocated_outputs_problems(kernel, fn, args, got)
    if inputs is None and not problems:
        for extreme in _one_signed(kernel, args):   # a max=! started from 0 shows on all-negative data
            problems += run(extreme)[1]
    if problems:
        what = getattr(fn, "schedule", schedule)
        size_text = ", ".join(f"{k}={v}" for k, v in (sizes or default_sizes(kernel)).items()) \
            if inputs is None else _shapes_text(args)
        raise AssertionError(f"{kernel.name} with schedule {what!r} ({target}, {size_text}) does not match "
                             f"the reference:\n  " + "\n  ".join(problems))
    return got


def _one_signed(kernel, args: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """For a kernel with `max`/`min` (reductions or calls), the inputs made all negative (all
    positive): a
    reduction started from 0 instead of its identity passes on inputs of both signs, as the
    extreme of every row then has the right sign anyway."""
    out = []
    for op, sign in (("max", -1), ("min", 1)):
        calls = (op, f"py{op}", f"f{op}")
        if any(st.update == op or any(isinstance(e, Call) and e.fn in calls for e in st.value.walk())
               for st in kernel.program.statements):
            out.append({k: np.array(sign * np.abs(v), dtype=v.dtype)
                        if isinstance(v, np.ndarray) and v.dtype.kind in "fi" else v for k, v in args.items()})
    return out


def _differences(kernel, got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], args: Mapping[str, Any],
                 rtol: Optional[float], atol: Optional[float], scaled: bool,
                 known_sizes: Optional[Mapping[str, int]]) -> List[str]:
    """How each written tensor of `got` differs from `want` beyond its tolerances (integers exactly)."""
    problems: List[str] = []
    for name, w in want.items():
        if name not in got:
            problems.append(f"{name}: not returned by the compiled kernel")
            continue
        g = got[name]
        if g.dtype.kind in "iub" and np.asarray(w).dtype.kind in "iub":
            if g.shape != w.shape or not np.array_equal(g, w):   # integers are exact, whatever rtol says
                problems.append(_diff_message(name, g, w, 0, 0))
            continue
        r, a = tolerances_for(g, w, rtol, atol)
        if scaled and rtol is None:
            # A reassociated reduction differs from the written order by rounding: up to n * eps.
            n = reduction_length(kernel, name, known_sizes) if known_sizes is not None else 0
            if n == 0:
                n = max([v.size for v in args.values() if isinstance(v, np.ndarray)], default=1)
            r = max(r, reassociation_rtol(n, g))
        if g.shape != w.shape or not np.allclose(g, w, rtol=r, atol=a, equal_nan=True):
            problems.append(_diff_message(name, g, w, r, a))
    return problems
