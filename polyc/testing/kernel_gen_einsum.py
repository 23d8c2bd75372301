"""Random Einstein-notation kernels (Csmith-style): several statements with intermediates,
contractions and reductions (`+=! max=! min=! *=!`), accumulation (`+=`), stencils with constant
offsets, guards (`select`), triangular ranges (`where k in 0:i+1`) and mixed element types.

Every generated kernel is meant to be valid: each read stays inside the region its tensor was
written on (index ranges are derived from the offsets of the reads), magnitudes are bounded (no
integer overflow, which C leaves undefined), and guards only compare values C and numpy compute
identically.  A kernel polyc nevertheless refuses is counted as a refusal, never hidden.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .kernel_gen_common import (FLOATS, INTS, SIZE_NAMES, GeneratedKernel, Operand, count_features,
                                limit)

INDEX_NAMES = ("i", "j", "k", "l", "m")
REDUCTIONS = {"+=!": 4, "max=!": 2, "min=!": 2, "*=!": 1}
MAX_EXTENT = 7          # largest size drawn (bounds the growth of sums and products)


@dataclass
class _Tensor:
    name: str
    dtype: Optional[str]            # None: inferred by polyc (intermediates, outputs)
    shape: Tuple[str, ...]
    region: List[Tuple[int, int]]   # per dim: written on lo <= x < size - hi
    is_int: bool
    bound: float
    exact: bool
    readable: bool = True           # False once written on a non-rectangular region
    written: bool = False


@dataclass
class _Access:
    tensor: _Tensor
    indices: Tuple[str, ...]
    offsets: Tuple[int, ...]


@dataclass
class _Stmt:
    indices: Dict[str, str]                       # index -> size symbol
    lhs: Tuple[str, ...]
    reduction: Tuple[str, ...]
    accesses: List[_Access] = field(default_factory=list)


class EinsumGenerator:
    """Draws one kernel from `rng`; `generate()` returns a `GeneratedKernel`."""

    def __init__(self, rng: random.Random, name: str):
        self.rng, self.name = rng, name
        mode = rng.choice(["f32", "f64", "i32", "i64", "mixed", "mixed", "float"])
        self.pool = {"mixed": FLOATS + INTS, "float": FLOATS}.get(mode, (mode,))
        self.int_only = all(d in INTS for d in self.pool)
        self.tensors: Dict[str, _Tensor] = {}
        self.scalars: Dict[str, str] = {}
        self.lines: List[str] = []
        self.features: set = set()

    # -- tensors -----------------------------------------------------------------------------
    def _new_input(self, k: int) -> None:
        rank = self.rng.choice([1, 2, 2, 2, 3]) if self.rng.random() < 0.9 else 1
        shape = tuple(self.rng.choice(SIZE_NAMES) for _ in range(rank))
        dtype = self.rng.choice(self.pool)
        is_int = dtype in INTS
        self.tensors[f"A{k}"] = _Tensor(f"A{k}", dtype, shape, [(0, 0)] * rank, is_int,
                                        5.0 if is_int else 2.0, True)

    def _readable(self) -> List[_Tensor]:
        return [t for t in self.tensors.values() if t.readable and (t.written or t.dtype is not None)]

    # -- expressions -------------------------------------------------------------------------
    def _access(self, st: _Stmt, prefer: Optional[str] = None) -> Optional[Operand]:
        by_size: Dict[str, List[str]] = {}
        for v, s in st.indices.items():
            by_size.setdefault(s, []).append(v)
        usable = [t for t in self._readable() if all(s in by_size for s in t.shape)]
        if prefer is not None:
            usable = [t for t in usable if st.indices[prefer] in t.shape]
        if not usable:
            return None
        t = self.rng.choice(usable)
        indices, offsets = [], []
        placed = False
        for d, s in enumerate(t.shape):
            if prefer is not None and not placed and s == st.indices[prefer]:
                v, placed = prefer, True
            else:
                v = self.rng.choice(by_size[s])
            off = 0 if self.rng.random() < 0.75 else self.rng.choice([-2, -1, 1, 1, 2])
            if off:
                self.features.add("stencil")
            indices.append(v)
            offsets.append(off)
        st.accesses.append(_Access(t, tuple(indices), tuple(offsets)))
        subs = ", ".join(_subscript(v, o) for v, o in zip(indices, offsets))
        return Operand(f"{t.name}[{subs}]", t.bound, t.is_int, t.exact)

    def _can_read(self, st: _Stmt, r: str) -> bool:
        size_ok = set(st.indices.values())
        return any(st.indices[r] in t.shape and all(s in size_ok for s in t.shape) for t in self._readable())

    def _leaf(self, st: _Stmt, is_int_hint: bool) -> Operand:
        r = self.rng.random()
        if r < 0.75:
            a = self._access(st)
            if a is not None:
                return a
        if r < 0.85 and self.scalars:
            name = self.rng.choice(sorted(self.scalars))
            is_int = self.scalars[name] in INTS
            return Operand(name, 3.0 if is_int else 1.5, is_int, True)
        if is_int_hint or self.rng.random() < 0.3:
            c = self.rng.choice([1, 2, 3])
            return Operand(str(c), float(c), True, True)
        c = self.rng.choice([0.5, 1.5, 2.0, 0.25])
        return Operand(repr(c), c, False, True)

    def _condition(self, st: _Stmt) -> str:
        r = self.rng.random()
        names = list(st.indices)
        if r < 0.4 and len(names) >= 2:
            a, b = self.rng.sample(names, 2)
            return f"{a} {self.rng.choice(['<', '<=', '>', '==', '!='])} {b}"
        if r < 0.5:
            return f"{self.rng.choice(names)} >= {self.rng.choice([1, 2, 3])}"
        a = self._access(st)
        if a is None or not a.exact:
            return f"{self.rng.choice(names)} < {self.rng.choice([2, 3])}"
        cmp = self.rng.choice(["<", ">", "<=", ">=", "==", "!="])
        bound = self.rng.choice(["0", "1", "-1"]) if a.is_int else self.rng.choice(["0.0", "0.5", "-1.0"])
        cond = f"{a.text} {cmp} {bound}"
        if self.rng.random() < 0.15:
            cond = f"not ({cond})" if self.rng.random() < 0.5 else f"({cond}) and ({names[0]} >= 1)"
        return cond

    def expr(self, st: _Stmt, depth: int, is_int_hint: bool = False) -> Operand:
        for _ in range(8):
            e = self._expr(st, depth, is_int_hint)
            if e.bound <= limit(e.is_int):
                return e
        return self._leaf(st, is_int_hint)

    def _expr(self, st: _Stmt, depth: int, hint: bool) -> Operand:
        if depth <= 0:
            return self._leaf(st, hint)
        kind = self.rng.choices(["leaf", "arith", "minmax", "unary", "fn", "div", "select", "mod"],
                                weights=[3, 4, 1.2, 0.8, 0.8, 0.5, 1.2, 0.3])[0]
        if kind == "leaf":
            return self._leaf(st, hint)
        a = self._expr(st, depth - 1, hint)
        if kind == "unary":
            if self.rng.random() < 0.5:
                return Operand(f"-({a.text})", a.bound, a.is_int, a.exact)
            return Operand(f"abs({a.text})", a.bound, a.is_int, a.exact)
        if kind == "fn":
            if a.is_int:
                return Operand(f"abs({a.text})", a.bound, True, a.exact)
            fn = self.rng.choice(["sqrt", "tanh", "exp", "floor"])
            self.features.add(fn)
            if fn == "sqrt":
                return Operand(f"sqrt(abs({a.text}))", max(a.bound, 1.0) ** 0.5, False, False)
            if fn == "tanh":
                return Operand(f"tanh({a.text})", 1.0, False, False)
            if fn == "exp" and a.bound <= 20:
                return Operand(f"exp({a.text})", 2.718281828 ** a.bound, False, False)
            if fn == "floor" and a.exact:
                return Operand(f"floor({a.text})", a.bound + 1, False, True)
            return a
        if kind == "select":
            b = self._expr(st, depth - 1, hint)
            self.features.add("select")
            return Operand(f"select({self._condition(st)}, {a.text}, {b.text})", max(a.bound, b.bound),
                           a.is_int and b.is_int, False)
        if kind == "mod":
            if not a.is_int:
                return a
            self.features.add("%")
            m = self.rng.choice([2, 3, 4])
            return Operand(f"({a.text} % {m})", float(m), True, False)
        b = self._expr(st, depth - 1, hint)
        is_int = a.is_int and b.is_int
        if kind == "minmax":
            fn = self.rng.choice(["max", "min"])
            self.features.add(fn)
            return Operand(f"{fn}({a.text}, {b.text})", max(a.bound, b.bound), is_int, False)
        if kind == "div":
            self.features.add("/")
            return Operand(f"({a.text} / (abs({b.text}) + 1))", a.bound, False, False)
        op = self.rng.choice(["+", "-", "*"])
        bound = a.bound * b.bound if op == "*" else a.bound + b.bound
        return Operand(f"({a.text} {op} {b.text})", bound, is_int, False)

    # -- statements --------------------------------------------------------------------------
    def _indices(self, count: int, taken: Dict[str, str]) -> Dict[str, str]:
        free = [v for v in INDEX_NAMES if v not in taken]
        return {v: self.rng.choice(SIZE_NAMES) for v in free[:count]}

    def statement(self, k: int, last: bool) -> None:
        rng = self.rng
        accumulate = [t for t in self.tensors.values() if t.written and t.readable and t.shape]
        if accumulate and rng.random() < 0.08:
            self._accumulate(rng.choice(accumulate))
            return
        op = "=" if rng.random() < 0.45 else rng.choices(list(REDUCTIONS), weights=list(REDUCTIONS.values()))[0]
        lhs_idx = self._indices(rng.choice([1, 2, 2]), {})
        red_idx = self._indices(rng.choice([1, 1, 2]), lhs_idx) if op != "=" else {}
        for _ in range(6):     # until every reduction index appears in some read
            st = _Stmt({**lhs_idx, **red_idx}, tuple(lhs_idx), tuple(red_idx))
            value = self.expr(st, rng.choice([1, 2, 2, 3]), is_int_hint=self.int_only)
            if all(_reads(value.text, r) or self._can_read(st, r) for r in st.reduction):
                break
        else:
            st = _Stmt(dict(lhs_idx), tuple(lhs_idx), ())
            value = self.expr(st, 1, is_int_hint=self.int_only)
        for r in list(st.reduction):
            if not _reads(value.text, r):
                extra = self._access(st, prefer=r)
                join = "*" if op == "*=!" else rng.choice(["+", "*"]) if op == "+=!" else "+"
                b = extra.bound * value.bound if join == "*" else extra.bound + value.bound
                value = Operand(f"({value.text} {join} {extra.text})", b, value.is_int and extra.is_int, False)
        count = MAX_EXTENT ** len(st.reduction)
        if op == "+=!":
            bound = value.bound * count
        elif op == "*=!":
            if count * math.log(max(value.bound, 1.0)) > math.log(limit(value.is_int)):
                op, bound = "max=!", value.bound     # a product over a range would overflow: take the max
            else:
                bound = max(value.bound, 1.0) ** count
        else:
            bound = value.bound
        if op != "=":
            self.features.add(op)
        ranges, rect, where = self._ranges(st)
        shape = tuple(st.indices[v] for v in st.lhs)
        name = f"T{k}"
        region = [ranges[v] for v in st.lhs]
        self.tensors[name] = _Tensor(name, None, shape, region, value.is_int, bound, False,
                                     readable=rect and not last, written=True)
        self.lines.append(f"{name}[{', '.join(st.lhs)}] {op} {value.text}{where}")

    def _accumulate(self, t: _Tensor) -> None:
        """`X[...] += e` into an already written tensor: accumulation into existing contents."""
        idx = self._indices(len(t.shape), {})
        idx = {v: s for v, s in zip(idx, t.shape)}
        st = _Stmt(idx, tuple(idx), ())
        value = self.expr(st, self.rng.choice([1, 2]), is_int_hint=self.int_only)
        st.accesses.append(_Access(t, tuple(idx), (0,) * len(idx)))   # stays inside t's region
        ranges, rect, where = self._ranges(st)
        self.features.add("+=")
        t.bound += value.bound
        t.is_int = t.is_int and value.is_int
        self.lines.append(f"{t.name}[{', '.join(idx)}] += {value.text}{where}")

    def _ranges(self, st: _Stmt) -> Tuple[Dict[str, Tuple[int, int]], bool, str]:
        """Index ranges that keep every read inside its tensor's written region, and the `where`."""
        lo = {v: 0 for v in st.indices}
        hi = {v: 0 for v in st.indices}
        for a in st.accesses:
            for d, (v, o) in enumerate(zip(a.indices, a.offsets)):
                rlo, rhi = a.tensor.region[d]
                lo[v] = max(lo[v], rlo - o)
                hi[v] = max(hi[v], rhi + o)
        parts, rect = [], True
        for v in st.indices:
            size = st.indices[v]
            upper = f"{size}-{hi[v]}" if hi[v] else size
            text = None
            outer = [u for u in st.lhs if u != v and st.indices[u] == size and list(st.indices).index(u) <
                     list(st.indices).index(v)]
            if outer and self.rng.random() < 0.35:
                u = outer[0]
                self.features.add("triangular")
                if self.rng.random() < 0.6:
                    d = max(0, hi[v] - hi[u])
                    text = f"{v} in {lo[v]}:{u}{'+1' if d == 0 else '' if d == 1 else f'-{d - 1}'}"
                else:
                    d = max(0, lo[v] - lo[u])
                    text = f"{v} in {u}{f'+{d}' if d else ''}:{upper}"
                if v in st.lhs:
                    rect = False
            if text is None and (lo[v] or hi[v] or self.rng.random() < 0.5):
                text = f"{v} in {lo[v]}:{upper}"
            if text:
                parts.append(text)
        return ({v: (lo[v], hi[v]) for v in st.indices}, rect,
                (" where " + ", ".join(parts)) if parts else "")

    def generate(self) -> GeneratedKernel:
        rng = self.rng
        for k in range(rng.choice([1, 2, 2, 3])):
            self._new_input(k)
        if rng.random() < 0.3:
            self.scalars["alpha"] = rng.choice(self.pool)
        n = rng.choice([1, 2, 2, 3, 3, 4])
        for k in range(n):
            self.statement(k, last=(k == n - 1))
        declared = []
        used = {a for line in self.lines for a in _names(line)}
        for t in self.tensors.values():
            if t.name not in used:
                continue
            if t.dtype is not None:
                declared.append((t.name, t.dtype, t.shape))
            elif not t.is_int and self.rng.random() < 0.1:
                declared.append((t.name, self.rng.choice(FLOATS), t.shape))   # a declared (cast) type
            else:
                declared.append((t.name, None, t.shape))
        source = "\n".join(self.lines) + "\n"
        self.scalars = {n: d for n, d in self.scalars.items() if n in used}
        bounds = tuple((t.name, t.bound) for t in self.tensors.values() if t.written)
        return GeneratedKernel(self.name, "einstein", source, tuple(declared), tuple(self.scalars.items()),
                               bounds, frozenset(self.features) | count_features([source]))


def _reads(text: str, index: str) -> bool:
    """Whether `index` is used in a subscript of `text` (a guard alone does not give it a range;
    `st.accesses` also holds reads drawn for guards or retries that the text does not use)."""
    import re
    return re.search(rf"\[[^\]]*\b{index}\b[^\]]*\]", text) is not None


def _names(line: str) -> set:
    import re
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", line))


def _subscript(v: str, off: int) -> str:
    return v if off == 0 else f"{v} + {off}" if off > 0 else f"{v} - {-off}"


def generate_einsum(rng: random.Random, name: str) -> GeneratedKernel:
    """One random Einstein-notation kernel drawn from `rng`."""
    return EinsumGenerator(rng, name).generate()
