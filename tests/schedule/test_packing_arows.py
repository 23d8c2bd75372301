"""Packed products with few lanes read the m-side factor's rows in place
(`polyc.codegen.c_packed_arows`): whole m panels go straight from the factor to the micro-kernel,
only a partial last panel is packed.  Exact bit for bit against the source order on both sides of
the switch (`MAX_LANES`), across partial panels, k blocks, m blocks, threads, dtypes, batches and
accumulations; factors whose rows are not consecutive along k keep the packed path."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.schedule.packing_paths import MAX_LANES

EXACT = ["-O3", "-march=native", "-ffp-contract=off"]
SMALL = dict(mr=3, nv=1, kc=5, mc=6)     # m panels of 3 rows, m blocks of 6, k blocks of 5


def _check(kernel, sched, **arrays):
    def fresh():
        return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in arrays.items()}
    got = pc.compile(kernel, sched, flags=EXACT)(**fresh())
    np.testing.assert_array_equal(got, pc.compile(kernel, flags=EXACT)(**fresh()))
    return got


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_read_in_place_equal_the_source_order_on_both_sides_of_the_switch(threads, dtype):
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_arows")
    sched = mm.schedule().pack("S1", **SMALL).parallel("i_block")
    assert "_ukr_ain(" in pc.codegen(mm, sched, dtypes={"A": pc.f64, "B": pc.f64})
    rng = np.random.default_rng(7)
    # rows: one partial panel, whole panels only, one m block (the few-rows path), several blocks
    # with a partial last panel; lanes: one, a partial vector, the switch and one past it; k: none,
    # within a block, several blocks with a partial last
    for m, n, k in ((2, 1, 3), (3, 7, 5), (6, MAX_LANES, 11), (13, MAX_LANES + 1, 12), (20, 33, 0),
                    (17, 40, 17)):
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        got = _check(mm, sched, A=a, B=b, C=np.full((m, n), np.nan, dtype))
        np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_rows_read_in_place_in_a_batch_an_accumulation_and_auto(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    rng = np.random.default_rng(8)
    bmm = pc.kernel("C[b, i, j] +=! A[b, i, k] * B[b, k, j]", name="bmm_arows")
    sched = bmm.schedule().pack("S1", **SMALL)
    a, b = rng.standard_normal((3, 14, 9)), rng.standard_normal((3, 9, 10))
    np.testing.assert_allclose(_check(bmm, sched, A=a, B=b), a @ b, rtol=1e-12)
    acc = pc.kernel("C[i, j] += A[i, k] * B[k, j]", name="acc_arows", C=pc.f64["M", "N"])
    a, b, c = rng.standard_normal((11, 8)), rng.standard_normal((8, 6)), rng.standard_normal((11, 6))
    np.testing.assert_allclose(_check(acc, acc.schedule().pack("S0", **SMALL), A=a, B=b, C=c), c + a @ b,
                               rtol=1e-12)
    # "auto" on attention's P V shape: many rows against 64 lanes.
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="pv_arows")
    a, b = rng.standard_normal((300, 200)).astype(np.float32), rng.standard_normal((200, 64)).astype(np.float32)
    f = pc.compile(mm, "auto", flags=EXACT)
    assert "_ukr_ain(" in f.source
    np.testing.assert_array_equal(f(A=a, B=b), pc.compile(mm, flags=EXACT)(A=a, B=b))


def test_a_factor_read_across_its_rows_keeps_the_packed_panels():
    mm = pc.kernel("C[i, j] +=! A[k, i] * B[k, j]", name="mm_at")
    sched = mm.schedule().pack("S1", **SMALL)
    assert "_ukr_ain(" not in pc.codegen(mm, sched, dtypes={"A": pc.f64, "B": pc.f64})
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((7, 10)), rng.standard_normal((7, 5))
    np.testing.assert_allclose(_check(mm, sched, A=a, B=b), a.T @ b, rtol=1e-12)
