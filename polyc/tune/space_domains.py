"""How a genome becomes primitive steps: which loops and statements the genes act on.

Kept apart from `space` (which says what may vary) because this part reads schedules: the loops
the automatic scheduler tiled, the contraction statements `pack` accepts, the innermost loop.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import islpy as isl

from ..errors import IslBudgetError, PolycError
from ..schedule.state import LoopKind
from .registry_view import apply_step
from .candidate import DEFAULT, Candidate

_REFUSALS = (PolycError, IslBudgetError, isl.Error)


def tiled_loops(schedule: Any) -> List[str]:
    """The loops the automatic scheduler tiled, by the name its `tile_sizes` knob takes (the tile
    loop `i_tile` iterates tiles of `i`; time tiles of skewed stencil bands included)."""
    return [d.name[:-len("_tile")] for d in schedule.dims if d.name and d.name.endswith("_tile")]


def contraction_statements(kernel: Any) -> List[str]:
    """Statements that `pack` can run BLAS-style (matmul-like access relations)."""
    from ..schedule.packing import contraction_form
    program = kernel.model.program
    return [st.name for st in program.statements if not isinstance(contraction_form(program, st.name), str)]


def other_lanes(kernel: Any, statement: str) -> Optional[str]:
    """The `lanes` argument that runs contraction `statement` the other way round, where there is
    one (`packing_paths.turning_tensor`)."""
    from ..schedule.packing import contraction_form
    from ..schedule.packing_paths import turning_tensor
    c = contraction_form(kernel.model.program, statement)
    return None if isinstance(c, str) else turning_tensor(c)


def _loops(s: Any) -> List[Any]:
    """The loops of `s` that are not unrolled fully (register lanes)."""
    return [d for d in s.dims if d.name is not None and not d.unroll.is_full]


def _free_loops(s: Any) -> List[Any]:
    """The loops a tuner may still unroll: serial, not packed, not unrolled."""
    packed = s.packed_loops()
    return [d for d in _loops(s) if not d.kinds and d.name not in packed and d.unroll.is_none]


def realize_genome(space: Any, genome: Mapping[str, Any]) -> Tuple[Candidate, Any]:
    """(candidate, schedule) for `genome` (see `Space.realize`)."""
    seed = genome.get("seed", "auto")
    knobs: Dict[str, Any] = {}
    packs: Dict[str, Dict[str, Any]] = {}
    for name, v in genome.items():
        if name.startswith("pack.") and v is not DEFAULT:
            _, st, p = name.split(".")
            packs.setdefault(st, {})[p] = v if p == "lanes" else int(v)
    if seed == "auto":
        tiles = {n[5:]: int(v) for n, v in genome.items() if n.startswith("tile.") and v is not DEFAULT}
        if tiles:
            knobs["tile_sizes"] = tuple(sorted(tiles.items()))
        if genome.get("register_blocking") is not DEFAULT:
            knobs["register_blocking"] = bool(genome["register_blocking"])
        if genome.get("jam_rows", DEFAULT) is not DEFAULT:
            knobs["jam_rows"] = bool(genome["jam_rows"])
        if packs:
            knobs["pack"] = False
    cand = Candidate(seed, tuple(sorted(knobs.items())))
    s = space.seed_schedule(cand)
    steps: List[Tuple[str, tuple, tuple]] = []

    def attempt(name: str, args: tuple, kwargs: Mapping[str, Any] = ()) -> bool:
        nonlocal s
        try:
            s = apply_step(s, name, args, dict(kwargs))
        except _REFUSALS:
            space.refused += 1
            return False
        steps.append((name, args, tuple(sorted(dict(kwargs).items()))))
        return True

    contractions = contraction_statements(space.kernel) if (seed == "source" or packs) else []
    for st in contractions:
        if seed == "auto" and st not in packs:
            continue
        if attempt("pack", (st,), packs.get(st, {})) and space.target.cores > 1:
            plan = s.packing[-1]
            attempt("parallel", (plan.m_block_loop,))
    if seed == "source" and not contractions:
        if genome.get("order") not in (DEFAULT, 0) and int(genome["order"]) <= len(space.orders):
            attempt("reorder", tuple(space.orders[int(genome["order"]) - 1]))
        loops = _loops(s)
        level = genome.get("parallel_level") or 0
        if loops and space.target.cores > 1:
            for d in loops[level:] + loops[:level]:
                if attempt("parallel", (d.name,)):
                    break
        loops = _loops(s)
        if loops and LoopKind.PARALLEL not in loops[-1].kinds:
            attempt("vectorize", (loops[-1].name,))
    if s.packing:
        # A packed contraction unrolls its own register tile; the loops left are initialisations.
        return Candidate(seed, cand.knobs, tuple(steps)), s
    loops = _free_loops(s)
    if genome.get("unroll_and_jam") is not DEFAULT and len(loops) >= 2:
        attempt("unroll_and_jam", (loops[-2].name, int(genome["unroll_and_jam"])))
    loops = _free_loops(s)
    if genome.get("unroll") is not DEFAULT and loops:
        attempt("unroll", (loops[-1].name, int(genome["unroll"])))
    return Candidate(seed, cand.knobs, tuple(steps)), s
