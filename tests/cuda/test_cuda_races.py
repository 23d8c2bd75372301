"""CUDA mappings whose instances no barrier can order are refused (`codegen.cuda_races`): a
dependence across blocks, or across threads inside per-thread code.  Their legal neighbours
(the same kernels mapped so a barrier or one thread orders the pair) still compile and match."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc


@pc.kernel
def diagonal(A: pc.f32["I", "T", "J"]):
    for i in range(I):
        for t in range(1, T):
            for j in range(J - 1):
                A[i, t, j] = A[i, t - 1, j + 1] + 1.0


@pc.kernel
def straight(A: pc.f32["I", "T", "J"]):
    for i in range(I):
        for t in range(1, T):
            for j in range(J):
                A[i, t, j] = A[i, t - 1, j] + 1.0


@pc.kernel
def broadcast(A: pc.f32["I", "J"], B: pc.f32["I"], C: pc.f32["I", "J"]):
    for i in range(I):
        B[i] = A[i, 0] * 2.0
        for j in range(J):
            C[i, j] = B[i] + A[i, j]


def _run(kernel, schedule, **arrays):
    f = pc.compile(kernel, schedule, target="cuda-emu")
    got = {k: v.copy() for k, v in arrays.items()}
    want = {k: v.copy() for k, v in arrays.items()}
    f(**got)
    kernel.reference(**want)
    for k in arrays:
        np.testing.assert_array_equal(got[k], want[k])


def test_a_serial_loop_between_thread_loops_with_a_dependence_across_threads_is_refused():
    with pytest.raises(pc.IllegalScheduleError, match=r"races: flow dependence S0 -> S0 on A .* different "
                                                       r"threads \(loop\(s\) 'j'\) inside the serial loop 't'"):
        pc.codegen(diagonal, diagonal.schedule().map_to_threads("i", "j"), target="cuda")
    # the same nest whose time steps stay in their thread needs no barrier
    a = np.random.default_rng(0).standard_normal((2, 4, 5)).astype(np.float32)
    _run(straight, straight.schedule().map_to_threads("i", "j"), A=a)


def test_a_statement_of_thread_zero_read_by_every_thread_is_refused():
    with pytest.raises(pc.IllegalScheduleError, match=r"S0 -> S1 on B .* different threads"):
        pc.codegen(broadcast, broadcast.schedule().map_to_threads("i", "j"), target="cuda")


def test_a_statement_of_block_zero_read_by_every_block_is_refused():
    with pytest.raises(pc.IllegalScheduleError, match=r"S0 -> S1 on B .* different blocks .* blocks cannot "
                                                       r"synchronise"):
        pc.codegen(broadcast, broadcast.schedule().map_to_blocks("i", "j"), target="cuda")


def test_rows_on_blocks_and_columns_on_threads_order_the_pair_with_a_barrier():
    rng = np.random.default_rng(1)
    arrays = dict(A=rng.standard_normal((3, 70)).astype(np.float32), B=np.zeros(3, np.float32),
                  C=np.zeros((3, 70), np.float32))
    _run(broadcast, broadcast.schedule().map_to_blocks("i").map_to_threads("j"), **arrays)
    _run(broadcast, "auto", **arrays)
    assert "__syncthreads();" in pc.codegen(broadcast, broadcast.schedule().map_to_blocks("i").map_to_threads("j"),
                                            target="cuda")


def test_a_block_loop_inside_a_thread_loop_is_refused_by_the_mapping():
    # every step legal on its own, but the interchange leaves blocks inside threads
    k = pc.kernel("T0[i, j] = A0[i]", name="blocks_in_threads", A0=pc.f64["M"], T0=pc.tensor["M", "N"])
    s = k.schedule().map_to_blocks("i").interchange("i", "j")
    with pytest.raises(pc.IllegalScheduleError, match="block loops must enclose thread loops"):
        s.map_to_threads("j")
    ok = k.schedule().map_to_blocks("i").map_to_threads("j")
    np.testing.assert_array_equal(pc.compile(k, ok, target="cuda-emu")(A0=np.arange(3.0), N=4),
                                  np.repeat(np.arange(3.0)[:, None], 4, axis=1))
