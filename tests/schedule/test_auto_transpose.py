"""`schedule="auto"` tiles a band whose read and write run along different loops (a transpose), so
the strided read's cache lines stay in L1 while the other loop runs across them
(`Decider._spatial_tiles`): no reuse in time, only within cache lines."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import all_kernels
from polyc.schedule.auto import auto_schedule
from polyc.schedule.schedule import Schedule

TRANSPOSE = pc.kernel("B[j, i] = A[i, j]", name="transpose_any")
TRANSPOSE_F32 = pc.kernel("B[j, i] = A[i, j]", name="transpose_f32", A=pc.f32["I", "J"], B=pc.f32["J", "I"])


def _tiles(sched: Schedule) -> str:
    return "\n".join(line for line in str(sched).splitlines() if "_tile" in line)


@pytest.mark.parametrize("kernel, line", [(TRANSPOSE, 8), (TRANSPOSE_F32, 16)], ids=["f64", "f32"])
def test_a_large_transpose_gets_line_by_eight_lines_tiles(kernel, line):
    """The inner loop runs along the write (`i`, contiguous in B) in tiles of one cache line; the
    loop the read runs along (`j`, contiguous in A) in tiles of eight lines."""
    sched = auto_schedule(kernel, sizes=dict(I=4096, J=1024))
    tiles = _tiles(sched)
    assert f"floor((i)/{line})" in tiles and f"floor((j)/{8 * line})" in tiles, str(sched)
    assert "[parallel]" in tiles                      # the tiles are independent


def test_a_transpose_that_fits_in_cache_is_left_untiled():
    assert "_tile" not in str(auto_schedule(TRANSPOSE, sizes=dict(I=32, J=24)))


@pytest.mark.parametrize("shape", [(1031, 517), (517, 1031), (2048, 640)])
def test_tiled_transposes_move_every_element(shape):
    a = np.random.default_rng(0).standard_normal(shape)
    f = pc.compile(TRANSPOSE, "auto")
    np.testing.assert_array_equal(f(A=a), a.T)
    assert "_tile" in str(f.schedule_for(dict(I=shape[0], J=shape[1]))[1])
    b = a.astype(np.float32)
    np.testing.assert_array_equal(pc.compile(TRANSPOSE_F32, "auto")(A=b), b.T)


def test_accesses_along_the_same_loop_are_left_untiled():
    """Where every access runs along the inner loop (an elementwise map, even a large one) there
    is nothing for tiles to keep: the rule does not fire."""
    scale = pc.kernel("B[i, j] = A[i, j] * 2.0 + C[i, j]", name="scale_t")
    assert "_tile" not in str(auto_schedule(scale, sizes=dict(I=4096, J=4096)))


def test_correlation_symmetric_copy_is_tiled_and_agrees():
    """PolyBench correlation's `corr[j, i] = corr[i, j]` over a triangle: tiled at LARGE, and
    the schedule gives the source order's result."""
    lk = {k.name: k for k in all_kernels(suite="polybench")}["correlation"]
    sched = auto_schedule(lk.kernel, sizes=lk.sizes["LARGE"])
    copy = [ln for ln in str(sched).splitlines() if "_tile" in ln and "floor((j)/64)" in ln]
    assert copy, str(sched)
    inputs = lk.make_inputs(lk.sizes["SMALL"], lk.dtypes[0], np.random.default_rng(0))
    got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    out_got = pc.compile(lk.kernel, sched)(**got)
    out_want = pc.compile(lk.kernel)(**want)
    for name in want:
        if isinstance(want[name], np.ndarray):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12)
    if isinstance(out_want, dict):
        for name in out_want:
            np.testing.assert_allclose(out_got[name], out_want[name], rtol=1e-10, atol=1e-12)
