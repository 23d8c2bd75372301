"""Row blocks in one C loop (`polyc.program.row_driver`): the blocks of a program run inside one
OpenMP region that calls the groups' compiled kernels directly; what it computes, which kernel
variant each block gets, threads, concurrent callers, and where it falls back to Python."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernels import programs as P

from .concurrent import mismatches_from_threads


def _driver(prog):
    drivers = [d for plan in prog._plans.values() for d in plan.drivers.values() if d is not None]
    assert len(drivers) == 1
    return drivers[0]


def test_uneven_blocks_with_a_small_tail_match_the_unblocked_program(threads):
    blocked, plain = P.attention(blocks=48), P.attention(blocks=False)
    a = P.inputs(blocked, dict(S=200, D=16))          # 4 blocks of 48 and one of 8: 3 + 2 on two threads
    got = blocked(**a)
    np.testing.assert_allclose(got, plain(**a), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(got, blocked.reference(**a), rtol=1e-5, atol=1e-6)
    assert "in one C loop" in blocked.explain()
    source = _driver(blocked).source
    # 8 rows are compiled in as a constant: the last block calls variants of its own
    assert "pc_r0 + pc_rows <= pc_total" in source
    full, tail = source.split("} else {")
    full_calls, tail_calls = re.findall(r"pc_fn\[(\d+)\]", full), re.findall(r"pc_fn\[(\d+)\]", tail)
    assert len(full_calls) == len(tail_calls) == 3 and full_calls != tail_calls
    np.testing.assert_array_equal(blocked(**a), got)   # buffers reused: the same again


def test_one_driver_source_serves_every_size(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    prog = P.attention(blocks=64)
    sources = []
    for s in (256, 320):                              # whole blocks only, at two sizes
        a = P.inputs(prog, dict(S=s, D=32))
        np.testing.assert_allclose(prog(**a), prog.reference(**a), rtol=1e-5, atol=1e-6)
        sources.append([d for d in prog._last.drivers.values() if d is not None][0].source)
    assert sources[0] == sources[1]                   # sizes and addresses come per call


def test_vendor_calls_in_blocks_run_from_python(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    prog = P.attention(blocks=64, vendor=True)
    a = P.inputs(prog, dict(S=150, D=16))
    np.testing.assert_allclose(prog(**a), prog.reference(**a), rtol=1e-5, atol=1e-6)
    assert "from Python (a vendor call among them)" in prog.explain()
    assert not prog._last.loop.in_c and not prog._last.drivers


def test_concurrent_callers_each_get_their_own_block_buffers(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    prog = P.attention(blocks=32)
    inputs = [P.inputs(prog, dict(S=160, D=16), seed=k) for k in range(4)]
    expected = [prog.reference(**a) for a in inputs]
    prog(**inputs[0])                                  # compile before the race
    assert not mismatches_from_threads(prog, list(zip(inputs, expected)), threads=4, repeats=5,
                                       rtol=1e-5, atol=1e-6, equal_nan=False)


def test_auto_blocks_on_two_threads_keep_the_attention_intermediates_4x_smaller(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    prog = P.attention()
    zeros = {k: np.zeros((1024, 64), np.float32) for k in ("Q", "K", "V")}
    plan = prog.plan(**zeros)
    assert plan.loop is not None and plan.loop.threads == 2
    from polyc.program.blocking import block_rows
    from polyc.schedule.packing import default_blocking
    assert plan.loop.rows == block_rows(1024, default_blocking(4)[3], 2)
    if plan.loop.rows <= 128:                          # this machine's packed m block halved
        assert plan.memory.ratio >= 4.0


@pytest.mark.parametrize("blocks", [64, False])
def test_a_strided_input_is_refused_by_its_own_name(blocks):
    from polyc.errors import ArgumentError
    prog = P.attention(blocks=blocks)
    a = P.inputs(prog, dict(S=200, D=16))
    with pytest.raises(ArgumentError, match="argument Q of program attention_head is not C-contiguous"):
        prog(**dict(a, Q=np.asfortranarray(a["Q"])))
