"""The automatic scheduler's machine and cost model: caches, access strides, tile sizes.

- machine facts (cache sizes, cores) come only from the `polyc.Target` the caller passes;
- `direction`: how a statement's iterators move when one loop of its schedule advances by one
  while every other loop stays put (a rational linear solve on the schedule's coefficients);
- `access_kind`: whether an access is invariant, unit-stride or strided along such a direction;
- `tile_sizes`: tile sizes that maximise iterations per byte touched for a tile whose data must
  fit a cache budget (the footprint of an access is the box hull of its image of the tile).
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import List, Mapping, Optional, Sequence, Tuple

from ..ir import Access, Program


# -- linear algebra over the rationals ------------------------------------------------------------

def solve(rows: Sequence[Sequence[int]], rhs: Sequence[int], n: int) -> Optional[List[Fraction]]:
    """A solution x of rows . x = rhs (free variables set to 0), or None when inconsistent."""
    m = [[Fraction(v) for v in r] + [Fraction(b)] for r, b in zip(rows, rhs)]
    pivots: List[int] = []
    r = 0
    for c in range(n):
        pr = next((k for k in range(r, len(m)) if m[k][c] != 0), None)
        if pr is None:
            continue
        m[r], m[pr] = m[pr], m[r]
        piv = m[r][c]
        m[r] = [v / piv for v in m[r]]
        for k in range(len(m)):
            if k != r and m[k][c] != 0:
                f = m[k][c]
                m[k] = [a - f * b for a, b in zip(m[k], m[r])]
        pivots.append(c)
        r += 1
    for k in range(r, len(m)):
        if m[k][n] != 0:
            return None
    x = [Fraction(0)] * n
    for k, c in enumerate(pivots):
        x[c] = m[k][n]
    return x


def direction(rows: Sequence[Sequence[int]], p: int, n: int) -> Optional[List[Fraction]]:
    """How the iterators move when schedule row `p` advances by one and the others stay put."""
    rhs = [1 if k == p else 0 for k in range(len(rows))]
    if not any(rows[p]):
        return None
    return solve(rows, rhs, n)


# -- accesses ------------------------------------------------------------------------------------

def access_delta(acc: Access, iterators: Sequence[str], v: Sequence[Fraction]) -> List[Fraction]:
    """Change of each subscript of `acc` along iterator direction `v`."""
    out = []
    for e in acc.indices:
        out.append(sum((Fraction(e.coeff(it)) * v[k] for k, it in enumerate(iterators)), Fraction(0)))
    return out


def access_kind(delta: Sequence[Fraction]) -> str:
    """'invariant', 'unit' (only the last subscript moves, by +-1) or 'strided'."""
    if all(d == 0 for d in delta):
        return "invariant"
    if all(d == 0 for d in delta[:-1]) and abs(delta[-1]) == 1:
        return "unit"
    return "strided"


def statement_accesses(program: Program, name: str) -> List[Tuple[Access, bool]]:
    st = program.statement(name)
    return [(st.target, True)] + [(a, False) for a in st.reads() if a is not st.target]


def innermost_score(program: Program, name: str, v: Optional[Sequence[Fraction]]) -> float:
    """How good it is to run the direction `v` innermost for statement `name` (higher is better)."""
    if v is None:
        return 0.0
    st = program.statement(name)
    score = 0.0
    for acc, is_write in statement_accesses(program, name):
        if not acc.indices:
            score += 0.5
            continue
        kind = access_kind(access_delta(acc, st.iterators, v))
        if kind == "unit":
            score += 2.0 if is_write else 1.0
        elif kind == "invariant":
            score += 0.5 if is_write else 1.0
        else:
            score -= 4.0 if is_write else 2.0
    return score


def all_unit_or_invariant(program: Program, name: str, v: Optional[Sequence[Fraction]]) -> bool:
    """True when every access of `name` is unit-stride or invariant along `v` (worth SIMD)."""
    if v is None:
        return False
    st = program.statement(name)
    for acc, _ in statement_accesses(program, name):
        if acc.indices and access_kind(access_delta(acc, st.iterators, v)) == "strided":
            return False
    return True


# -- tile sizes ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Footprint:
    """For each distinct access (array, linear part): per subscript, its coefficient per loop."""

    array: str
    coeffs: Tuple[Tuple[Fraction, ...], ...]   # subscript -> loop -> change per step

    def elements(self, sizes: Sequence[int]) -> int:
        total = 1
        for row in self.coeffs:
            extent = 1 + sum(abs(c) * (t - 1) for c, t in zip(row, sizes))
            total *= max(1, int(extent))
        return total


def footprints(program: Program, names: Sequence[str],
               dirs: Mapping[str, Sequence[Optional[Sequence[Fraction]]]]) -> List[Footprint]:
    """The distinct accesses of `names` in terms of the band's loops (`dirs[s][p]`: direction of
    loop p for statement s, None where s does not move along p)."""
    seen = {}
    for s in names:
        st = program.statement(s)
        for acc, _ in statement_accesses(program, s):
            if not acc.indices:
                continue
            rows = []
            for e in acc.indices:
                row = []
                for v in dirs[s]:
                    if v is None:
                        row.append(Fraction(0))
                    else:
                        row.append(sum((Fraction(e.coeff(it)) * v[k] for k, it in enumerate(st.iterators)),
                                       Fraction(0)))
                rows.append(tuple(row))
            fp = Footprint(acc.tensor, tuple(rows))
            seen[(fp.array, fp.coeffs)] = fp
    return list(seen.values())


CANDIDATES = (1, 4, 8, 16, 32, 64, 128, 256, 512)


def rank(rows: Sequence[Sequence[Fraction]]) -> int:
    m = [list(r) for r in rows]
    r = 0
    ncols = len(m[0]) if m else 0
    for c in range(ncols):
        pr = next((k for k in range(r, len(m)) if m[k][c] != 0), None)
        if pr is None:
            continue
        m[r], m[pr] = m[pr], m[r]
        for k in range(len(m)):
            if k != r and m[k][c] != 0:
                f = m[k][c] / m[r][c]
                m[k] = [a - f * b for a, b in zip(m[k], m[r])]
        r += 1
    return r


def has_reuse(fps: Sequence[Footprint], n: int) -> bool:
    """True when tiling an n-loop band can keep data in cache that would otherwise be evicted: some
    access touches a slice of at least two dimensions that the band's loops revisit (its rank over
    the band's loops is below n).  Vectors reused across a loop fit in cache untiled."""
    return any(2 <= rank(fp.coeffs) < n for fp in fps)


#: Bands whose full product of candidate sizes is at most this many are searched exhaustively
#: (every band of up to four loops: the benchmark kernels get the exact optimum); larger bands are
#: searched locally (`_local_search`), which evaluates O(n^2) candidates per step instead of 8^n.
EXHAUSTIVE_LIMIT = 4096

#: Hard cap on the candidates a local search evaluates for one band (the deterministic bound).
LOCAL_SEARCH_LIMIT = 3000


class SearchBudget:
    """The automatic scheduler's search budget: a deadline in seconds (None for none) and a count
    of the tile-size candidates evaluated (the regression guard: the count is deterministic, the
    clock is not).  Once the deadline has passed, searches return the best found so far.

    The clock is this process's CPU time (`time.process_time`), not the time on the wall: on a
    machine shared with other jobs the wall clock runs several times faster than the scheduler's
    own work, and a wall-clock deadline would make the schedule (and so the generated code) depend
    on the load of other processes.  CPU time bounds the work itself, reproducibly."""

    def __init__(self, seconds: Optional[float] = None, clock=time.process_time):
        self.clock = clock
        self.deadline = None if seconds is None else clock() + seconds
        self.seconds = seconds
        self.candidates = 0
        self.expired_at: Optional[str] = None   # what was cut short first (for the debug log)

    def restart(self) -> None:
        """Start the deadline again from now (after isl's scheduler, which its own operation
        budget bounds: the deadline is for polyc's searches, and marks must not be cut because
        isl took most of it on a slow machine)."""
        if self.seconds is not None:
            self.deadline = self.clock() + self.seconds

    def expired(self, what: str = "") -> bool:
        if self.deadline is None or self.clock() < self.deadline:
            return False
        if self.expired_at is None:
            self.expired_at = what or "search"
        return True


#: Candidates evaluated by `tile_sizes` since the process started (all bands, all searches).
CANDIDATES_EVALUATED = [0]


def _elements_function(fps: Sequence[Footprint]):
    """`sizes -> sum of fp.elements(sizes)`, with each footprint's coefficients prepared once
    (integers where they are whole: the search evaluates this thousands of times)."""
    rows = []
    for fp in fps:
        prepared = []
        for row in fp.coeffs:
            terms = tuple((p, int(abs(c)) if c.denominator == 1 else abs(c)) for p, c in enumerate(row) if c)
            prepared.append(terms)
        rows.append(tuple(prepared))

    def elements(sizes: Sequence[int]) -> int:
        total = 0
        for prepared in rows:
            product = 1
            for terms in prepared:
                extent = 1
                for p, c in terms:
                    extent += c * (sizes[p] - 1)
                product *= max(1, int(extent))
            total += product
        return total

    return elements


def tile_choices(n: int, innermost: Optional[int], time_like: Sequence[int], min_inner: int) -> List[List[int]]:
    """The candidate sizes of each loop of an n-loop band: at least 4; at least `min_inner` for the
    SIMD loop; between 4 and 32 for skewed time loops (compact tiles)."""
    choices = []
    for p in range(n):
        c = [v for v in CANDIDATES if v >= 4]
        if p == innermost:
            c = [v for v in CANDIDATES if v >= min_inner]
        if p in time_like:
            c = [v for v in CANDIDATES if 4 <= v <= 32]
        choices.append(c)
    return choices


def tile_sizes(fps: Sequence[Footprint], n: int, budget_bytes: int, elem_bytes: int = 8,
               innermost: Optional[int] = None, time_like: Sequence[int] = (),
               min_inner: int = 64, search: Optional[SearchBudget] = None,
               step_budget_bytes: Optional[int] = None) -> Tuple[int, ...]:
    """Tile sizes for an n-loop band maximising iterations per byte of the tile's footprint,
    which must fit `budget_bytes`.  The `innermost` loop (the SIMD one) gets at least `min_inner`;
    `time_like` loops (skewed time) are kept short so tiles stay compact.  `step_budget_bytes`:
    what one step of the `time_like` loops may touch (the tile with those loops at size 1), so
    that each time step of a time tile re-reads the previous step's data from that cache
    (`time_step_cache`).

    Up to `EXHAUSTIVE_LIMIT` combinations every one is scored; beyond, a local search from
    uniform starting points (`_local_search`) keeps the work polynomial in n.  `search` counts
    the candidates and may cut the search short at its deadline (best so far)."""
    choices = tile_choices(n, innermost, time_like, min_inner)
    elements = _elements_function(fps)

    def score(sizes: Sequence[int]) -> Optional[tuple]:
        """The cost model's key (higher is better), None when the tile's data does not fit."""
        CANDIDATES_EVALUATED[0] += 1
        if search is not None:
            search.candidates += 1
        elems = elements(sizes)
        if elems * elem_bytes > budget_bytes:
            return None
        if step_budget_bytes is not None and time_like:
            step = [1 if p in time_like else t for p, t in enumerate(sizes)]
            if elements(step) * elem_bytes > step_budget_bytes:
                return None
        work = 1
        for t in sizes:
            work *= t
        ratio = work / max(1, elems)
        inner = sizes[innermost] if innermost is not None else 0
        return (round(ratio, 3), inner, -work)

    total = 1
    for c in choices:
        total *= len(c)
    if total <= EXHAUSTIVE_LIMIT:
        best, best_key = None, None
        fitting = []
        for k, sizes in enumerate(itertools.product(*choices)):
            if k % 256 == 0 and search is not None and best is not None and search.expired("tile sizes"):
                break
            key = score(sizes)
            if key is not None:
                fitting.append((sizes, key))
                if best_key is None or key > best_key:
                    best, best_key = sizes, key
        if step_budget_bytes is not None and time_like and best_key is not None:
            best = _longest_time_tile(fitting, best_key[0], time_like)
    else:
        best = _local_search(choices, score, search)
    if best is None and step_budget_bytes is not None:
        return tile_sizes(fps, n, budget_bytes, elem_bytes, innermost, time_like, min_inner, search)
    if best is None:
        best = tuple(min(c) for c in choices)
    return tuple(best)


#: Time tiles whose iterations per element are within this fraction of the best count as equally
#: good (`_longest_time_tile`).
TIME_TILE_TIE = 0.05


def _longest_time_tile(fitting: Sequence[Tuple[Tuple[int, ...], tuple]], best_ratio: float,
                       time_like: Sequence[int]) -> Tuple[int, ...]:
    """Among tiles within `TIME_TILE_TIE` of the best ratio, the one with the most time steps
    (then the model's own order).  When one step of a tile fits in L1, a longer time tile costs a
    skewed halo that grows with its length (the ratio sees that), and saves tile starts and loop
    bounds per point (which it does not): jacobi-2d N=1300 T=50, 16 x 128 points a step, ratio
    2.25 at 16 steps and 2.21 at 32, ran 34.4 against 32.1 ms on one thread, 20.5 against 17.9 on
    two."""
    near = [(sizes, key) for sizes, key in fitting if key[0] >= (1 - TIME_TILE_TIE) * best_ratio]
    return max(near, key=lambda item: (math.prod(item[0][p] for p in time_like), item[1]))[0]


#: Starting points a local search climbs from (the best uniform tiles): one climb can stop at a
#: local optimum that another reaches past.
LOCAL_SEARCH_STARTS = 3


def _local_search(choices: List[List[int]], score, search: Optional[SearchBudget]) -> Optional[Tuple[int, ...]]:
    """Steepest-ascent search over tile sizes for large bands.

    Scores the uniform points (every loop at the same candidate index, clamped to each loop's
    choices) and climbs from the `LOCAL_SEARCH_STARTS` best: each step moves to the best neighbour,
    where a neighbour changes one loop to any of its sizes, or moves two loops one step each (a
    tile at the cache budget can only grow along one loop by shrinking along another; reuse between
    two loops may only show when both grow).  A climb stops at a local optimum; the whole search
    after `LOCAL_SEARCH_LIMIT` candidates or at the deadline.  Equal keys go to the smaller sizes
    in lexicographic order, as the exhaustive search's first maximum."""
    seen: dict = {}

    def key_of(idx: Tuple[int, ...]):
        if idx not in seen:
            seen[idx] = score(tuple(choices[p][i] for p, i in enumerate(idx)))
        return seen[idx]

    def rank(idx: Tuple[int, ...]):
        """Sort key (ascending = better) of a fitting point."""
        key = key_of(idx)
        return (tuple(-x for x in key), idx)

    def out_of_budget() -> bool:
        return len(seen) >= LOCAL_SEARCH_LIMIT or (search is not None and search.expired("tile sizes"))

    width = max(len(c) for c in choices)
    seeds = sorted({tuple(min(u, len(c) - 1) for c in choices) for u in range(width)})
    fitting = sorted((idx for idx in seeds if key_of(idx) is not None), key=rank)
    if not fitting:
        return None
    best = fitting[0]
    for start in fitting[:LOCAL_SEARCH_STARTS]:
        current = start
        while not out_of_budget():
            step = current
            for idx in _neighbours(current, choices):
                if len(seen) >= LOCAL_SEARCH_LIMIT:
                    break
                if key_of(idx) is not None and rank(idx) < rank(step):
                    step = idx
            if step == current:
                break
            current = step
        if rank(current) < rank(best):
            best = current
        if out_of_budget():
            break
    return tuple(choices[p][i] for p, i in enumerate(best))


def _neighbours(idx: Tuple[int, ...], choices: List[List[int]]) -> List[Tuple[int, ...]]:
    """One loop at any other size; two loops one step each (both ways, same or opposite)."""
    n = len(choices)
    out = []
    for p in range(n):
        for i in range(len(choices[p])):
            if i != idx[p]:
                out.append(idx[:p] + (i,) + idx[p + 1:])
    for p in range(n):
        for q in range(p + 1, n):
            for dp, dq in ((1, -1), (-1, 1), (1, 1), (-1, -1)):
                i, j = idx[p] + dp, idx[q] + dq
                if 0 <= i < len(choices[p]) and 0 <= j < len(choices[q]):
                    moved = list(idx)
                    moved[p], moved[q] = i, j
                    out.append(tuple(moved))
    return out
