"""What both random kernel generators (Einstein and loops) share: the generated case, its sizes
and its input data (with NaN and inf), and the magnitude bookkeeping that keeps generated
arithmetic away from integer overflow (undefined in C, wrapping in numpy) and float overflow.

A `GeneratedKernel` is plain data (source text, declarations, size draws): it prints as the
source a user would write and rebuilds its kernel on demand, so a failing case is reproducible
from its text alone, not only from (seed, index).
"""
from __future__ import annotations

import linecache
import random
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

#: Size symbols every generated kernel draws its shapes from.
SIZE_NAMES = ("N", "M")
#: Float element types and the integer ones (Einstein and loop kernels take all four).
FLOATS = ("f32", "f64")
INTS = ("i32", "i64")
#: Largest magnitude a generated integer value may reach (well inside i32).
INT_LIMIT = 2.0 ** 28
#: Largest magnitude a generated float value may reach (well inside f32).
FLOAT_LIMIT = 1e12
#: Special float values injected into inputs.
SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0)


@dataclass(frozen=True)
class Operand:
    """A generated expression: its text, a bound on its magnitude, whether it is integer typed,
    and whether C and numpy compute it bit for bit alike (a direct read, a literal, an index):
    only such values are compared in guards, so that rounding differences of reordered sums can
    never flip a branch."""

    text: str
    bound: float
    is_int: bool
    exact: bool


@dataclass(frozen=True)
class GeneratedKernel:
    """One generated kernel: source text plus everything needed to run it.

    - `language`: "einstein" or "loops"; `source`: Einstein text or the loop function's Python;
    - `declared`: tensor name -> (dtype name or None, shape texts) (Einstein declarations;
      loop kernels carry their types in annotations);
    - `scalars`: scalar parameter name -> dtype name; `dtypes`: every array's dtype name
      (what its input data is drawn as; None for outputs whose type polyc infers);
    - `bounds`: written tensor -> magnitude bound (scales the comparison tolerance);
    - `features`: tags of what the kernel uses (e.g. "max", "mod", "triangular"), for counting.
    """

    name: str
    language: str
    source: str
    declared: Tuple[Tuple[str, Optional[str], Tuple[str, ...]], ...]
    scalars: Tuple[Tuple[str, str], ...]
    bounds: Tuple[Tuple[str, float], ...]
    features: frozenset = field(default_factory=frozenset)

    def build(self):
        """The polyc kernel (raises the PolycError polyc raises for it)."""
        import polyc as pc
        if self.language == "einstein":
            from ..ir import types as _types
            decl: Dict[str, Any] = {}
            for name, dtype, shape in self.declared:
                head = getattr(_types, dtype) if dtype else pc.tensor
                decl[name] = head[tuple(shape)] if shape else getattr(_types, dtype)
            for name, dtype in self.scalars:
                decl[name] = getattr(_types, dtype)
            return pc.kernel(self.source, name=self.name, **decl)
        return pc.kernel(load_function(self.name, self.source))

    def text(self) -> str:
        """The case as a user would write it (Python that builds the kernel)."""
        if self.language == "loops":
            return "import polyc as pc\n\n@pc.kernel\n" + self.source
        decl = [f"{n}=pc.{d or 'tensor'}[{', '.join(repr(s) for s in shape)}]" for n, d, shape in self.declared]
        decl += [f"{n}=pc.{d}" for n, d in self.scalars]
        body = self.source.strip("\n")
        return f'pc.kernel("""\n{body}\n""", name={self.name!r},\n          ' + ", ".join(decl) + ")"


_LOADED: Dict[str, Any] = {}


def load_function(name: str, source: str):
    """Define the loop function `source` under a file name that `inspect` can read back.

    The text is registered in `linecache` (with no modification time, so `checkcache` keeps it),
    which is where `inspect.getsourcelines` looks: the loop front end reads generated functions
    exactly as it reads functions from files.
    """
    import polyc as pc
    key = f"<polyc kernel_fuzz {name} {abs(hash(source)):x}>"
    if key in _LOADED:
        return _LOADED[key]
    lines = source.splitlines(keepends=True)
    linecache.cache[key] = (len(source), None, lines, key)
    namespace: Dict[str, Any] = {"pc": pc, "np": np, "math": __import__("math")}
    exec(compile(source, key, "exec"), namespace)
    fn = namespace[name]
    _LOADED[key] = fn
    return fn


def draw_sizes(rng: random.Random, names, n: int) -> List[Dict[str, int]]:
    """`n` size assignments: mostly 3..7, sometimes the edges 1 and 2 (empty and one-point ranges)."""
    out = []
    for _ in range(n):
        out.append({s: (rng.choice([1, 2]) if rng.random() < 0.15 else rng.randint(3, 7)) for s in names})
    return out


def draw_array(rng: np.random.Generator, shape, dtype: str, specials: float) -> np.ndarray:
    """Random data of `dtype`: floats in [-2, 2] with a fraction `specials` of NaN/inf/zeros;
    integers in [-5, 5]."""
    npd = np.dtype({"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}[dtype])
    if npd.kind == "i":
        return rng.integers(-5, 6, size=shape).astype(npd)
    a = rng.uniform(-2.0, 2.0, size=shape)
    if specials and a.size:
        mask = rng.random(size=shape) < specials
        a = np.where(mask, rng.choice(np.array(SPECIALS), size=shape), a)
    return a.astype(npd)


def limit(is_int: bool) -> float:
    return INT_LIMIT if is_int else FLOAT_LIMIT


def count_features(texts, names=("max", "min", "%", "//", "select", " if ", "exp", "sqrt", "tanh")) -> frozenset:
    """The feature tags present in some source text."""
    joined = "\n".join(texts)
    return frozenset(n.strip() for n in names if n in joined)

