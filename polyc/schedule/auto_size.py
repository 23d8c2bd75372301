"""What the sizes of a call say about the schedule that pays: the automatic scheduler's size class.

`schedule="auto"` first decides for symbolic sizes (one schedule for every size).  When a call's
sizes are known (the C runtime specialises a compiled kernel per size class, see
`polyc.runtime.ckernel`), two decisions that only pay past some size are taken for that class:

- parallel loops: a `#pragma omp parallel for` costs a fork and a join each time it is entered,
  some microseconds on an idle machine and up to a scheduler time slice on a loaded one (and
  libgomp's entry costs even with one thread or a false `if()`).  A loop is marked parallel only
  when one entry of it does at least `PARALLEL_REGION_WORK` operations;
- time tiling: skewed tiles (stencils, Gauss-Seidel sweeps) exist to keep a working set that does
  not fit in cache from streaming through memory at every time step; when everything the band
  touches fits in half the last-level cache (`time_tiling_cache`) they only add loop overhead and
  serialise the waves, so the band runs in the statements' source order;
- register blocking across a loop that cannot run as SIMD lanes (some access moves with a
  stride along it, as `A[j, k]` along `j`): jamming the reduction loop into it saves only cache
  lines of those strided accesses (each line is used `JAM` times in a row instead of once per pass
  of the loop).  That pays only when one pass touches more lines than the L1 cache holds
  (`jam_pays_across_strides`); below, the jammed body's guards (the reduction's extent is not
  known to be a multiple of the factor) cost more than it saves (PolyBench syr2k SMALL: 0.7x of
  the source order jammed, 1.0x not);
- packing a contraction (`Schedule.pack`: operands copied into contiguous panels for a blocked
  micro-kernel) exists to stream operands that do not stay in L1 without TLB and conflict misses;
  when every array the statement touches fits in L1 the copies are pure overhead (matmul 7x13x5:
  0.88x of the source order packed, 0.99x not), so the statement keeps its tiled loops
  (`pack_pays`) -- unless it reduces over several loops (convolution windows), which only
  packing turns into one long unit-stride reduction (conv2d 5x13x7 with a 5x3 window: 2.7x
  packed, 1.7x not).

Estimates are deliberately coarse (bounding boxes of the iteration domains at the given sizes,
operations counted as expression nodes) and computed by isl; they only choose between proven
schedules, so an estimate can cost speed but never correctness.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Optional

import islpy as isl

from .rewrite import trip_count_bound

#: Operations one entry of a parallel loop must do before a second thread pays for its fork/join
#: (about 50-100 microseconds of work on one core).
PARALLEL_REGION_WORK = 1 << 18

#: Bytes of a data-cache line: 64 on every CPU the C target serves (x86-64, the usual AArch64
#: cores); only used to count the lines strided accesses touch (`jam_pays_across_strides`).
CACHE_LINE_BYTES = 64


def fix_sizes(s, sizes: Mapping[str, int]):
    """`s` (an isl set or map) with every parameter named in `sizes` fixed to its value."""
    for name, value in sizes.items():
        pos = s.find_dim_by_name(isl.dim_type.param, name)
        if pos >= 0:
            s = s.fix_val(isl.dim_type.param, pos, isl.Val.int_from_si(s.get_ctx(), int(value)))
    return s


def _constant(pa: isl.PwAff) -> Optional[int]:
    """The value of a piecewise constant (its largest piece); None when it has no piece."""
    values = []
    for _, aff in pa.get_pieces():
        if aff.is_cst():
            values.append(int(aff.get_constant_val().to_python()))
    return max(values) if values else None


def extents(s: isl.Set) -> List[Optional[int]]:
    """The bounding-box extent of each set dimension of `s` (parameters fixed); 0 when empty,
    None where it is unbounded (a parameter the sizes do not fix)."""
    if s.is_empty():
        return [0] * s.dim(isl.dim_type.set)
    out: List[Optional[int]] = []
    for k in range(s.dim(isl.dim_type.set)):
        lo, hi = _constant(s.dim_min(k)), _constant(s.dim_max(k))
        out.append(None if lo is None or hi is None else max(0, hi - lo + 1))
    return out


def loop_extents(model, statement: str, sizes: Mapping[str, int]) -> Dict[str, Optional[int]]:
    """Each iterator of `statement` -> its bounding-box extent at `sizes` (None: unbounded)."""
    its = model.program.statement(statement).iterators
    return dict(zip(its, extents(fix_sizes(model.domains[statement].intersect_params(model.context), sizes))))


def loops_size(extents_of: Mapping[str, Optional[int]], loops: Iterable[str]) -> Optional[int]:
    """The number of values of `loops` together: the product of their extents (`loop_extents`);
    None when one is unbounded."""
    total = 1
    for loop in loops:
        e = extents_of[loop]
        if e is None:
            return None
        total *= e
    return total


def statement_ops(statement) -> int:
    """Operations of one instance of `statement`: its expression's nodes, plus the store."""
    return 1 + sum(1 for _ in statement.value.walk())


def instances(model, statement: str, sizes: Mapping[str, int]) -> Optional[int]:
    """An upper bound on the instances of `statement` at `sizes` (bounding box of its domain);
    None when the sizes leave it unbounded."""
    total = 1
    for e in extents(fix_sizes(model.domains[statement].intersect_params(model.context), sizes)):
        if e is None:
            return None
        total *= e
    return total


def region_work(schedule, statements: Iterable[str], position: int, loops_of: Mapping[str, List[int]],
                sizes: Mapping[str, int]) -> float:
    """Operations of one entry of the loop at schedule `position`, the largest over the separate
    loops the dimension stands for (statements apart in a scalar dimension before `position` run
    in loops of their own): the statements' operations at `sizes`, divided by how many times
    the loops outside `position` enter it (bounding box of the scheduled instances)."""
    fixed = schedule.fixed_positions
    groups: Dict[tuple, List[str]] = {}
    for name in statements:
        groups.setdefault(tuple(fixed[name][:position]), []).append(name)
    return max((_group_work(schedule, names, position, loops_of, sizes) for names in groups.values()), default=0.0)


def _group_work(schedule, statements: Iterable[str], position: int, loops_of: Mapping[str, List[int]],
                sizes: Mapping[str, int]) -> float:
    model = schedule.model
    work = 0.0
    for name in statements:
        count = instances(model, name, sizes)
        if count is None:
            return float("inf")  # unknown: as large as without sizes
        total = count * statement_ops(model.program.statement(name))
        if not total:
            continue
        scheduled = fix_sizes(schedule.statement_map(name).intersect_domain(model.domains[name])
                              .intersect_params(model.context), sizes).range()
        box = extents(scheduled)
        entries = 1
        for q in loops_of.get(name, []):
            if q < position:
                entries *= max(1, box[q] or 1)
        work += total / entries
    return work


def worth_parallel(schedule, statements: Iterable[str], position: int, loops_of: Mapping[str, List[int]],
                   sizes: Optional[Mapping[str, int]]) -> bool:
    """Whether a parallel loop at `position` pays at `sizes` (always, when sizes are unknown): it
    must do enough work per entry, and have more than one iteration (a batch loop at batch size
    1, or its tile loop, would hold the parallel mark that an inner loop can use)."""
    if not sizes:
        return True
    statements = list(statements)
    if loop_extent(schedule, statements, position, sizes) == 1:
        return False
    return region_work(schedule, statements, position, loops_of, sizes) >= PARALLEL_REGION_WORK


#: Fewest iterations a loop needs for a vector mark to pay (a float64 AVX2 vector's lanes).
MIN_VECTOR_TRIP = 4


def worth_vector(schedule, position: int) -> bool:
    """Whether a vector mark at `position` pays: a loop that never runs `MIN_VECTOR_TRIP`
    iterations (a pooling window's `s in 0:2`) fills no vector, and as a vector reduction it
    would set up and combine an accumulator per element (avgpool2d: 2.6 -> 8 ms).  Known from the
    loop's bounds for every size (`rewrite.trip_count_bound`), not from a call's sizes."""
    bound = trip_count_bound(schedule, position)
    return bound is None or bound >= MIN_VECTOR_TRIP


def loop_extent(schedule, statements: Iterable[str], position: int, sizes: Mapping[str, int]) -> Optional[int]:
    """The bounding-box extent of schedule dimension `position` over the instances of `statements`
    at `sizes` (None when unknown or unbounded)."""
    model = schedule.model
    largest = 0
    for name in statements:
        try:
            when = schedule.statement_map(name).intersect_domain(model.domains[name].intersect_params(model.context))
            values = fix_sizes(when.range(), sizes)
            extent = extents(values)[position]
        except (isl.Error, IndexError):
            return None
        if extent is None:
            return None
        largest = max(largest, extent)
    return largest


#: Bytes per element assumed for a tensor whose dtype comes only with a call's arrays (the widest
#: float): a working set is never under-counted into "fits in cache".
UNKNOWN_ELEMENT_BYTES = 8


def working_set_bytes(program, statements: Iterable[str], sizes: Mapping[str, int]) -> int:
    """Bytes of every tensor the statements read or write, at `sizes` (whole tensors; a tensor
    without a declared dtype counts `UNKNOWN_ELEMENT_BYTES` per element)."""
    names = set()
    for name in statements:
        st = program.statement(name)
        names.add(st.target.tensor)
        for acc in st.value.accesses():
            names.add(acc.tensor)
    total = 0
    for t in program.tensors:
        if t.name not in names:
            continue
        elems = 1
        for e in t.shape:
            elems *= max(0, int(e.evaluate(dict(sizes))))
        total += elems * (UNKNOWN_ELEMENT_BYTES if t.dtype is None else t.dtype.bits // 8)
    return total


def time_tiling_cache(target) -> int:
    """Bytes of data below which a time-stepped band runs untiled: half the last-level cache (at
    least L2).  A sweep over data held in L3 streams at L3 bandwidth, and skewed tiles only add
    loop overhead and serialise waves; past it every time step streams memory.  Measured on a
    2-core AVX2 EPYC (512 KiB L2, 32 MiB L3), one thread, 100 steps: jacobi-2d at 10 MB 56 ms
    source order against 68 ms time-tiled, at 16 MB 200 ms against 137 ms; fdtd-2d at 8.6 MB
    51 against 66 ms, at 19 MB 289 against 151 ms."""
    return max(target.l2, (target.l3 or 0) // 2)


def time_step_cache(target) -> int:
    """Bytes one time step of a 1-D or 2-D stencil's time tile may touch: the L1 data cache, so
    that the next step of the tile reads it from there.  Measured on a 2-core AVX-512 EPYC (48 KiB
    L1, 1 MiB L2), one thread, float64: jacobi-2d N=1300 T=50 in tiles of 32 steps x 64 x 128
    (64 KiB a step) 38.5 ms, in tiles of 32 x 16 x 128 (32 KiB) 30.9 ms; a 9-point stencil N=1500
    T=20 23.1 against 18.9-20.3 ms (16 x 256 columns, 64 KiB: 23.0 ms; 8 x 256 and 16 x 128 trade
    places from run to run)."""
    return target.l1


def fits_in_cache(program, statements: Iterable[str], sizes: Optional[Mapping[str, int]], cache_bytes: int) -> bool:
    """Whether everything `statements` touch fits in `cache_bytes` at `sizes` (False when unknown)."""
    if not sizes:
        return False
    try:
        return working_set_bytes(program, statements, sizes) <= cache_bytes
    except (KeyError, TypeError, ValueError):
        return False  # a shape over a name the sizes do not bind: assume it is large


def member_extent(model, member: Mapping[str, isl.PwAff], sizes: Mapping[str, int]) -> Optional[int]:
    """The bounding-box extent of one schedule member (statement name -> its affine expression
    over that statement's iterators) over the statements' instances at `sizes`; None when the
    sizes leave it unbounded."""
    largest = 0
    for name, pa in member.items():
        try:
            domain = model.domains[name].intersect_params(model.context)
            values = fix_sizes(isl.Map.from_pw_aff(pa).intersect_domain(domain).range(), sizes)
            extent = extents(values)[0]
        except (isl.Error, IndexError, KeyError):
            return None
        if extent is None:
            return None
        largest = max(largest, extent)
    return largest


def jam_pays_across_strides(strided_accesses: int, extent: Optional[int], l1_bytes: int) -> bool:
    """Whether unrolling-and-jamming a reduction loop into a loop of `extent` iterations (per tile,
    at the call's sizes; None: unknown, as large as it gets) along which `strided_accesses`
    accesses each touch a new cache line per iteration pays: one pass of the loop must touch at
    least the L1 cache's worth of lines, else the next pass finds them in L1 anyway."""
    if strided_accesses == 0 or extent is None:
        return True
    return extent * strided_accesses * CACHE_LINE_BYTES >= l1_bytes


def pack_pays(program, contraction, sizes: Optional[Mapping[str, int]], target) -> bool:
    """Whether packing `contraction` (a `packing.Contraction`) pays at `sizes` (always when they
    are unknown): the arrays its statement touches must not all fit in `target`'s L1 cache, unless
    it reduces over several loops (a convolution's channel and window loops), which packing turns
    into one long contiguous reduction at any size."""
    if len(contraction.k) > 1:
        return True
    return not fits_in_cache(program, [contraction.statement], sizes, target.l1)


#: The shortest run of lanes (the last lane loop's extent) taken as read in place by the direct
#: convolution (`c_packed_inplace`, which packs rows shorter than a lane panel after all).
DIRECT_ROW = 16

#: The shortest reduction for which a direct convolution is turned round (`pack_lanes`).
DIRECT_TURN_DEPTH = 256


def pack_lanes(model, contraction, sizes: Optional[Mapping[str, int]], target) -> Dict[str, object]:
    """The arguments `"auto"` adds to `pack` for `contraction` (the default form): `lanes`, a
    tensor of its m-side factor, when the lanes should run along that factor's loops instead, with
    `kc` the whole reduction when its lane panels fit in half of L2 (and its offset table the
    stack: `MAX_K_OFFSETS`); else none.  Only products whose loop groups are not one loop each
    (convolutions), with few rows (at most the in-place limit), at known sizes.

    - A convolution's weight gradient (rows f, lanes (c, kh, kw), k (n, h, w)), with more lanes
      than the in-place limit (`MAX_LANES`; with fewer its rows are read in place), packs its lane side
      element by element, decoded: that copy of every element of the big factor, used by few rows,
      cost more than the product.  Turned round, the big factor becomes the rows, read in place
      (`c_packed_arows`), and only the small one is packed: K_grad of a 32x32x3x3 convolution over
      56x56, 0.69 -> 0.29 ms (1 thread; PyTorch 0.31); its target is then not laid out along the
      lanes, so each tile goes through a buffer once per k block, and one block of the whole k
      (2916) instead of blocks of 256 gave 0.30 -> 0.25 ms (1 thread), 0.18 -> 0.14 ms (2).
    - A forward convolution (rows f, lanes (n, h, w), k (c, kh, kw)) reads its lanes in place
      (the direct convolution, rows of at least `DIRECT_ROW` lanes) or packs them.  Turned round
      (lanes: the output channels; rows: the output pixels, their input windows read in place;
      k in one block) it gains where the channels fill two vectors of lanes and the reduction
      is long (at least `DIRECT_TURN_DEPTH`), measured on one / two threads: 64x64x3x3 over 56x56
      1.20 -> 1.00 ms / 0.61 -> 0.52 ms, 128x128 over 28x28 1.47x / 1.43x, 256x256 over 14x14
      1.41x / 1.75x, 32x32 over 56x56 1.17x / 1.14x; and loses where they do not (16 channels
      0.23x, 3 input channels 0.29x).
    """
    from ..ir import Access
    from .packing_paths import MAX_K_OFFSETS, MAX_LANES, reads_in_place, turning_tensor
    c = contraction
    tensor = turning_tensor(c)
    # the turned form reads its rows in place: the row factor must be that tensor's access
    if not sizes or tensor is None or not isinstance(c.m_factor, Access) or c.m_factor.tensor != tensor:
        return {}
    program = model.program
    st = program.statement(c.statement)
    try:
        box = loop_extents(model, c.statement, sizes)
    except (isl.Error, KeyError, ValueError):
        return {}
    rows, lanes, row, depth = (loops_size(box, c.m), loops_size(box, c.n), loops_size(box, c.n[-1:]),
                               loops_size(box, c.k))
    if rows is None or lanes is None or row is None or rows > MAX_LANES:
        return {}
    # a k position of a lane panel: two vectors of lanes (the default register tile's width)
    whole_k = (depth is not None and 0 < depth <= MAX_K_OFFSETS
               and depth * 2 * target.vector_bytes <= target.l2 // 2)
    dtype = program.tensor(st.target.tensor).dtype
    vector_lanes = target.vector_bytes // (dtype.bits // 8 if dtype is not None else 4)
    long_rows = whole_k and rows >= 2 * vector_lanes and depth >= DIRECT_TURN_DEPTH
    direct = reads_in_place(st, c) and row >= DIRECT_ROW
    if not long_rows and (direct or lanes <= MAX_LANES):
        return {}
    out: Dict[str, object] = {"lanes": tensor}
    if whole_k:
        out["kc"] = depth
    return out


def size_key(sizes: Mapping[str, int]) -> Dict[str, int]:
    """The size class of `sizes` for scheduling: each size by its power of two (bit length), so
    one schedule serves sizes within a factor of two of each other."""
    return {k: int(v).bit_length() for k, v in sorted(sizes.items())}
