"""Front end for affine-Python kernels: a plain Python loop function -> `polyc.ir.Program`.

```python
def seidel_2d(A: pc.f64["N", "N"], T: int):
    for t in range(T):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = (A[i - 1, j] + A[i, j] + A[i + 1, j]) / 3.0
```

The body is read with `ast` from `inspect.getsource(fn)` and never evaluated here; the same
function runs unchanged as the reference (`polyc.frontend.reference`).

Parameters (their annotations, evaluated, decide what they are):

- `pc.f64["N", "N"]` (a `TensorType`): an array passed by the caller.  The names in its shape are
  *sizes*, in scope in the body (`range(1, N - 1)`), bound at call time from the arrays' shapes.
- `int`: an integer scalar such as the time-step count `T`.  It is put in `Program.sizes`, not in
  `Program.scalars`: it then is an isl parameter like `N`, usable in loop bounds, subscripts and
  `if` tests, and, like any size, as a value (`IndexExpr`).  The caller must pass it since no array
  shape determines it.
- `float` (-> f64) or a `DType` such as `pc.f32`: a scalar value (`alpha`), in `Program.scalars`,
  usable only in values (`ScalarRef`), never in bounds or subscripts.

Statements are named `S0, S1, ...` in source order.  Tensor roles: array parameters written and
read are "inout", only written "output", otherwise "input"; kernel-local scalars become "temp"
tensors expanded over loops (see `pyloops_locals` for how, and why that keeps dependences exact).
Loops with a negative step are listed in `Statement.descending` so that the source order is kept.

Anything outside this language (non-affine subscripts or bounds, `while`, `break`, unknown calls,
...) is refused with a `ParseError` giving the file, line and column and saying what is allowed.
Module layout: `pyloops_exprs` (expressions), `pyloops_lower` (statements), `pyloops_locals`
(local scalars), this module (parameters and assembly).
"""
from __future__ import annotations

import ast
import functools
import inspect
import linecache
import textwrap
import types
from typing import Callable, Dict, List, Optional, Set, Tuple

from ..errors import ParseError, SourceLocation
from ..ir.depth import ensure_recursion_room, tree_depth
from ..ir import (Access, Affine, Constraint, DType, Expr, IndexExpr, Program, ScalarDecl, Statement,
                  TensorDecl, TensorType, f64)
from .pyloops_dnf import DNF
from .pyloops_exprs import ExprLowering, Scope
from .pyloops_source import Source, split_chained_assignments
from .pyloops_locals import LocalStorage, local_dtypes, raw_statements, replace_locals, temp_decls
from .pyloops_lower import BodyLowering

__all__ = ["program_from_function", "function_parameters"]

_ANNOTATION_HELP = ("annotate arrays with a tensor type (`pc.f64[\"N\", \"N\"]`), integer sizes and "
                    "counts with `int`, and scalar values with `float` or a dtype such as `pc.f32`")


def _read_source(fn: Callable) -> Tuple[Source, str, ast.FunctionDef]:
    """The function's source, its dedented text and its `FunctionDef` node."""
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise ParseError(f"cannot read the source of {fn!r} ({e}); a loop kernel must be a "
                         "function defined in a file") from e
    nonblank = [l for l in lines if l.strip()]
    indent = min((len(l) - len(l.lstrip())) for l in nonblank) if nonblank else 0
    dedented = textwrap.dedent("".join(lines))
    filename = getattr(getattr(fn, "__code__", None), "co_filename", "<kernel>")
    source = Source(lines, max(first, 1), indent, filename)
    try:
        tree = ast.parse(dedented)
    except SyntaxError as e:
        raise ParseError(f"cannot parse the kernel: {e.msg}",
                         SourceLocation(source.first_line + (e.lineno or 1) - 1, (e.offset or 1) + indent,
                                        lines[(e.lineno or 1) - 1].rstrip("\n"), filename)) from e
    node = tree.body[0] if tree.body else None
    # Deep expressions (a 1,000-term sum): room for the recursive lowering and every later walker.
    ensure_recursion_room(tree_depth(tree, ast.iter_child_nodes), f"the body of {fn.__name__}",
                          source.location(node) if node is not None else None)
    if not isinstance(node, ast.FunctionDef):
        raise ParseError("a loop kernel must be a function defined with `def` (not a lambda)",
                         source.location(node) if node is not None else None)
    _check_source_is_the_function(fn, node, source)
    return source, dedented, split_chained_assignments(node)


def _check_source_is_the_function(fn: Callable, node: ast.FunctionDef, source: Source) -> None:
    """The text read back from `fn`'s file is the code Python runs for `fn`: a file edited since
    it was imported holds other code (another function, where lines moved), which the compiled
    kernel would compute while `fn` and `kernel.reference` compute the old.  Checked by the
    bytecode of the function starting at `fn`'s line, in the whole file compiled again (the same
    compiler and context give the same code), else (no such function there) by name."""
    stale = ParseError(f"the file {source.filename} no longer holds the code of {fn.__name__} that Python runs "
                       f"(it was edited after the function was defined): reload the module or run the cell "
                       f"again, so the kernel and its Python function agree", source.location(node))
    module = _compiled_file("".join(linecache.getlines(source.filename)), source.filename)
    found = _code_at(module, node.name, fn.__code__.co_firstlineno) if module is not None else None
    if found is not None:
        if not _same_code(found, fn.__code__):
            raise stale
    elif node.name != fn.__name__:
        raise stale


@functools.lru_cache(maxsize=16)
def _compiled_file(text: str, filename: str) -> Optional[types.CodeType]:
    """File `text` compiled as Python does (once per text: a module defines many kernels)."""
    try:
        return compile(text, filename, "exec", dont_inherit=True) if text else None
    except (SyntaxError, ValueError):
        return None


def _code_at(code: types.CodeType, name: str, line: int) -> Optional[types.CodeType]:
    """The code object of the function `name` that starts at `line`, in `code` or nested in it."""
    stack = [code]
    while stack:
        c = stack.pop()
        if c.co_name == name and c.co_firstlineno == line:
            return c
        stack.extend(x for x in c.co_consts if isinstance(x, types.CodeType))
    return None


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    """Whether two code objects run the same instructions on the same names and constants
    (nested functions compared alike; line numbers and file names not at all)."""
    if a.co_code != b.co_code or a.co_names != b.co_names or a.co_varnames != b.co_varnames \
            or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType):
            if not _same_code(x, y):
                return False
        elif type(x) is not type(y) or (x != y and not (x != x and y != y)):     # NaN equals itself here
            return False
    return True


def _annotations(fn: Callable) -> Dict[str, object]:
    """Evaluated annotations (also under `from __future__ import annotations`)."""
    if hasattr(inspect, "get_annotations"):            # Python >= 3.10
        return dict(inspect.get_annotations(fn, eval_str=True))
    raw = dict(getattr(fn, "__annotations__", {}))
    return {k: eval(v, fn.__globals__) if isinstance(v, str) else v for k, v in raw.items()}


def function_parameters(fn: Callable, node: ast.FunctionDef, source: Source) -> Tuple[Scope, List[str]]:
    """Arrays, scalars and sizes from the parameters' annotations (see the module docstring)."""
    try:
        annotations = _annotations(fn)
    except Exception as e:                       # a string annotation that does not evaluate
        raise ParseError(f"cannot evaluate the annotations of `{node.name}`: {e}",
                         source.location(node)) from e
    args = node.args
    if args.vararg or args.kwarg:
        bad = args.vararg or args.kwarg
        raise source.error(bad, "*args and **kwargs are not supported in a kernel; name every parameter")
    arrays: Dict[str, TensorType] = {}
    scalars: Dict[str, DType] = {}
    int_params: List[str] = []
    shape_sizes: List[str] = []
    params = _parameters(node)
    for arg in params:
        name = arg.arg
        if name not in annotations:
            raise source.error(arg, f"parameter `{name}` needs a type annotation: {_ANNOTATION_HELP}")
        ann = annotations[name]
        if isinstance(ann, TensorType):
            arrays[name] = ann
            for dim in ann.shape:
                shape_sizes += [v for v in dim.variables if v not in shape_sizes]
        elif ann is int:
            int_params.append(name)
        elif ann is float:
            scalars[name] = f64
        elif isinstance(ann, DType):
            scalars[name] = ann
        else:
            raise source.error(arg, f"parameter `{name}` has an unsupported annotation {ann!r}: "
                                    f"{_ANNOTATION_HELP}")
    for arg in params:
        if arg.arg in shape_sizes and arg.arg not in int_params:
            raise source.error(arg, f"parameter `{arg.arg}` has the name of a size used in an "
                                    "array shape; rename one of them")
    sizes = shape_sizes + [p for p in int_params if p not in shape_sizes]
    loop_vars: Set[str] = set()
    assigned: Set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.For) and isinstance(sub.target, ast.Name):
            loop_vars.add(sub.target.id)
        targets = sub.targets if isinstance(sub, ast.Assign) else \
            [sub.target] if isinstance(sub, (ast.AugAssign, ast.AnnAssign)) else []
        assigned |= {t.id for t in targets if isinstance(t, ast.Name)}
    locals_ = assigned - set(arrays) - set(scalars) - set(sizes) - loop_vars
    return Scope(arrays, scalars, set(sizes), locals_, loop_vars, dict(fn.__globals__)), sizes


def _simplify(domain: DNF) -> Tuple[Tuple[Constraint, ...], ...]:
    """Drops constant constraints that always hold and conjunctions that never do."""
    out = []
    for conj in domain:
        kept: List[Constraint] = []
        feasible = True
        for c in conj:
            if c.expr.is_constant:
                k = c.expr.constant
                holds = k >= 0 if c.kind == "ge" else k == 0 if c.kind == "eq" else k % c.modulus == 0
                feasible = feasible and holds
            elif c not in kept:
                kept.append(c)
        if feasible and tuple(kept) not in out:
            out.append(tuple(kept))
    return tuple(out) if out else ((Constraint("ge", Affine.const(-1)),),)


def program_from_function(fn: Callable) -> Program:
    """The `polyc.ir.Program` of an affine-Python loop kernel (see the module docstring)."""
    fn = inspect.unwrap(fn)
    source, dedented, node = _read_source(fn)
    scope, sizes = function_parameters(fn, node, source)
    exprs = ExprLowering(source, scope)
    body = BodyLowering(source, exprs, dedented).lower_function(node)
    taken = set(scope.arrays) | set(scope.scalars) | set(sizes) | scope.all_loop_vars | scope.locals
    storage = LocalStorage(source, scope, body, taken)
    storage.run()
    dtypes = local_dtypes(body, scope)

    statements: List[Statement] = []
    for k, raw in enumerate(raw_statements(body)):
        if raw.target_local is not None:
            target = storage.choice[(id(raw), raw.target_local)].access()
        else:
            assert raw.target_array is not None
            target = raw.target_array
        value = replace_locals(raw.value, raw, storage)
        loop_iters = tuple(l.var for l in raw.loops)
        domain = _simplify(raw.domain)
        quotients, extremes = _auxiliaries(exprs, _variables(domain, target, value))
        if quotients:   # each quotient is an iterator with one value, fixed by two constraints
            fixed = tuple(c for q in quotients for c in exprs.divs.constraints(q))
            domain = tuple(conj + fixed for conj in domain)
        for m in extremes:   # each min/max is an iterator with one value, fixed piecewise
            domain = tuple(conj + tuple(piece) for conj in domain for piece in exprs.clamps.pieces(m))
        quotients += extremes
        indexed = _plain_variables(exprs, {v for a in target.indices for v in a.variables})
        reduction = tuple(v for v in loop_iters if v not in indexed) if raw.update else ()
        statements.append(Statement(
            name=f"S{k}", iterators=loop_iters + quotients, domain=domain, target=target,
            value=value, update=raw.update, order=raw.order + (0,) * len(quotients),
            reduction=reduction, location=raw.location, text=raw.text,
            descending=tuple(l.var for l in raw.loops if l.descending), divisions=quotients))

    written = {s.target.tensor for s in statements}
    read = {a.tensor for s in statements for a in s.reads()}
    tensors: List[TensorDecl] = []
    for name, ttype in scope.arrays.items():
        role = "inout" if name in written and name in read else "output" if name in written else "input"
        tensors.append(TensorDecl(name, ttype.dtype, ttype.shape, role, declared=True))
    tensors += temp_decls(storage, dtypes)
    derived = tuple(exprs.divs.derived)   # sizes like (N + 1) // 2, computed at call time
    return Program(name=node.name, tensors=tuple(tensors), statements=tuple(statements),
                   sizes=tuple(sizes) + tuple(n for n, _, _ in derived),
                   scalars=tuple(ScalarDecl(n, d, weak=_annotations(fn).get(n) is float)
                                 for n, d in scope.scalars.items()),
                   source=dedented, frontend="python", derived_sizes=derived,
                   assumptions=_derived_assumptions(derived), defaults=_defaults(fn, source, node, scope, sizes))


def _parameters(node: ast.FunctionDef) -> List[ast.arg]:
    """The function's named parameters in order: positional-only, ordinary, keyword-only."""
    return list(node.args.posonlyargs) + list(node.args.args) + list(node.args.kwonlyargs)


def _defaults(fn: Callable, source, node: ast.FunctionDef, scope, sizes) -> Tuple[Tuple[str, object], ...]:
    """The Python defaults of `fn`'s scalar and `int` parameters (numbers of the parameter's kind:
    a call may leave those parameters out, as it may call the function); an array parameter with a
    default, or a default of another kind, is a ParseError at the parameter."""
    out = []
    args = {a.arg: a for a in _parameters(node)}
    for name, param in inspect.signature(fn).parameters.items():
        value = param.default
        if value is inspect.Parameter.empty:
            continue
        if name in scope.arrays:
            raise source.error(args[name], f"array parameter `{name}` cannot have a default; pass the array")
        wants_int = name in sizes
        ok = isinstance(value, int) if wants_int else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok:
            raise source.error(args[name], f"the default of `{name}` must be {'an int' if wants_int else 'a number'}, "
                                           f"not {type(value).__name__}")
        out.append((name, value))
    return tuple(out)


def _variables(domain: Tuple[Tuple[Constraint, ...], ...], target: Access, value: Expr) -> Set[str]:
    """Every variable a statement's domain, target and value mention."""
    out = {v for conj in domain for c in conj for v in c.expr.variables}
    out |= {v for a in target.indices for v in a.variables}
    for e in value.walk():
        if isinstance(e, Access):
            out |= {v for a in e.indices for v in a.variables}
        elif isinstance(e, IndexExpr):
            out |= set(e.value.variables)
    return out


def _auxiliaries(exprs: ExprLowering, variables: Set[str]) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """The quotient and min/max iterators among `variables` and those their definitions use."""
    divs, clamps = exprs.divs, exprs.clamps
    found: Set[str] = set()
    frontier = list(variables)
    while frontier:
        v = frontier.pop()
        if v in found:
            continue
        if v in divs.names:
            found.add(v)
            frontier += list(next(n for name, n, _ in divs.defs if name == v).variables)
        elif v in clamps.names:
            found.add(v)
            frontier += [w for a in clamps.arguments(v) for w in a.variables]
    return (tuple(n for n in divs.names if n in found), tuple(n for n in clamps.names if n in found))


def _plain_variables(exprs: ExprLowering, variables: Set[str]) -> Set[str]:
    """`variables` with each quotient or min/max iterator replaced by what its definition uses."""
    quotients, extremes = _auxiliaries(exprs, variables)
    aux = set(quotients) | set(extremes)
    out = {v for v in variables if v not in aux}
    for q in quotients:
        out |= {w for w in next(n for name, n, _ in exprs.divs.defs if name == q).variables}
    for m in extremes:
        out |= {w for a in exprs.clamps.arguments(m) for w in a.variables}
    return out - aux


def _derived_assumptions(derived) -> Tuple[Constraint, ...]:
    """`d*D <= num <= d*D + d - 1` for every derived size `D = floor(num / d)`."""
    out: List[Constraint] = []
    for name, num, d in derived:
        q = Affine.var(name).scale(d)
        out += [Constraint("ge", num - q), Constraint("ge", q + (d - 1) - num)]
    return tuple(out)
