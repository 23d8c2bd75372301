"""Storage for kernel-local scalars of affine-Python kernels (`s = 0.0; s += ...; y[i] = s`).

A Python local is one memory cell that later assignments overwrite.  Kept as a rank-0 tensor it
would be exact but would serialise every loop around it (each iteration overwrites the same cell).
So each local is split into *versions* and each version is *expanded*: it gets one dimension per
loop enclosing the statement list where it is defined, indexed by those loop variables.

A version starts at a *killing* definition: an unconditional plain assignment `x = e` directly in
a statement list (function or loop body) whose `e` does not read `x`.  It may be given fresh,
per-iteration storage only when the value it holds cannot be read outside the current iteration of
the enclosing loops: either another killing definition follows in the same list, or `x` is dead at
the end of the list (a structured liveness analysis: not read in the next iteration before being
killed, nor after the loop).  Every other read or write uses the version live at that point, which
for values carried across iterations is the storage of an outer level (ultimately a rank-0 temp at
function level).  Hence every read sees exactly the value Python would give it, and dependences
between iterations remain only where values really flow (e.g. a reduction `s += ...` over an inner
loop, or durbin's `alpha` carried across `k`).

The first version of `x` is named `x`, further ones `x_1`, `x_2`, ...  Element types follow numpy's
rules (NEP 50): Python literals are weak, so `s = 0.0; s += A[i]` with float32 `A` gives float32.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from ..errors import ParseError
from ..ir import (Access, Affine, Binary, Call, Cast, Const, DType, Expr, IndexExpr, ScalarRef,
                  Select, TensorDecl, Unary, f64, i64, promote_numpy)
from .pyloops_exprs import LocalRef, Scope
from .pyloops_source import Source
from .pyloops_lower import RawLoop, RawNode, RawStmt


@dataclass(frozen=True)
class Version:
    """One storage of a local scalar: a temp tensor indexed by the variables of `loops`."""

    name: str
    loops: Tuple[RawLoop, ...]

    def access(self) -> Access:
        return Access(self.name, tuple(Affine.var(l.var) for l in self.loops))


# -- liveness on the structured body ----------------------------------------------------------
def _touches(node: RawNode, x: str) -> bool:
    if isinstance(node, RawStmt):
        return node.target_local == x or x in node.reads_locals
    return any(_touches(c, x) for c in node.body)


def _kills(node: RawNode, x: str) -> bool:
    return isinstance(node, RawStmt) and node.target_local == x and node.kills


def _live_in(node: RawNode, x: str, live_after: bool) -> bool:
    """Whether `x` may be read, before being overwritten, from the start of `node` on."""
    if isinstance(node, RawStmt):
        if x in node.reads_locals:
            return True
        return False if _kills(node, x) else live_after
    body_live = _loop_body_live_in(node, x, live_after)
    return live_after or body_live           # the loop may run zero times


def _loop_body_live_in(loop: RawLoop, x: str, live_after: bool) -> bool:
    live = False
    for _ in range(3):                        # monotone: stable after at most two rounds
        new = _live_seq(loop.body, x, live or live_after)
        if new == live:
            break
        live = new
    return live


def _live_seq(nodes: Sequence[RawNode], x: str, live_at_end: bool) -> bool:
    live = live_at_end
    for n in reversed(nodes):
        live = _live_in(n, x, live)
    return live


# -- versions ---------------------------------------------------------------------------------
class LocalStorage:
    """Decides the versions of every local; see the module docstring."""

    def __init__(self, source: Source, scope: Scope, body: List[RawNode], taken: Set[str]):
        self.src = source
        self.scope = scope
        self.body = body
        self.reserved = set(taken)            # parameters, sizes, loop variables, locals
        self.used: Set[str] = set()           # names given to versions so far
        self.versions: Dict[str, List[Version]] = {}
        #: (id(statement), local name) -> version that statement reads and writes
        self.choice: Dict[Tuple[int, str], Version] = {}

    def run(self) -> None:
        for x in sorted(self.scope.locals):
            self._check_defined(x)
            self.versions[x] = []
            base: List[Optional[Version]] = [None]
            self._assign(self.body, (), None, False, x, base)

    def _check_defined(self, x: str) -> None:
        first = next((s for s in raw_statements(self.body) if s.target_local == x or x in s.reads_locals), None)
        if first is not None and x in first.reads_locals and not first.conditional:
            raise ParseError(f"local variable `{x}` is read before it is assigned; initialise it "
                             f"first (e.g. `{x} = 0.0`)", first.location)

    def _new(self, x: str, loops: Tuple[RawLoop, ...]) -> Version:
        name, k = x, 0
        while name in self.used or (name != x and name in self.reserved):
            k += 1
            name = f"{x}_{k}"
        self.used.add(name)
        version = Version(name, loops)
        self.versions[x].append(version)
        return version

    def _assign(self, nodes: Sequence[RawNode], loops: Tuple[RawLoop, ...], cur: Optional[Version],
                live_at_end: bool, x: str, base: List[Optional[Version]]) -> None:
        incoming = cur

        def carried() -> Version:
            """Storage of values that live past this iteration: the one this list received."""
            if incoming is not None:
                return incoming
            if base[0] is None:               # carried value with no enclosing definition
                base[0] = self._new(x, ())
            return base[0]

        for k, n in enumerate(nodes):
            if not _touches(n, x):
                continue
            rest = nodes[k + 1:]
            if isinstance(n, RawStmt):
                if _kills(n, x):
                    later_kill = any(_kills(m, x) for m in rest)
                    cur = self._new(x, loops) if later_kill or not live_at_end else carried()
                elif cur is None:
                    cur = carried()
                self.choice[(id(n), x)] = cur
            else:
                after = _live_seq(rest, x, live_at_end)
                end = _loop_body_live_in(n, x, after) or after
                self._assign(n.body, loops + (n,), cur, end, x, base)


def raw_statements(nodes: Sequence[RawNode]):
    """Every statement of a raw loop tree, in source order."""
    for n in nodes:
        if isinstance(n, RawStmt):
            yield n
        else:
            yield from raw_statements(n.body)


# -- element types ----------------------------------------------------------------------------
#: (strong dtype or None, weak literal kind "int"/"float"); None as a whole means unknown.
_Type = Optional[Tuple[Optional[DType], str]]


def _combine(a: _Type, b: _Type) -> _Type:
    if a is None:
        return b
    if b is None:
        return a
    (sa, wa), (sb, wb) = a, b
    if sa is not None and sb is not None:    # numpy's values: int32 with float32 is float64
        return promote_numpy(sa, sb), "float" if promote_numpy(sa, sb).is_float else "int"
    strong, weak = (sa, wb) if sa is not None else (sb, wa)
    if strong is not None:
        if not strong.is_float and weak == "float":
            return f64, "float"
        return strong, "float" if strong.is_float else "int"
    return None, "float" if "float" in (wa, wb) else "int"


def _floating(t: _Type) -> _Type:
    if t is None:
        return None
    strong, _ = t
    if strong is None:
        return None, "float"
    return (strong if strong.is_float else f64), "float"


def expr_type(e: Expr, scope: Scope, local_types: Dict[str, DType]) -> _Type:
    """The numpy-like result type of `e` (literals weak); None if it depends on unknown locals."""
    rec: Callable[[Expr], _Type] = lambda c: expr_type(c, scope, local_types)
    if isinstance(e, Const):
        if e.dtype is not None:
            return e.dtype, "float" if e.dtype.is_float else "int"
        return None, "float" if isinstance(e.value, float) else "int"
    if isinstance(e, IndexExpr):
        return None, "int"
    if isinstance(e, ScalarRef):
        return None, "float" if scope.scalars[e.name].is_float else "int"
    if isinstance(e, Access):
        d = scope.arrays[e.tensor].dtype
        return d, "float" if d.is_float else "int"
    if isinstance(e, LocalRef):
        d = local_types.get(e.name)
        return None if d is None else (d, "float" if d.is_float else "int")
    if isinstance(e, Cast):
        return e.dtype, "float" if e.dtype.is_float else "int"
    if isinstance(e, Unary):
        return rec(e.operand) if e.op == "-" else (None, "int")
    if isinstance(e, Binary):
        if e.op not in ("+", "-", "*", "/", "//", "%"):
            return None, "int"
        t = _combine(rec(e.lhs), rec(e.rhs))
        return _floating(t) if e.op == "/" else t
    if isinstance(e, Select):
        return _combine(rec(e.if_true), rec(e.if_false))
    if isinstance(e, Call):
        t = None
        for a in e.args:
            t = _combine(t, rec(a))
        return t if e.fn in ("max", "min", "pymax", "pymin", "fmax", "fmin", "abs", "pow", "stop_gradient") \
            else _floating(t)
    return None


def local_dtypes(body: List[RawNode], scope: Scope) -> Dict[str, DType]:
    """Element type of every local: the combined type of all values assigned to it."""
    stmts = list(raw_statements(body))
    types: Dict[str, DType] = {}
    for _ in range(len(scope.locals) + 2):
        new: Dict[str, DType] = {}
        for x in scope.locals:
            t: _Type = None
            for s in stmts:
                if s.target_local == x:
                    t = _combine(t, expr_type(s.value, scope, types))
            if t is not None:
                strong, weak = t
                new[x] = strong if strong is not None else (f64 if weak == "float" else i64)
        if new == types:
            break
        types = new
    return {x: types.get(x, f64) for x in scope.locals}


# -- shapes of expanded temps -----------------------------------------------------------------
def _size_bound(a: Affine, loops: Dict[str, RawLoop], upper: bool) -> Optional[Affine]:
    """A bound of `a` over the loops' ranges in sizes only (sound, maybe loose), or None."""
    out = Affine.const(a.constant)
    for var, c in a.terms:
        if var not in loops:
            out = out + Affine.var(var, c)
            continue
        loop = loops[var]
        candidates = loop.uppers if (c > 0) == upper else loop.lowers
        if not candidates:
            return None
        b = _size_bound(candidates[0], loops, (c > 0) == upper)
        if b is None:
            return None
        out = out + b.scale(c)
    return out


def temp_shape(version: Version) -> Optional[Tuple[Affine, ...]]:
    """Extents covering every index the version is accessed at; None when none can be stated."""
    loops = {l.var: l for l in version.loops}
    shape = []
    for loop in version.loops:
        low = _size_bound(Affine.var(loop.var), loops, upper=False)
        high = _size_bound(Affine.var(loop.var), loops, upper=True)
        if low is None or high is None or low.constant < 0 or any(c < 0 for _, c in low.terms):
            return None                      # indices might be negative: let polyc.poly infer
        shape.append(high + 1)
    return tuple(shape)


def temp_decls(storage: LocalStorage, dtypes: Dict[str, DType]) -> List[TensorDecl]:
    out = []
    for x in sorted(storage.versions):
        for v in storage.versions[x]:
            out.append(TensorDecl(v.name, dtypes[x], temp_shape(v), "temp", declared=False))
    return out


# -- substitution -----------------------------------------------------------------------------
def replace_locals(e: Expr, stmt: RawStmt, storage: LocalStorage) -> Expr:
    """`e` with every `LocalRef` replaced by an access to the version `stmt` uses."""
    if isinstance(e, LocalRef):
        return storage.choice[(id(stmt), e.name)].access()
    changes = {}
    for f in dataclasses.fields(e) if dataclasses.is_dataclass(e) else ():
        value = getattr(e, f.name)
        if isinstance(value, Expr):
            changes[f.name] = replace_locals(value, stmt, storage)
        elif isinstance(value, tuple) and value and all(isinstance(v, Expr) for v in value):
            changes[f.name] = tuple(replace_locals(v, stmt, storage) for v in value)
    return dataclasses.replace(e, **changes) if changes else e
