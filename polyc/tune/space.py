"""The search space: genes generated from the primitives' parameter kinds and the Target.

A *genome* maps gene names to values; `Space.realize` turns one into a `Candidate` (a seed —
`"auto"` with `auto_schedule` knobs, or `"source"` — plus concrete primitive steps) and its
proven-legal `Schedule`.  Genes are never listed per kernel; they come from what the kernel and
the machine offer:

- `tile.<loop>` for each loop the automatic scheduler tiles (time loops of stencils included:
  their sizes are the time-tile sizes of the skewed band) — kind "loop_sizes"; values are powers
  of two whose tile footprint fits the Target's caches;
- `register_blocking`, `jam_rows` — auto knobs ("bool");
- `pack.<statement>.<param>` for each contraction statement — the `pack` primitive's
  "optional_int" parameters: `mr` register rows, `nv` vectors per row (vector width from the
  Target), `kc`/`mc`/`nc` blocks sized to L1/L2/L3; its "tensor" parameter `lanes`: the product
  as recognised or the other way round (lanes along the row factor's loops; products whose loop
  groups are not one loop each, such as a convolution's weight gradient);
- `unroll` / `unroll_and_jam` factors ("positive_int") for the innermost loop and the one around
  it; `parallel` granularity: which loop level carries the threads (Target cores);
- `order`: loop orders of the source nest ("loops", the `reorder` primitive);
- `seed`: "auto" or "source".

Steps that a primitive refuses while realising a genome are dropped and counted (`refused`); a
seed that cannot be built makes the whole candidate refused.  Nothing refused is ever run.
"""
from __future__ import annotations

import itertools
import json
import math
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..target import Target
from .registry_view import apply_step, auto_schedule_view, primitives

from .candidate import DEFAULT, KNOBS, Candidate, Step, _small_int  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class Gene:
    name: str
    values: Tuple[Any, ...]   # values[0] is the seed's own choice (DEFAULT) where there is one


def build(kernel: Any, candidate: Candidate, target: Target) -> Any:
    """The Schedule of `candidate`: the seed, then each step through the registry (each proven).
    Raises PolycError (IllegalScheduleError, ...) when any part is refused."""
    knobs = {k: (dict(v) if k == "tile_sizes" else v) for k, v in candidate.knobs}
    if candidate.seed == "auto":
        s = auto_schedule_view(kernel, target, **knobs)
    else:
        s = kernel.schedule()
    for name, args, kwargs in candidate.steps:
        s = apply_step(s, name, args, dict(kwargs))
    return s


def _pow2_upto(lo: int, hi: int) -> List[int]:
    out, v = [], lo
    while v <= hi:
        out.append(v)
        v *= 2
    return out


class Space:
    """The genes of one kernel on one Target (see the module docstring)."""

    def __init__(self, kernel: Any, target: Target, elem_bytes: int = 8):
        self.kernel = kernel
        self.target = target
        self.elem = elem_bytes
        self.lanes = max(1, target.vector_bytes // elem_bytes)
        self.refused = 0
        self.orders: Tuple[Tuple[str, ...], ...] = ()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.auto = auto_schedule_view(kernel, target)
        self.genes: Tuple[Gene, ...] = tuple(self._genes())

    # -- genes from parameter kinds and the Target ----------------------------------------------
    def _genes(self) -> List[Gene]:
        from ..tune.space_domains import contraction_statements, tiled_loops
        prims = primitives()
        genes = [Gene("seed", ("auto", "source"))]
        tiled = tiled_loops(self.auto)
        if "tile" in prims and any(p.kind == "loop_sizes" for p in prims["tile"].params):
            # Tile edges from a vector's lanes up to a square tile of the last-level cache.
            hi = max(16, int((max(self.target.l3, self.target.l2) / self.elem) ** 0.5))
            sizes = tuple(_pow2_upto(max(4, self.lanes), min(512, hi)))
            for loop in tiled:
                genes.append(Gene(f"tile.{loop}", (DEFAULT,) + sizes))
        genes.append(Gene("register_blocking", (DEFAULT, True, False)))
        genes.append(Gene("jam_rows", (DEFAULT, False, True)))
        if "pack" in prims:
            for st in contraction_statements(self.kernel):
                genes.extend(self._pack_genes(st, prims["pack"].params))
        if "reorder" in prims and any(p.kind == "loops" for p in prims["reorder"].params):
            # Loop orders of the source nest (its innermost three loops; the seed's order first).
            inner = self.kernel.schedule().loop_names[-3:]
            self.orders = tuple(itertools.permutations(inner))[1:]
            if self.orders:
                genes.append(Gene("order", (DEFAULT,) + tuple(range(1, len(self.orders) + 1))))
        if "unroll" in prims:
            genes.append(Gene("unroll", (DEFAULT, 2, 4, 8)))
        if "unroll_and_jam" in prims:
            genes.append(Gene("unroll_and_jam", (DEFAULT, 2, 4)))
        if "parallel" in prims and self.target.cores > 1:
            genes.append(Gene("parallel_level", (DEFAULT, 0, 1, 2)))
        return genes

    def _pack_genes(self, statement: str, params: Sequence[Any]) -> List[Gene]:
        from ..tune.space_domains import other_lanes
        t, e = self.target, self.elem
        domains: Dict[str, Tuple[int, ...]] = {
            "mr": (4, 6, 8, 12),
            "nv": (1, 2, 3, 4),
            # a kc x nr panel of B plus an mr x kc sliver of A stay in L1
            "kc": tuple(k for k in (64, 128, 192, 256, 384, 512) if k * 8 * e <= 2 * t.l1) or (64,),
            # an mc x kc block of A in (half of) L2
            "mc": tuple(m for m in (48, 96, 144, 192, 288, 384) if m * 128 * e <= t.l2) or (48,),
            # a kc x nc block of B in (half of) L3, in whole vector panels
            "nc": tuple(n for n in (512, 1024, 2048, 4096, 8192) if n * 128 * e <= max(t.l3, 1 << 20)) or (512,),
        }
        genes = [Gene(f"pack.{statement}.{p.name}", (DEFAULT,) + domains[p.name])
                 for p in params if p.kind == "optional_int" and p.name in domains]
        turned = other_lanes(self.kernel, statement)
        for p in params:
            if p.kind == "tensor" and p.name == "lanes" and turned is not None:
                # the product the other way round: the lanes along the row factor's loops
                genes.append(Gene(f"pack.{statement}.{p.name}", (DEFAULT, turned)))
        return genes

    def seed_schedule(self, seed: "Candidate") -> Any:
        """The schedule of a seed with its knobs (no steps), memoised: the automatic scheduler is
        the costly part of realising a genome, and children share their parents' seeds."""
        cache = self.__dict__.setdefault("_seeds", {})
        if seed not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cache[seed] = build(self.kernel, seed, self.target)
        return cache[seed]

    def default(self) -> Dict[str, Any]:
        """The genome of `schedule="auto"` (every gene at the seed's own choice)."""
        return {g.name: g.values[0] for g in self.genes}

    def source(self) -> Dict[str, Any]:
        return dict(self.default(), seed="source")

    def random(self, rng: Any) -> Dict[str, Any]:
        return {g.name: g.values[int(rng.integers(len(g.values)))] for g in self.genes}

    def mutate(self, genome: Mapping[str, Any], rng: Any, rate: float = 0.25) -> Dict[str, Any]:
        """Each gene moves to a neighbouring value (or any value) with probability `rate`; at least one moves."""
        out = dict(genome)
        moved = False
        order = list(self.genes)
        forced = int(rng.integers(len(order)))
        for k, g in enumerate(order):
            if len(g.values) < 2 or not (k == forced or rng.random() < rate):
                continue
            i = g.values.index(out[g.name]) if out[g.name] in g.values else 0
            if rng.random() < 0.7 and len(g.values) > 2:
                j = min(len(g.values) - 1, max(0, i + (1 if rng.random() < 0.5 else -1)))
            else:
                j = int(rng.integers(len(g.values)))
            moved = moved or j != i
            out[g.name] = g.values[j]
        return out

    def crossover(self, a: Mapping[str, Any], b: Mapping[str, Any], rng: Any) -> Dict[str, Any]:
        """Genes taken from `a` or `b` by group (all tile sizes together, all pack parameters of a
        statement together), so blockings that work as a whole stay whole."""
        groups: Dict[str, List[str]] = {}
        for g in self.genes:
            head = g.name.rsplit(".", 1)[0] if g.name.startswith(("tile.", "pack.")) else g.name
            groups.setdefault(head if not g.name.startswith("tile.") else "tile", []).append(g.name)
        out: Dict[str, Any] = {}
        for names in groups.values():
            src = a if rng.random() < 0.5 else b
            for n in names:
                out[n] = src[n]
        return out

    # -- genome -> candidate --------------------------------------------------------------------
    def realize(self, genome: Mapping[str, Any]) -> Tuple[Candidate, Any]:
        """(candidate, schedule) for `genome`; refused optional steps are dropped (and counted).
        Raises PolycError when the seed itself is refused."""
        from ..tune.space_domains import realize_genome
        return realize_genome(self, genome)


def genome_key(genome: Mapping[str, Any]) -> str:
    return json.dumps(sorted(genome.items()), default=str)


def log2(v: Optional[float]) -> float:
    return math.log2(v) if v else -1.0
