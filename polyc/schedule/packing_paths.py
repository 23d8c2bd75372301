"""Which in-place paths the packed code of a contraction takes (`Schedule.pack`): facts about its
accesses, asked by the C generator (`polyc.codegen.c_packed*`) when it emits the paths and by the
automatic scheduler when it chooses the orientation of a product (`auto_size.pack_lanes`)."""
from __future__ import annotations

from typing import Optional

from ..ir import Access

#: Most lanes (n-side elements) for which the m-side rows are read in place.  Measured against
#: OpenBLAS on 1024 rows x 1024 k (f32, AVX2, 1 thread; packed -> in place, two runs each): 64 lanes
#: 0.85-0.87 -> 1.13-1.17x, 128 lanes 0.94-0.99 -> 1.04-1.11x, 256 lanes 0.82-0.97 -> 0.93-0.99x,
#: 512 lanes 0.81-0.95 -> 0.77-0.87x (there the packed panel's reuse pays for its copy).
MAX_LANES = 256

#: Longest k block read through offsets: its table of k offsets lives on each thread's stack
#: (8 bytes a position, 64 KB at most); a longer block (`pack(kc=...)`) packs the factor instead.
MAX_K_OFFSETS = 8192


def consecutive_along(access, loop: str) -> bool:
    """Whether `access`'s elements are consecutive in memory along `loop` (row-major): its last
    subscript moves by exactly 1 with the loop and no other subscript uses it."""
    if not access.indices:
        return False
    *outer, last = access.indices
    return last.coeff(loop) == 1 and all(ix.coeff(loop) == 0 for ix in outer)


def target_rows(st, c) -> bool:
    """Whether micro-tile rows can live in the target itself: one m loop, the target's elements
    consecutive along the last n loop, and its last subscript not moving with m (so rows lie `ldc`
    apart without overlapping)."""
    return (len(c.m) == 1 and consecutive_along(st.target, c.n[-1])
            and st.target.indices[-1].coeff(c.m[0]) == 0)


def reads_in_place(st, c) -> bool:
    """Whether the packed contraction `c` of statement `st` runs with its n-side factor read in
    place (the direct convolution, `polyc.codegen.c_packed_inplace`): a single m loop; the factor one array access whose last subscript
    moves by exactly 1 along the last n loop, which no other subscript uses; some subscript of
    it using both an n loop and a k loop (the sliding window); the target laid out the same way
    along the last n loop, not moving with m in its last subscript."""
    f = c.n_factor
    if c.more or not target_rows(st, c) or not isinstance(f, Access) or not consecutive_along(f, c.n[-1]):
        return False
    return any(any(ix.coeff(x) for x in c.n) and any(ix.coeff(x) for x in c.k) for ix in f.indices)


def reads_rows_in_place(contraction) -> bool:
    """Whether the m-side factor's whole panels can be read from its own rows, `a[r * lda + k]`
    (`polyc.codegen.c_packed_arows`): one m and one k loop, elements consecutive along k, rows a
    fixed distance apart along m."""
    c = contraction
    f = c.m_factor
    return (not c.more and len(c.m) == 1 and len(c.k) == 1 and isinstance(f, Access) and consecutive_along(f, c.k[0])
            and f.indices[-1].coeff(c.m[0]) == 0)


def reads_at_offsets(contraction, kc: int) -> bool:
    """Whether the m-side factor is an array read that `reads_rows_in_place` does not cover (read
    through row pointers and k offsets instead, `polyc.codegen.c_packed_arows`), in k blocks of at
    most `kc` positions (no more than `MAX_K_OFFSETS`)."""
    return (not contraction.more and isinstance(contraction.m_factor, Access) and not reads_rows_in_place(contraction)
            and kc <= MAX_K_OFFSETS)


def turning_tensor(contraction) -> Optional[str]:
    """The `lanes` argument that runs `contraction` the other way round: a tensor of its row
    factor that its lane factor does not read.  None for a plain product (one loop per group: the
    other way round only strides its target) and where no tensor tells the factors apart."""
    c = contraction
    if c.more or (len(c.n) == 1 and len(c.k) == 1):
        return None
    lane_tensors = {a.tensor for a in c.n_factor.accesses()}
    return next((a.tensor for a in c.m_factor.accesses() if a.tensor not in lane_tensors), None)
