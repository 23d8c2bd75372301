"""Packed contractions with few rows (`polyc.codegen.c_packed_rows`): when the rows fit one m
block, lane panels are packed group by group just before their use, by each thread into its own
buffer.  Exact bit for bit against the source order on both sides of the switch, across groups,
panels, k blocks, threads, factor layouts, triangles, batches and the folded zeroing."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.codegen.c_packed_rows import ROW_GROUP_PANELS

EXACT = ["-O3", "-march=native", "-ffp-contract=off"]
SMALL = dict(mr=3, nv=1, kc=5, mc=6)     # lanes: one vector; m blocks of 6 rows
FEW_ROWS = "few rows (c_packed_rows)"


def _lanes(dtype) -> int:
    from polyc.schedule.packing import packing_plans
    plan = packing_plans(pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="probe").schedule().pack("S1", **SMALL))["S1"]
    return plan.vector_bytes // np.dtype(dtype).itemsize


def _check(kernel, sched, **arrays):
    got = pc.compile(kernel, sched, flags=EXACT)(**{k: (v.copy() if isinstance(v, np.ndarray) else v)
                                                   for k, v in arrays.items()})
    want = pc.compile(kernel, flags=EXACT)(**{k: (v.copy() if isinstance(v, np.ndarray) else v)
                                              for k, v in arrays.items()})
    np.testing.assert_array_equal(got, want)
    return got


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("text", ["C[i, j] +=! A[i, k] * B[k, j]", "C[i, j] +=! A[i, k] * B[j, k]"])
def test_few_rows_equal_the_source_order_across_every_edge(threads, dtype, text):
    mm = pc.kernel(text, name="mm_rows")
    sched = mm.schedule().pack("S1", **SMALL).parallel("i_block")
    assert FEW_ROWS in pc.codegen(mm, sched, dtypes={"A": pc.f64, "B": pc.f64})
    group = ROW_GROUP_PANELS * _lanes(dtype)
    rng = np.random.default_rng(5)
    transposed = "B[j, k]" in text
    # rows: fewer than a micro-tile, one, a partial second, exactly one m block (6), one more (the
    # classic path); lanes: within one group, exactly one, one more, several with a partial last;
    # k: within a block, several blocks with a partial last, none
    for m, n, k in ((1, 3, 2), (3, group, 5), (5, group + 1, 11), (6, 3 * group + 7, 17), (7, 2 * group, 9),
                    (4, 5, 0)):
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((n, k) if transposed else (k, n)).astype(dtype)
        got = _check(mm, sched, A=a, B=b, C=np.full((m, n), np.nan, dtype))
        np.testing.assert_allclose(got, a @ (b.T if transposed else b), rtol=1e-5, atol=1e-5)


def test_few_rows_of_a_triangle_a_batch_and_an_accumulation(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    rng = np.random.default_rng(6)
    syrk = pc.kernel("C[i, j] += alpha * A[i, k] * A[j, k] where j in 0:i+1", name="syrk_rows",
                     A=pc.f64["N", "M"], C=pc.f64["N", "N"])
    for n, m in ((4, 13), (6, 7)):
        a, c = rng.random((n, m)), rng.random((n, n))
        got = _check(syrk, syrk.schedule().pack("S0", **SMALL), A=a, C=c, alpha=1.5)
        np.testing.assert_array_equal(np.triu(got, 1), np.triu(c, 1))
    bm = pc.kernel("C[b, i, j] +=! A[b, i, k] * B[b, k, j]", name="bm_rows")
    _check(bm, bm.schedule().pack("S1", **SMALL), A=rng.random((3, 5, 12)), B=rng.random((3, 12, 70)))
    acc = pc.kernel("C[i, j] += A[i, k] * B[k, j]", name="acc_rows")
    _check(acc, acc.schedule().pack("S0", **SMALL), A=rng.random((6, 23)), B=rng.random((23, 41)),
           C=rng.random((6, 41)))


def test_auto_runs_a_wide_product_with_few_rows_exactly(monkeypatch):
    """The attention head's `Q Kᵀ` against a long sequence: 64 rows, the library's blocks."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_wide")
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((64, 300)).astype(np.float32), rng.standard_normal((300, 1000)).astype(np.float32)
    got = pc.compile(mm, "auto")(A=a, B=b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-3)
    assert FEW_ROWS in pc.codegen(mm, "auto")
