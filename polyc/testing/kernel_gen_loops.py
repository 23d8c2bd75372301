"""Random affine-Python loop kernels (Csmith-style): nests of `for ... in range(...)` with offset,
triangular (`range(i)`, `range(1, i + 1)`), strided and descending bounds, affine `if` guards,
in-place updates (`= += -= *=`, `max`/`min` accumulation), local scalars, data-dependent values
(`a if c else b`), numpy math and mixed element types.

Reads and writes stay in bounds by construction: a loop with margin m runs over [m, S - m) and
its index is only ever offset by at most m.  Magnitudes are not bounded statically (in-place
recurrences grow): a case whose reference overflows is discarded by the runner instead.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import List, Optional, Tuple

from .kernel_gen_common import FLOATS, INTS, SIZE_NAMES, GeneratedKernel, count_features

LOOP_NAMES = ("i", "j", "k", "l", "p", "q")


@dataclass
class _Array:
    name: str
    dtype: str
    shape: Tuple[str, ...]

    @property
    def is_int(self) -> bool:
        return self.dtype in INTS


@dataclass(frozen=True)
class _Loop:
    var: str
    size: str
    margin: int          # the index stays in [margin, size - margin)


class LoopGenerator:
    """Draws one loop kernel from `rng`; `generate()` returns a `GeneratedKernel`."""

    def __init__(self, rng: random.Random, name: str):
        self.rng, self.name = rng, name
        mode = rng.choice(["f32", "f64", "i32", "i64", "mixed", "mixed", "float"])
        self.pool = {"mixed": FLOATS + INTS, "float": FLOATS}.get(mode, (mode,))
        self.arrays: List[_Array] = []
        self.scalar: Optional[str] = None
        self.locals = 0
        self.used_loops = 0
        self.features: set = set()

    # -- expressions -------------------------------------------------------------------------
    def _access(self, scope: List[_Loop], int_only: bool, arrays=None) -> Optional[Tuple[str, bool]]:
        cands = [a for a in (arrays or self.arrays) if (a.is_int or not int_only)
                 and all(any(l.size == s for l in scope) for s in a.shape)]
        if not cands:
            return None
        a = self.rng.choice(cands)
        return f"{a.name}[{', '.join(self._subscript(scope, s) for s in a.shape)}]", a.is_int

    def _subscript(self, scope: List[_Loop], size: str) -> str:
        loop = self.rng.choice([l for l in scope if l.size == size])
        off = self.rng.randint(-loop.margin, loop.margin) if loop.margin and self.rng.random() < 0.5 else 0
        if off:
            self.features.add("stencil")
        return loop.var if off == 0 else f"{loop.var} + {off}" if off > 0 else f"{loop.var} - {-off}"

    def _leaf(self, scope: List[_Loop], int_only: bool, local_names: List[Tuple[str, bool]]) -> Tuple[str, bool]:
        r = self.rng.random()
        if r < 0.7:
            got = self._access(scope, int_only)
            if got is not None:
                return got
        fitting = [(n, i) for n, i in local_names if i or not int_only]
        if r < 0.8 and fitting:
            return self.rng.choice(fitting)
        if r < 0.88 and self.scalar and not int_only:
            return self.scalar, False
        if r < 0.93:
            return self.rng.choice(scope).var, True
        if int_only or self.rng.random() < 0.4:
            return str(self.rng.choice([1, 2, 3])), True
        return repr(self.rng.choice([0.5, 1.5, 2.0, 0.25])), False

    def _cond(self, scope: List[_Loop]) -> str:
        got = self._access(scope, False)
        if got is None or self.rng.random() < 0.3:
            a = self.rng.choice(scope).var
            return f"{a} < {self.rng.choice([2, 3])}"
        text, is_int = got
        cmp = self.rng.choice(["<", ">", "<=", ">=", "==", "!="])
        return f"{text} {cmp} {self.rng.choice(['0', '1']) if is_int else '0.5'}"

    def expr(self, scope: List[_Loop], depth: int, int_only: bool,
             local_names: List[Tuple[str, bool]]) -> Tuple[str, bool]:
        if depth <= 0:
            return self._leaf(scope, int_only, local_names)
        kind = self.rng.choices(["leaf", "arith", "minmax", "unary", "fn", "div", "ifexp", "mod"],
                                weights=[3, 4, 1.2, 0.8, 0.8, 0.5, 1.2, 0.4])[0]
        if kind == "leaf":
            return self._leaf(scope, int_only, local_names)
        a, ai = self.expr(scope, depth - 1, int_only, local_names)
        if kind == "unary":
            return (f"-({a})", ai) if self.rng.random() < 0.5 else (f"abs({a})", ai)
        if kind == "fn":
            if ai or int_only:
                return f"abs({a})", ai
            fn = self.rng.choice(["np.sqrt(abs({}))", "np.tanh({})", "np.floor({})", "np.exp(np.tanh({}))"])
            self.features.add(fn.split("(")[0])
            return fn.format(a), False
        if kind == "mod":
            if not ai:
                return a, ai
            op = "%" if self.rng.random() < 0.8 else "//"
            self.features.add(op)
            return f"(({a}) {op} {self.rng.choice([2, 3, 4])})", True
        b, bi = self.expr(scope, depth - 1, int_only, local_names)
        if kind == "ifexp":
            self.features.add("ifexp")
            return f"({a} if {self._cond(scope)} else {b})", ai and bi
        if kind == "minmax":
            fn = self.rng.choice(["max", "min"])
            self.features.add(fn)
            return f"{fn}({a}, {b})", ai and bi
        if kind == "div" and not int_only:
            return f"({a} / (abs({b}) + 1))", False
        op = self.rng.choice(["+", "-", "*"] if not int_only else ["+", "-", "+", "*"])
        return f"({a} {op} {b})", ai and bi

    # -- statements and nests ----------------------------------------------------------------
    def _statement(self, scope: List[_Loop], indent: str, local_names: List[Tuple[str, bool]]) -> List[str]:
        rng = self.rng
        targets = [a for a in self.arrays if all(any(l.size == s for l in scope) for s in a.shape)]
        if not targets:
            return []
        if rng.random() < 0.15 and len(local_names) < 2:
            t = self.rng.choice(self.arrays)
            name = f"t{self.locals}"
            self.locals += 1
            value, is_int = self.expr(scope, rng.choice([1, 2]), t.is_int, local_names)
            local_names.append((name, is_int))
            self.features.add("local")
            return [f"{indent}{name} = {value}"] + self._statement(scope, indent, local_names)
        t = rng.choice(targets)
        lhs = f"{t.name}[{', '.join(self._subscript(scope, s) for s in t.shape)}]"
        value, _ = self.expr(scope, rng.choice([1, 1, 2, 3]), t.is_int, local_names)
        op = rng.choices(["=", "+=", "-=", "*=", "max", "min"], weights=[5, 3, 1, 0.5 if not t.is_int else 0, 1, 1])[0]
        if op in ("max", "min"):
            self.features.add(op)
            return [f"{indent}{lhs} = {op}({lhs}, {value})"]
        return [f"{indent}{lhs} {op} {value}"]

    def _range(self, var: str, scope: List[_Loop]) -> Tuple[_Loop, str]:
        rng = self.rng
        size = rng.choice(SIZE_NAMES)
        margin = rng.choice([0, 0, 1, 2])
        outer = [l for l in scope if l.size == size and l.margin >= margin]
        r = rng.random()
        if outer and r < 0.35:
            u = rng.choice(outer)
            self.features.add("triangular")
            form = rng.choice(["low", "low1", "high"])
            if form == "low":
                return _Loop(var, size, margin), f"range({margin}, {u.var})" if margin else f"range({u.var})"
            if form == "low1":
                return _Loop(var, size, margin), f"range({margin}, {u.var} + 1)"
            upper = f"{size} - {margin}" if margin else size
            return _Loop(var, size, margin), f"range({u.var}, {upper})"
        hi = f"{size} - {margin}" if margin else size
        if r < 0.45:
            self.features.add("step")
            return _Loop(var, size, margin), f"range({margin}, {hi}, 2)"
        if r < 0.52:
            self.features.add("descending")
            return _Loop(var, size, margin), f"range({hi} - 1, {margin - 1}, -1)"
        return _Loop(var, size, margin), f"range({margin}, {hi})" if margin or rng.random() < 0.5 else f"range({hi})"

    def _block(self, scope: List[_Loop], indent: str, depth: int, local_names: List[Tuple[str, bool]]) -> List[str]:
        rng = self.rng
        lines: List[str] = []
        for _ in range(rng.choice([1, 1, 2])):
            r = rng.random()
            if scope and (r < 0.55 or depth >= 3):
                lines += self._statement(scope, indent, list(local_names))
            elif scope and r < 0.65:
                self.features.add("if")
                a, b = rng.choice(scope), rng.choice(scope)
                cond = rng.choice([f"{a.var} > {b.var}", f"{a.var} + {b.var} < {a.size}", f"{a.var} >= 1",
                                   f"{a.var} % 2 == 0"])
                lines.append(f"{indent}if {cond}:")
                body = self._statement(scope, indent + "    ", list(local_names))
                lines += body or [f"{indent}    pass"]
                if rng.random() < 0.3:
                    lines.append(f"{indent}else:")
                    lines += self._statement(scope, indent + "    ", list(local_names)) or [f"{indent}    pass"]
            elif self.used_loops < len(LOOP_NAMES):
                var = LOOP_NAMES[self.used_loops]
                self.used_loops += 1
                loop, text = self._range(var, scope)
                lines.append(f"{indent}for {var} in {text}:")
                body = self._block(scope + [loop], indent + "    ", depth + 1, local_names)
                lines += body or [f"{indent}    pass"]
        return lines

    def generate(self) -> GeneratedKernel:
        rng = self.rng
        for k in range(rng.choice([2, 2, 3, 4])):
            rank = rng.choice([1, 2, 2, 3]) if rng.random() < 0.9 else 1
            dtype = rng.choice(self.pool)
            self.arrays.append(_Array(f"A{k}", dtype, tuple(rng.choice(SIZE_NAMES) for _ in range(rank))))
        if rng.random() < 0.3 and any(d in FLOATS for d in self.pool):
            self.scalar = "alpha"
        body: List[str] = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            body += self._block([], "    ", 0, [])
        import re
        used = {n for line in body for n in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", line)}
        self.arrays = [a for a in self.arrays if a.name in used] or self.arrays[:1]
        params = [f"{a.name}: pc.{a.dtype}[{', '.join(repr(s) for s in a.shape)}]" for a in self.arrays]
        if self.scalar and self.scalar in used:
            params.append(f"{self.scalar}: float")
        shaped = {s for a in self.arrays for s in a.shape}
        params += [f"{s}: int" for s in SIZE_NAMES if s in used and s not in shaped]
        source = f"def {self.name}({', '.join(params)}):\n" + ("\n".join(body) if body else "    pass") + "\n"
        declared = tuple((a.name, a.dtype, a.shape) for a in self.arrays)
        scalars = (("alpha", "f64"),) if self.scalar and self.scalar in used else ()
        return GeneratedKernel(self.name, "loops", source, declared, scalars, (),
                               frozenset(self.features) | count_features([source]))


def generate_loops(rng: random.Random, name: str) -> GeneratedKernel:
    """One random affine-Python loop kernel drawn from `rng`."""
    return LoopGenerator(rng, name).generate()
