"""Commutative updates (`polyc.poly.commutative`): integer max/min updates of one element may run in
either order, never at the same time, and every other access stays ordered exactly."""
from __future__ import annotations

import json

import numpy as np
import pytest

import polyc as pc
from kernels import all_kernels
from polyc.errors import IllegalScheduleError, PolycError
from polyc.poly.commutative import commutative_op
from polyc.schedule.schedule import LoopKind

EXACT = ["-O3", "-march=native", "-ffp-contract=off"]


def best_split(table: pc.i32["N", "N"]):
    """nussinov's heart: a cell is the best of its row neighbour and of every split point k."""
    for ii in range(N):  # noqa: F821
        for j in range(N - ii, N):  # noqa: F821
            table[N - 1 - ii, j] = max(table[N - 1 - ii, j], table[N - 1 - ii, j - 1])  # noqa: F821
            for k in range(N - ii, j):  # noqa: F821
                table[N - 1 - ii, j] = max(table[N - 1 - ii, j], table[N - 1 - ii, k] + table[k + 1, j])  # noqa: F821


def best_split_f64(table: pc.f64["N", "N"]):
    """The same loops over a float table (the body is `best_split`'s)."""


best_split_f64.__code__ = best_split.__code__.replace(co_name="best_split_f64")


def chained(A: pc.i32["N"]):
    """Each update reads the other elements' current values (`A[j]` is `A[i]` once): the order is
    the meaning, although every statement is a max-update."""
    for i in range(N):  # noqa: F821
        for j in range(N):  # noqa: F821
            A[i] = max(A[i], A[j] + 1)


def float_operand(A: pc.i32["N"], B: pc.f64["N", "K"]):
    for i in range(N):  # noqa: F821
        for k in range(K):  # noqa: F821
            A[i] = max(A[i], B[i, k])


def narrowing(m: pc.u8["N"], B: pc.i32["K", "N"]):
    """The max is an int32 one, stored into uint8: 300 wraps to 44, so the last update wins."""
    for i in range(N):  # noqa: F821
        for k in range(K):  # noqa: F821
            m[i] = max(m[i], B[k, i])


def int_sum(A: pc.i32["N"], B: pc.i32["N", "K"]):
    for i in range(N):  # noqa: F821
        for k in range(K):  # noqa: F821
            A[i] += B[i, k]


def column_max(m: pc.i32["N"], B: pc.i32["K", "N"]):
    for i in range(N):  # noqa: F821
        for k in range(K):  # noqa: F821
            m[i] = min(m[i], B[k, i])


def _table(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(-50, 50, size=(n, n)).astype(np.int32)


def _run(kernel, schedule, flags=EXACT, **inputs):
    copies = {k: v.copy() for k, v in inputs.items()}
    pc.compile(kernel, schedule, flags=flags)(**copies)
    return copies


def test_integer_max_updates_are_commutative_and_their_dependences_reorderable():
    k = pc.kernel(best_split)
    program = k.program
    assert [commutative_op(program, st) for st in program.statements] == ["max", "max"]
    deps = list(k.dependences())
    free = [d for d in deps if d.reorderable]
    assert free and all(d.array == "table" for d in free)
    # the reads table[i, k] and table[k + 1, j] keep every writer of their element before them
    assert any(d.kind == "flow" and d.source == d.sink == "S1" and not d.reorderable for d in deps)
    assert "either order" in str(free[0])


@pytest.mark.parametrize("fn", [best_split_f64, float_operand, narrowing, int_sum])
def test_float_max_float_operands_and_integer_sums_keep_their_order(fn):
    """Float max depends on the order (NaN, -0.0); a float operand rounds back to the integer
    element, a wider integer one wraps into it; integer sums may overflow (undefined in C): none of
    them is reordered."""
    k = pc.kernel(fn)
    assert all(commutative_op(k.program, st) is None for st in k.program.statements)
    assert not any(d.reorderable for d in k.dependences())


def test_the_split_loop_swaps_for_its_statement_alone_and_the_results_stay_exact():
    k = pc.kernel(best_split)
    s = k.schedule().interchange("j", "k", statements=["S1"])
    assert s.statement_map("S0").is_equal(k.schedule().statement_map("S0"))
    table = _table(37)
    want = _run(k, k.schedule(), table=table)["table"]
    np.testing.assert_array_equal(_run(k, s, table=table)["table"], want)
    np.testing.assert_array_equal(_run(k, s.vectorize("k"), table=table)["table"], want)


def test_the_float_version_of_the_same_swap_is_refused_naming_the_dependence():
    k = pc.kernel(best_split_f64)
    with pytest.raises(IllegalScheduleError, match="S1 -> S0|S1 -> S1|S0 -> S1"):
        k.schedule().interchange("j", "k", statements=["S1"])


def test_reorderable_updates_still_never_run_at_the_same_time():
    """Either order, but one at a time: the loop of the updates of one cell is no parallel loop."""
    k = pc.kernel(best_split)
    with pytest.raises(IllegalScheduleError, match="loop 'k' carries"):
        k.schedule().parallel("k")
    with pytest.raises(IllegalScheduleError):
        k.schedule().vectorize("k")
    m = pc.kernel(column_max)
    with pytest.raises(IllegalScheduleError, match="loop 'k' carries"):
        m.schedule().interchange("i", "k").parallel("k")


def test_a_commutative_update_whose_operand_reads_the_updated_elements_keeps_its_order():
    """`A[i] = max(A[i], A[j] + 1)`: every statement is a max-update, but the operand reads elements
    being updated, so the interchange that would change the result is refused."""
    k = pc.kernel(chained)
    a = np.arange(6, dtype=np.int32)[::-1].copy()
    want = _run(k, k.schedule(), A=a)["A"]
    # in the other order the result differs: the refusal below is not a formality
    other = a.copy()
    for j in range(6):
        for i in range(6):
            other[i] = max(other[i], other[j] + 1)
    assert not np.array_equal(other, want)
    with pytest.raises(IllegalScheduleError):
        k.schedule().interchange("i", "j")


def test_a_narrowing_maximum_really_depends_on_its_order():
    k = pc.kernel(narrowing)
    f = pc.compile(k, k.schedule())
    results = []
    for B in ([[300], [100]], [[100], [300]]):
        m = np.zeros(1, dtype=np.uint8)
        f(m=m, B=np.array(B, dtype=np.int32))
        results.append(int(m[0]))
    assert results == [100, 44]
    with pytest.raises(IllegalScheduleError):
        k.schedule().reverse("k")


def test_an_update_whose_operand_reads_its_own_element_keeps_its_order():
    """`M[i] max= 2 * M[i] - B[i, k]` (Einstein's update form) reads the value it updates: from 1,
    the operands -3 then 1 give 5 then 9, the operands 1 then -3 give 1 then 5; no step may swap."""
    k = pc.kernel("M[i] max= 2 * M[i] - B[i, k]", name="doubling", M=pc.i32["N"], B=pc.i32["N", "K"])
    assert [commutative_op(k.program, st) for st in k.program.statements] == [None]
    assert not any(d.reorderable for d in k.dependences())
    f = pc.compile(k, k.schedule())
    results = []
    for row in ([[-3, 1]], [[1, -3]]):
        m = np.array([1], dtype=np.int32)
        f(M=m, B=np.array(row, dtype=np.int32))
        results.append(int(m[0]))
    assert results[0] != results[1], results
    with pytest.raises(IllegalScheduleError):
        k.schedule().reverse("k")


def test_updates_of_one_element_may_be_reordered_across_loops():
    """`m[i] = min(m[i], B[k, i])` over k: the k loop may go outside (rows of B inside)."""
    m = pc.kernel(column_max)
    s = m.schedule().interchange("i", "k").vectorize("i")
    B = np.random.default_rng(1).integers(-1000, 1000, size=(23, 41)).astype(np.int32)
    init = np.full(41, 7, dtype=np.int32)
    got = _run(m, s, m=init, B=B)["m"]
    np.testing.assert_array_equal(got, np.minimum(init, B.min(axis=0)))


def test_interchange_for_some_statements_checks_its_arguments():
    k = pc.kernel(best_split)
    with pytest.raises(PolycError, match="does not run along both"):
        k.schedule().interchange("j", "k", statements=["S0"])
    with pytest.raises(PolycError, match="no statement named"):
        k.schedule().interchange("j", "k", statements=["S9"])
    with pytest.raises(PolycError, match="names one loop twice"):
        k.schedule().interchange("j", "j", statements=["S1"])


def test_a_saved_per_statement_interchange_replays_and_is_proven_again():
    k = pc.kernel(best_split)
    s = k.schedule().interchange("j", "k", statements=[1])
    text = s.to_json()
    again = pc.Schedule.from_json(k, text)
    assert again.statement_map("S1").is_equal(s.statement_map("S1"))
    doc = json.loads(text)
    # the float kernel's statements are the same, but its updates must keep their order: the
    # replay proves the step again and refuses it
    with pytest.raises(PolycError):
        pc.Schedule.from_json(pc.kernel(best_split_f64), json.dumps(doc))
    for bad in ("S1; rm -rf /", [], [["S1"]], ["S0"]):
        doc = json.loads(text)
        doc["steps"][0]["kwargs"]["statements"] = bad
        with pytest.raises(PolycError):
            pc.Schedule.from_json(k, json.dumps(doc))


def test_auto_runs_nussinov_along_rows_and_matches_the_source_order_exactly():
    lk = next(x for x in all_kernels(suite="polybench") if x.name == "nussinov")
    f = pc.compile(lk.kernel, "auto", flags=EXACT)
    _, sched = f.schedule_for({"N": 120})
    assert any("statements=['S4']" in h for h in sched.history), sched.history
    assert any(d.runs(LoopKind.VECTORIZED) for d in sched.dims)
    inputs = lk.make_inputs({"N": 120}, "i32", np.random.default_rng(0))
    inputs["table"] = _table(120, seed=3)
    got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    f(**got)
    want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    pc.compile(lk.kernel, lk.kernel.schedule(), flags=EXACT)(**want)
    np.testing.assert_array_equal(got["table"], want["table"])
