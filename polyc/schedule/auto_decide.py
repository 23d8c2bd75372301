"""Decisions of the automatic scheduler on each isl band: loop order, tiling, wavefronts.

A permutable band may run its members in any order and may be tiled (every dependence it has to
respect moves forward or stays put along each member), which is what the decisions rely on:

- tile loops: members isl marked coincident (parallel) go outermost; when none is, the first two
  tile loops are combined into a wavefront `w = T0 + T1`, after which `T1` carries no dependence
  (time tiling of stencils gets its parallelism this way; when the call's time loop spans fewer
  than two tiles per core, all the tile loops `T0 + ... + Tn`, so time tiles start in parallel);
- point loops of an innermost band: the member whose step moves memory with unit stride (scored
  over all accesses) and is coincident goes innermost; the others keep the tile order;
- point loops of a skewed band (a member mixes iterators, as in time-skewed stencils): the
  statements' own source order inside each tile, which is legal for any tiling of a permutable
  band and keeps the inner loops as vectorisable as the user wrote them;
- tile sizes: `auto_cost.tile_sizes` with half the target's L2 cache per core as the budget (searched
  within the scheduler's `SearchBudget`).

Nothing here is trusted: `auto.py` proves the flattened result with `check_legal` and every mark
with `check_parallel`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence as Seq, Tuple

import islpy as isl

from ..poly.model import PolyModel
from ..target import Target
from .auto_cost import (SearchBudget, access_delta, access_kind, all_unit_or_invariant, direction, footprints,
                        has_reuse, innermost_score, statement_accesses, tile_sizes)
from .auto_size import fits_in_cache, jam_pays_across_strides, member_extent, time_step_cache, time_tiling_cache
from .auto_tree import (Band, Leaf, Loop, Nest, Node, Sequence, UnsupportedTree, aff_coefficients,
                        equals_iterator, is_constant)
from .schedule import Schedule


#: The shortest unit-stride tile of a time-tiled 3-D stencil (elements; see `Decider._band`).
SKEWED_3D_MIN_ROW = 256

#: Time tiles per core in one group of a time-tiled band's wavefront (see `Decider._time_group`).
TIME_TILES_PER_GROUP_PER_CORE = 2

#: The shortest unit-stride tile of a time-tiled 1-D or 2-D stencil (elements; see `Decider._band`).
SKEWED_MIN_ROW = 128


@dataclass(frozen=True)
class DecideOptions:
    tile: bool = True
    wavefront: bool = True
    fuse: bool = True
    jam: int = 0              # unroll-and-jam factor of a reduction loop into the SIMD loop (0: off)
    stride_order: bool = True  # put the best unit-stride member innermost (CPU SIMD)
    tile_sizes: Optional[Dict[str, int]] = None   # explicit sizes by loop name (for tuning)

    def describe(self) -> List[str]:
        out = ["tiled" if self.tile else "untiled"]
        if self.fuse:
            out.append("fused where it saves traffic")
        if self.tile and self.wavefront:
            out.append("wavefront where needed")
        if self.jam:
            out.append(f"register blocking x{self.jam}")
        return out


#: A parallel tile loop whose tiles split over the cores within this fraction of evenly keeps the
#: cache model's tile size (`_balanced_tile`); sizes it chooses instead are multiples of `BALANCE_ROUND`.
BALANCE_SLACK = 0.1
BALANCE_ROUND = 8


def _balance(tiles: int, cores: int) -> float:
    """The fraction of the cores' time a static schedule of `tiles` equal tiles keeps busy."""
    return tiles / (-(-tiles // cores) * cores)


def _floor_div(pa: isl.PwAff, size: int) -> isl.PwAff:
    return pa.scale_down_val(isl.Val.int_from_si(pa.get_ctx(), size)).floor()


def _has_band(node: Node) -> bool:
    if isinstance(node, Band):
        return True
    if isinstance(node, Sequence):
        return any(_has_band(c) for c in node.children)
    return False


class Decider:
    """Turns isl's bands into decided nests (see the module docstring)."""

    def __init__(self, model: PolyModel, options: DecideOptions, target: Target,
                 search: Optional[SearchBudget] = None, sizes: Optional[Dict[str, int]] = None):
        self.model = model
        self.sizes = sizes  # a call's size class (None: decide for every size)
        self.search = search
        self.program = model.program
        self.options = options
        self.target = target   # the only source of machine facts (caches, cores)
        self._names = 0
        self._source = None

    # -- helpers -------------------------------------------------------------------------------
    def _n_it(self, s: str) -> int:
        return len(self.program.statement(s).iterators)

    def _member_name(self, member: Dict[str, isl.PwAff]) -> Tuple[str, Optional[str]]:
        names = set()
        for s, pa in member.items():
            if is_constant(pa):
                continue
            names.add(equals_iterator(pa, self.model, s))
        if len(names) == 1 and None not in names:
            name = names.pop()
            return name, name
        self._names += 1
        return f"t{self._names - 1}", None

    def _rows(self, s: str, exprs: Seq) -> Optional[List[List[int]]]:
        rows = []
        for pa in exprs:
            c = aff_coefficients(pa, self._n_it(s))
            if c is None:
                return None
            rows.append(c[0])
        return rows

    def _elem_bytes(self) -> int:
        sizes = [t.dtype.bits // 8 for t in self.program.tensors if t.dtype is not None]
        return max(sizes) if sizes else 8

    def _source_loops(self, statements: Seq[str]) -> List[Loop]:
        """The source-order schedule of `statements` as loops (for point loops of skewed tiles)."""
        if self._source is None:
            self._source = Schedule.source_order(self.model)
        src = self._source
        loops: List[Loop] = []
        pmas = {s: isl.PwMultiAff.from_map(src.statement_map(s)) for s in statements}
        for p, d in enumerate(src.dims):
            exprs = {}
            for s in statements:
                pa = pmas[s].get_pw_aff(p)
                if d.name is None or is_constant(pa):
                    if d.name is None:
                        aff = pa.get_pieces()[0][1]
                        exprs[s] = int(aff.get_constant_val().to_python())
                    else:
                        exprs[s] = pa
                else:
                    exprs[s] = pa
            if d.name is None:
                loops.append(Loop(exprs, None, role="scalar"))
            else:
                loops.append(Loop(exprs, d.name, role="source", origin=d.origin))
        return loops

    # -- the walk ------------------------------------------------------------------------------
    def decide(self, node: Node, outer: Optional[Dict[str, List[isl.PwAff]]] = None) -> Node:
        if outer is None:
            outer = {st.name: [] for st in self.program.statements}
        if isinstance(node, Leaf):
            return node
        if isinstance(node, Sequence):
            return Sequence(node.statements, [self.decide(c, outer) for c in node.children])
        if isinstance(node, Band):
            return self._band(node, outer)
        raise UnsupportedTree(f"unexpected node {type(node).__name__}")

    def _sink_simd_member(self, band: Band, outer: Dict[str, List[isl.PwAff]]) -> Band:
        """When below `band` there is only a chain of bands of reductions (no coincident member, as
        the (kh, kw) loops of a convolution), move a coincident member of `band` that touches
        memory with unit stride to the end of the innermost one: a member along which no dependence
        moves may run at any depth, and innermost it gives the reductions a SIMD loop."""
        chain: List[Band] = []
        node = band.child
        while isinstance(node, Band) and set(node.statements) == set(band.statements):
            chain.append(node)
            node = node.child
        if not (self.options.stride_order and chain and not _has_band(node) and len(band.members) >= 2
                and not any(c for b in chain for c in b.coincident)):
            return band
        chain_members = [m for b in chain for m in b.members]
        best = None
        for k, m in enumerate(band.members):
            if not band.coincident[k]:
                continue
            ok = True
            for st_name in band.statements:
                rest = [band.members[j][st_name] for j in range(len(band.members)) if j != k]
                rows = self._rows(st_name, list(outer.get(st_name, [])) + rest
                                  + [cm[st_name] for cm in chain_members] + [m[st_name]])
                if rows is None:
                    return band
                v = direction(rows, len(rows) - 1, self._n_it(st_name))
                if v is None or not all_unit_or_invariant(self.program, st_name, v):
                    ok = False
                    break
            if ok:
                best = k  # the last such member: the one isl (and the user) had innermost
        if best is None:
            return band
        keep = [j for j in range(len(band.members)) if j != best]
        last = chain[-1]
        new: Node = Band(last.statements, last.members + [band.members[best]], last.coincident + [True],
                         last.permutable, last.child)
        for b in reversed(chain[:-1]):
            new = Band(b.statements, b.members, b.coincident, b.permutable, new)
        return Band(band.statements, [band.members[j] for j in keep], [band.coincident[j] for j in keep],
                    band.permutable, new)

    def _band(self, band: Band, outer: Dict[str, List[isl.PwAff]]) -> Node:
        band = self._sink_simd_member(band, outer)
        n = len(band.members)
        names = [self._member_name(m) for m in band.members]
        innermost_band = not _has_band(band.child)
        # Coefficient rows of each statement's enclosing loops plus this band's members.
        rows: Dict[str, Optional[List[List[int]]]] = {}
        for s in band.statements:
            rows[s] = self._rows(s, list(outer.get(s, [])) + [m[s] for m in band.members])
        affine = all(r is not None for r in rows.values())
        base = {s: len(outer.get(s, [])) for s in band.statements}

        def dirs_for(order: Seq[int]) -> Dict[str, List]:
            out = {}
            for s in band.statements:
                r = rows[s]
                out[s] = [None if r is None else direction(r, base[s] + k, self._n_it(s)) for k in order]
            return out

        skewed = False
        if affine:
            for s in band.statements:
                band_rows = rows[s][base[s]:]  # type: ignore[index]
                nz = [tuple(k for k, c in enumerate(r) if c) for r in band_rows]
                used = [x for x in nz if x]
                if any(len(x) > 1 for x in used) or len(set(used)) < len(used):
                    skewed = True

        # Loop order: coincident members first (a permutable band allows any order).
        order = list(range(n))
        if band.permutable:
            order = [k for k in range(n) if band.coincident[k]] + [k for k in range(n) if not band.coincident[k]]

        # Tiling pays when some access revisits a slice of two or more dimensions (cost model);
        # time tiling (a skewed band) only when the data does not fit in cache at the call's sizes
        # (`time_tiling_cache`).
        tiling = (self.options.tile and band.permutable and n >= 2 and affine)
        if tiling and skewed and fits_in_cache(self.program, band.statements, self.sizes,
                                               time_tiling_cache(self.target)):
            tiling = False
        if tiling:
            tiling = has_reuse(footprints(self.program, band.statements, dirs_for(list(range(n)))), n)

        # Point order: the best unit-stride member innermost (innermost bands only).
        point = list(order)
        if self.options.stride_order and band.permutable and affine and innermost_band and not skewed and n >= 2:
            point = self._point_order(band, order, dirs_for(list(range(n))), tiling)
        # No reuse in time, but a read and the write running along different loops (a transpose):
        # tiles that keep the strided lines in L1 while the other loop runs across them.
        spatial = None
        if (not tiling and self.options.tile and band.permutable and affine and innermost_band and not skewed
                and n >= 2):
            spatial = self._spatial_tiles(band, point, dirs_for(list(range(n))))
            tiling = spatial is not None
        if tiling and spatial is None:
            fps = footprints(self.program, band.statements, dirs_for(point))
        inner_outer = {s: list(outer.get(s, [])) + [band.members[k][s] for k in point] for s in band.statements}
        if not tiling and skewed and band.permutable:
            # The skew only served tiling: run these statements in their source order.
            return Nest(band.statements, self._source_loops(band.statements), Leaf(band.statements))
        if not tiling:
            loops = [Loop(dict(band.members[k]), names[k][0], origin=names[k][1],
                          coincident=band.coincident[k]) for k in point]
            return Nest(band.statements, loops, self.decide(band.child, inner_outer))

        # Tile sizes from the cache model, over the point loops in their final order.
        time_like = [i for i, k in enumerate(point) if skewed and not band.coincident[k] and k == 0]
        budget = self.target.l2 // 2
        innermost, min_inner = (None, 4) if skewed else (n - 1, 256)
        step_budget = None
        if skewed and n < 4 and time_like:
            # Time tiles of a 1-D or 2-D stencil: each time step of a tile re-reads what the step
            # before it wrote, from L1 when one step's data fits there (`time_step_cache`).  Rows
            # of at least SKEWED_MIN_ROW elements keep the vector loop long.
            step_budget = time_step_cache(self.target)
            innermost, min_inner = n - 1, SKEWED_MIN_ROW
        if skewed and n >= 4:
            # Time tiles of a 3-D stencil: a tile small enough for L2 cuts the unit-stride loop to
            # 16 elements whose skewed halo costs more than the reuse gains (heat-3d LARGE, AVX2,
            # 512 KiB L2: 4.2 s on one thread against 2.6 s for the source order).  Whole rows,
            # and tiles of a few L2s (in L3): 1.8 s on one thread, 1.3 s on two (8 MB tiles:
            # 1.9 s on two, too few per wave).
            budget = max(budget, min(4 * self.target.l2, self.target.l3 // max(1, self.target.cores) // 2))
            innermost, min_inner = n - 1, SKEWED_3D_MIN_ROW
        if spatial is not None:
            size_of = dict(spatial)
        else:
            sizes = tile_sizes(fps, n, budget, self._elem_bytes(), innermost=innermost,
                               time_like=time_like, min_inner=min_inner, search=self.search,
                               step_budget_bytes=step_budget)
            size_of = {k: sz for k, sz in zip(point, sizes)}
            if not skewed and band.coincident[order[0]]:
                size_of[order[0]] = self._balanced_tile(band, order[0], size_of[order[0]])
        if self.options.tile_sizes:
            size_of = {k: self.options.tile_sizes.get(names[k][0], sz) for k, sz in size_of.items()}

        tiles = [Loop({s: _floor_div(band.members[k][s], size_of[k]) for s in band.statements},
                      f"{names[k][0]}_tile", role="tile", origin=names[k][1], coincident=band.coincident[k])
                 for k in order]
        if self.options.wavefront and not band.coincident[order[0]]:
            width = len(tiles) if skewed and self._few_time_tiles(band, order[0], size_of[order[0]]) else 2
            total = tiles[0].exprs
            for t in tiles[1:width]:
                total = {s: total[s].add(t.exprs[s]) for s in band.statements}
            wave = Loop(dict(total), "wave", role="wave")
            tiles = [wave] + tiles[1:]
            if skewed and width == 2:
                tiles = [self._time_group(band, order[0], size_of[order[0]], names[order[0]][1])] + tiles
        if skewed:
            # Inside a tile, the statements' source order is legal and keeps their inner loops.
            return Nest(band.statements, tiles + self._source_loops(band.statements), Leaf(band.statements))
        points = [Loop(dict(band.members[k]), names[k][0], role="point", origin=names[k][1],
                       coincident=band.coincident[k]) for k in point]
        jam = None if spatial is not None else self._jam_member(band, point, innermost_band, dirs_for(list(range(n))))
        if jam is not None and not self._jam_pays(band, point[-1], size_of[point[-1]], dirs_for(list(range(n)))):
            jam = None
        if jam is not None:
            # Register blocking: strip-mine the reduction member by `JAM` and run the strip inside
            # the vector loop, fully unrolled by isl: each vector of the target is loaded once and
            # updated `JAM` times in registers.  (A tiling of the permutable band, so legal.)
            u = self.options.jam
            pos = point.index(jam)
            strip = Loop({s: _floor_div(band.members[jam][s], u) for s in band.statements},
                         f"{names[jam][0]}_strip", role="strip", origin=names[jam][1])
            lane = Loop(dict(band.members[jam]), names[jam][0], role="register", origin=names[jam][1], unroll=-1)
            rest = [lp for k, lp in zip(point, points) if k != jam]
            points = rest[:pos] + [strip] + rest[pos:] + [lane]
        return Nest(band.statements, tiles + points, self.decide(band.child, inner_outer))

    def _spatial_tiles(self, band: Band, point: List[int], dirs: Dict[str, List]) -> Optional[Dict[int, int]]:
        """Tile sizes for a band whose accesses run along different loops (`T[j, i] = A[i, j]`), or
        None.  The innermost loop runs along the write; a read running along another member
        `across` is strided there, touching a new cache line per iteration.  Tiles of one line's
        elements of the inner loop by eight lines of `across` keep those lines in L1 until every
        element of them is used (every other member: tiles of one).  Measured in C on a 4096 x 1024
        float32 transpose (Zen 4): 27 ms untiled (numpy's copy of `A.T` too), 2.2 ms with 16 x 128
        or 8 x 64 tiles, 2.7 ms with 8 x 32, 3.4 ms with 16 x 16, 7 ms with 64 x 64 (the strided
        rows, 4 KiB apart, conflict in L1's sets).  Only where the data does not fit in L2 (where
        it does, the lines stay in cache anyway)."""
        inner = point[-1]
        if fits_in_cache(self.program, band.statements, self.sizes, self.target.l2):
            return None
        across = None
        for s in band.statements:
            st = self.program.statement(s)
            v_inner = dirs[s][inner]
            if v_inner is None or access_kind(access_delta(st.target, st.iterators, v_inner)) != "unit":
                return None       # the write itself is not contiguous along the inner loop
            for acc, is_write in statement_accesses(self.program, s):
                if is_write or not acc.indices:
                    continue
                if access_kind(access_delta(acc, st.iterators, v_inner)) != "strided":
                    continue
                for k in point[:-1]:
                    v = dirs[s][k]
                    if v is not None and access_kind(access_delta(acc, st.iterators, v)) == "unit":
                        across = k if across is None else across
        if across is None:
            return None
        line = max(1, 64 // self._elem_bytes())
        return {k: (line if k == inner else 8 * line if k == across else 1) for k in range(len(band.members))}

    def _balanced_tile(self, band: Band, member: int, tile: int) -> int:
        """The size of the outer tile loop `member` (the one that runs in parallel) shrunk so that,
        at the call's sizes, its tiles split evenly over the cores: with few tiles a static
        schedule leaves cores idle through the last round (PolyBench trmm LARGE: N = 1200 in
        tiles of 256 is 5 tiles, 3 on one core and 2 on the other).  The tile grows to a multiple
        of the cores (1200 in 6 tiles of 200), never larger than the cache model chose, rounded
        up to a multiple of 8 elements (whole SIMD vectors and cache lines).  Unchanged without
        sizes, on one core, or when the split is already within `BALANCE_SLACK` of even."""
        cores = self.target.cores
        if self.sizes is None or cores < 2:
            return tile
        extent = member_extent(self.model, band.members[member], self.sizes)
        if not extent or extent <= tile:
            return tile
        tiles = -(-extent // tile)
        if _balance(tiles, cores) >= 1 - BALANCE_SLACK:
            return tile
        even = -(-tiles // cores) * cores
        size = -(-extent // even)
        size = max(BALANCE_ROUND, -(-size // BALANCE_ROUND) * BALANCE_ROUND)
        if size >= tile or _balance(-(-extent // size), cores) <= _balance(tiles, cores):
            return tile
        return size

    def _time_group(self, band: Band, time: int, tile: int, origin: Optional[str]) -> Loop:
        """A loop over groups of `TIME_TILES_PER_GROUP_PER_CORE` x cores consecutive time tiles,
        outside the wavefront over (time tile, first spatial tile).  Without it a wave of a long
        time loop holds a tile of every time tile (jacobi-2d T=500 in 32-step tiles: 16), and a tile
        finds what the tile before it in time left a whole wave earlier, after every other tile of
        that wave has passed through the caches.  In groups, a wave holds at most the group's time
        tiles: enough for the cores, close together in time.  Measured, jacobi-2d N=1300 T=500 in
        tiles of 32 x 16 x 128: one thread 457 ms ungrouped, 350 in groups of one time tile
        (tile by tile), 325 in groups of 2 and 4; two threads 210 ungrouped, 181 in groups of 2,
        176 of 4.  (A tiling of the permutable band's time member, so legal.)"""
        per_group = tile * TIME_TILES_PER_GROUP_PER_CORE * max(1, self.target.cores)
        return Loop({s: _floor_div(band.members[time][s], per_group) for s in band.statements},
                    "time_group", role="tile", origin=origin)

    def _few_time_tiles(self, band: Band, time: int, tile: int) -> bool:
        """Whether a wavefront over (time tile, first spatial tile) would leave the cores idle: at
        the call's sizes the time loop spans fewer than two tiles per core.  Such a band waves over
        all its tile loops instead: every tile on a hyperplane is independent, so a wave holds
        tiles of every row and column and time tiles start in parallel (measured: a 9-point
        stencil with T=20 under 32-step tiles, 2 threads, 36 -> 20 ms).  With many time tiles the
        two-loop wave keeps its better locality (heat-3d LARGE on one thread: 1.8 s against 2.2 s
        for the full wave).  Unknown sizes keep the two-loop wave."""
        if self.sizes is None or self.target.cores < 2:
            return False
        extent = member_extent(self.model, band.members[time], self.sizes)
        return extent is not None and -(-extent // tile) < 2 * self.target.cores

    def _jam_member(self, band: Band, point: List[int], innermost_band: bool, dirs) -> Optional[int]:
        """The reduction member to unroll-and-jam into the vector loop, if any: the band is
        innermost, its innermost member is a SIMD candidate, and some member is a reduction of
        every statement's target (the target does not move along it) and is not innermost."""
        if not self.options.jam or not innermost_band or len(point) < 3:
            return None
        inner = point[-1]
        if not band.coincident[inner]:
            return None
        for k in point[:-1]:
            if band.coincident[k]:
                continue
            ok = True
            for s in band.statements:
                v = dirs[s][k]
                st = self.program.statement(s)
                if v is None or not st.update:
                    ok = False
                    break
                if any(access_delta(st.target, st.iterators, v)):
                    ok = False
                    break
            if ok:
                return k
        return None

    def _jam_pays(self, band: Band, inner: int, tile: int, dirs) -> bool:
        """Whether register blocking into the innermost member `inner` (tiles of `tile`) pays at the
        call's sizes: always when every access is unit-stride or invariant along it (SIMD lanes,
        the point of the jam) or when the sizes are unknown; across strided accesses only when a
        pass of the loop touches more cache lines than L1 holds (`auto_size.jam_pays_across_strides`)."""
        strided = 0
        for s in band.statements:
            v = dirs[s][inner]
            if v is None:
                return True
            st = self.program.statement(s)
            strided += sum(1 for acc, _ in statement_accesses(self.program, s)
                           if acc.indices and access_kind(access_delta(acc, st.iterators, v)) == "strided")
        if not strided or not self.sizes:
            return True
        extent = member_extent(self.model, band.members[inner], self.sizes)
        along = tile if extent is None else min(tile, extent)
        return jam_pays_across_strides(strided, along, self.target.l1)

    def _point_order(self, band: Band, order: List[int], dirs: Dict[str, List], tiled: bool) -> List[int]:
        """`order` with the member that is best innermost moved last.

        Preference: a member that can run as SIMD lanes; then, inside tiles (where strided accesses
        stay in cache), a member that is not a reduction chain (a reduction innermost serialises
        on the latency of one add per iteration: floating-point sums are not reassociated); then
        unit strides; then the member isl had last."""
        n = len(band.members)
        scores = []
        for k in range(n):
            score, simd, chain = 0.0, band.coincident[k], False
            for s in band.statements:
                v = dirs[s][k]
                if v is not None:
                    score += innermost_score(self.program, s, v)
                    simd = simd and all_unit_or_invariant(self.program, s, v)
                    st = self.program.statement(s)
                    if st.update and not any(access_delta(st.target, st.iterators, v)):
                        chain = True
            scores.append((simd, tiled and not chain, score, k == order[-1], k))
        best = max(range(n), key=lambda k: scores[k])
        return [k for k in order if k != best] + [best]
