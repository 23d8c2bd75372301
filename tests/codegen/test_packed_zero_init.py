"""A packed contraction folds the zeroing of its target (`polyc.codegen.c_packed_init`): the first
k block stores its tiles without loading them and the zeroing nest is not emitted; the helper zeroes
the target itself wherever it does not run the blocks.  Exact bit for bit, and only where nothing
else sees the zeros."""
from __future__ import annotations

import numpy as np

import kernels
import polyc as pc
from polyc.codegen.c_packed_init import zero_init
from polyc.schedule.packing import packing_plans

EXACT = ["-O3", "-march=native", "-ffp-contract=off"]
MATMUL = kernels.by_name("matmul").kernel
FOLDED = "zeroing folded into the packed contraction"


def _folds(sched) -> bool:
    plans = packing_plans(sched)
    return any(zero_init(sched, plan) is not None for plan in plans.values())


def test_matmul_writes_its_target_once_and_exactly(threads):
    sched = MATMUL.schedule().pack("S1")
    assert _folds(sched)
    src = pc.codegen(MATMUL, sched, dtypes={"A": pc.f64, "B": pc.f64})
    assert FOLDED in src and "pc_pc == 0, " in src
    packed = pc.compile(MATMUL, sched, flags=EXACT)
    plain = pc.compile(MATMUL, flags=EXACT)
    rng = np.random.default_rng(0)
    # Odd edges, k longer than one block, and no k at all (the helper zeroes the target itself).
    for i, k, j in ((7, 5, 3), (61, 300, 37), (130, 64, 129), (5, 0, 9), (0, 4, 3)):
        a, b = rng.standard_normal((i, k)), rng.standard_normal((k, j))
        garbage = np.full((i, j), np.nan)
        got = packed(A=a, B=b, C=garbage)
        np.testing.assert_array_equal(got, plain(A=a, B=b))
        np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)


def test_a_direct_convolution_folds_its_zeroing_too():
    conv = kernels.by_name("conv2d")
    sched = conv.kernel.schedule().pack("S1")
    assert FOLDED in pc.codegen(conv.kernel, sched, dtypes={"X": pc.f32, "K": pc.f32})
    rng = np.random.default_rng(1)
    for sizes in (dict(N=1, C=5, H=9, W=40, F=7, KH=3, KW=3), dict(N=2, C=1, H=3, W=3, F=2, KH=3, KW=3)):
        inputs = conv.make_inputs(sizes, "f64", rng)
        got = pc.compile(conv.kernel, sched, flags=EXACT)(**inputs)
        np.testing.assert_array_equal(got, pc.compile(conv.kernel, flags=EXACT)(**inputs))


def test_zeros_read_by_another_statement_stay_written():
    k = pc.kernel("""
        C[i, j] = 0.0
        Z[i, j] = C[i, j] + 1.0
        C[i, j] += A[i, k] * B[k, j]
    """, name="peek", A=pc.f64["I", "K"], B=pc.f64["K", "J"])
    sched = k.schedule().pack("S2")
    assert not _folds(sched)
    assert FOLDED not in pc.codegen(k, sched)
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((9, 11)), rng.standard_normal((11, 20))
    out = pc.compile(k, sched)(A=a, B=b)
    c, z = out["C"], out["Z"]
    np.testing.assert_allclose(c, a @ b, rtol=1e-12)
    np.testing.assert_array_equal(z, np.ones((9, 20)))


def test_a_start_that_is_not_zero_or_not_the_whole_target_is_kept():
    ones = pc.kernel("""
        C[i, j] = 1.0
        C[i, j] += A[i, k] * B[k, j]
    """, name="from_one", A=pc.f64["I", "K"], B=pc.f64["K", "J"])
    part = pc.kernel("""
        C[i, j] = 0.0 where i in 0:I
        C[i, j] += A[i, k] * B[k, j] where i in 1:I
    """, name="part", A=pc.f64["I", "K"], B=pc.f64["K", "J"])
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((6, 4)), rng.standard_normal((4, 5))
    for k, want in ((ones, 1 + a @ b), (part, np.vstack([np.zeros((1, 5)), a[1:] @ b]))):
        sched = k.schedule().pack("S1")
        assert not _folds(sched)
        np.testing.assert_allclose(pc.compile(k, sched)(A=a, B=b), want, rtol=1e-12)
