"""Unroll-and-jam with the partial group separated, and reduction chains split from SIMD work."""
from __future__ import annotations

import numpy as np
import pytest

import kernels
import polyc as pc
from polyc.schedule.auto import auto_schedule
from polyc.schedule.auto_jam import jam_reductions, split_reduction_chains

EXACT = ["-O3", "-march=native", "-ffp-contract=off"]
ROWSUM = "s[i] +=! A[i, j] * 2.0"


@pytest.mark.parametrize("rows", [1, 7, 8, 21])
def test_separated_jam_is_exact_for_any_row_count(rows):
    k = pc.kernel(ROWSUM, name="rowsum_jam")
    sched = k.schedule().unroll_and_jam("i", 4, separate=True)
    a = np.random.default_rng(rows).random((rows, 13))
    got = pc.compile(k, sched, flags=EXACT)(A=a)
    want = pc.compile(k, flags=EXACT)(A=a)
    np.testing.assert_array_equal(got, want)


def test_full_groups_carry_no_guards():
    k = pc.kernel(ROWSUM, name="rowsum_guards")
    plain = pc.codegen(k, k.schedule().unroll_and_jam("i", 4), dtypes={"A": pc.f64})
    separated = pc.codegen(k, k.schedule().unroll_and_jam("i", 4, separate=True), dtypes={"A": pc.f64})
    full = separated[separated.rindex("for (int64_t i_i_outer"):]      # the full groups' nest
    full = "\n".join(full.splitlines()[:10])
    assert "if (" not in full and full.count("+=") == 4, full        # four updates, no guards
    assert "if (" in plain[plain.index("for (int64_t i_j"):]


def test_separate_round_trips_through_json():
    k = pc.kernel(ROWSUM, name="rowsum_json")
    sched = k.schedule().unroll_and_jam("i", 4, separate=True)
    again = pc.Schedule.from_json(k, sched.to_json())
    assert again.history == sched.history


def test_reduction_chains_are_split_from_simd_work_legally():
    lk = kernels.by_name("softmax")
    base = auto_schedule(lk.kernel, jam_rows=False, reassociate=False)  # jamming is for ordered chains
    split = split_reduction_chains(base)
    assert any(h.startswith("distribute('S4'") for h in split.history), split.history
    jammed = jam_reductions(split)
    assert any("unroll_and_jam" in h for h in jammed.history)
    inputs = lk.make_inputs(dict(I=19, J=23), "f64", np.random.default_rng(2))
    np.testing.assert_allclose(pc.compile(lk.kernel, jammed)(**inputs), lk.expected(inputs), rtol=1e-12)


def _polybench(name):
    from kernels.polybench import linear_algebra, datamining
    return next(k for m in (linear_algebra, datamining) for k in m.KERNELS if k.name == name)


def test_auto_jams_ordered_chains_of_loop_kernels_and_keeps_their_order():
    """atax's row products `tmp[i] += A[i, j] * x[j]` are ordered chains (a loop kernel keeps
    Python's order): "auto" runs rows side by side, each still summed in its written order."""
    lk = _polybench("atax")
    sizes = dict(M=37, N=29)
    sched = auto_schedule(lk.kernel, sizes=sizes)
    assert any(h.startswith("unroll_and_jam(") for h in sched.history), sched.history
    inputs = lk.make_inputs(sizes, "f64")
    got = pc.compile(lk.kernel, sched, flags=EXACT)(**{k: (v.copy() if hasattr(v, "copy") else v)
                                                        for k, v in inputs.items()})
    want = pc.compile(lk.kernel, flags=EXACT)(**inputs)
    for name in ("y", "tmp"):
        np.testing.assert_array_equal(got[name], want[name])
    assert not any(h.startswith("unroll_and_jam(") for h in auto_schedule(lk.kernel, jam_rows=False).history)


def test_jamming_leaves_packed_contractions_packed():
    """covariance: its column means are jammed chains, its product `cov += data * data` is
    packed; jamming first and skipping the packed statement keeps the pack plan valid (jamming
    after packing changed every statement's map and silently dropped the plan)."""
    from polyc.schedule.packing import packing_plans
    lk = _polybench("covariance")
    sched = auto_schedule(lk.kernel, sizes=lk.sizes["LARGE"])
    assert any(h.startswith("unroll_and_jam(") for h in sched.history), sched.history
    assert packing_plans(sched), sched.history


def test_einstein_reductions_are_reassociated_not_jammed():
    lk = kernels.by_name("softmax")
    assert not any(h.startswith("unroll_and_jam(") for h in auto_schedule(lk.kernel).history)


@pytest.mark.parametrize("name", ["matvec", "rowsum"])
def test_lone_reassociated_chains_are_jammed_into_vector_accumulators(name):
    """matvec's and a row sum's rows hold nothing but one reduction each: "auto" runs eight rows
    side by side, each its own vector accumulator (one accumulator is an add per latency), and
    matvec's rows share each load of `x[j]`.  Results agree at row counts that leave a partial
    group."""
    lk = kernels.by_name("matvec") if name == "matvec" else None
    k = lk.kernel if lk else pc.kernel(ROWSUM, name="rowsum_lone")
    sched = auto_schedule(k, sizes=dict(I=2048, J=2048))
    assert "unroll_and_jam('i', 8, separate=True)" in sched.history, sched.history
    src = pc.codegen(k, sched, dtypes={n: pc.f32 for n in ("A", "x")})
    assert "reduction(+:pc_acc7)" in src and "#pragma omp simd reduction(+:pc_acc)" in src
    rng = np.random.default_rng(9)
    for rows in (3, 21):
        a, x = rng.random((rows, 37)), rng.random(37)
        got = pc.compile(k, sched)(A=a, x=x) if lk else pc.compile(k, sched)(A=a)
        want = a @ x if lk else 2.0 * a.sum(axis=1)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert not any("jam" in h for h in auto_schedule(k, sizes=dict(I=2048, J=2048), jam_rows=False).history)


def test_chains_beside_elementwise_work_are_not_jammed_when_reassociated():
    """layernorm's rows also normalise elementwise: jamming them would cost the vector loops."""
    lk = kernels.by_name("layernorm")
    assert not any(h.startswith("unroll_and_jam(") for h in auto_schedule(lk.kernel, sizes=dict(M=4096, N=1024)).history)
