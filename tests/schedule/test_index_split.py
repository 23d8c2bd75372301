"""`index_split(loop, at, offset)` (index-set splitting) and `"auto"`'s use of it: loops whose
carried dependences all have an end on one plane (Floyd-Warshall's row and column `k`) run in
parallel and as SIMD lanes once split there."""
import json
import warnings

import numpy as np
import pytest

import polyc as pc
from polyc.errors import IllegalScheduleError, PolycError, ScheduleFileError
from polyc.schedule.auto import auto_schedule
from polyc.schedule.auto_split import pinned_plane
from polyc.schedule.legality import check_legal, check_mark
from polyc.schedule.schedule import Schedule
from polyc.testing.fuzz import fuzz_schedules


@pc.kernel
def floyd(paths: pc.i32["N", "N"]):
    for k in range(N):
        for i in range(N):
            for j in range(N):
                paths[i, j] = min(paths[i, j], paths[i, k] + paths[k, j])


@pc.kernel
def shifted_pivot(A: pc.f64["N"], B: pc.f64["N", "N"]):
    # Step k reads A[k + 1], which its own j == k + 1 writes: the plane is j == k + 1.
    for k in range(N - 1):
        for j in range(N):
            A[j] = A[j] * 0.5 + A[k + 1] * B[k, j]


def _graph(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    g = rng.integers(1, 14, (n, n)).astype(np.int32)
    g[rng.random((n, n)) < 0.5] = 999
    return g


def _run(f, **arrays):
    work = {k: v.copy() for k, v in arrays.items()}
    f(**work)
    return work


def _marks(sched):
    return {d.name: d.marks for d in sched.dims if d.name is not None}


def test_split_keeps_the_order_and_frees_the_loops():
    with pytest.raises(IllegalScheduleError):
        floyd.schedule().vectorize("j")
    with pytest.raises(IllegalScheduleError):
        floyd.schedule().parallel("i")
    s = floyd.schedule().index_split("i", at="k").index_split("j", at="k")
    check_legal(s, floyd.dependences(), "split")
    marked = s.parallel("i").vectorize("j")  # each proven by the primitive
    g = _graph(45)
    want = _run(pc.compile(floyd), paths=g)["paths"]
    np.testing.assert_array_equal(_run(pc.compile(floyd, marked), paths=g)["paths"], want)
    src = pc.compile(floyd, marked).source
    assert "omp parallel for" in src and "omp simd" in src


def test_the_enclosing_loop_must_enclose():
    with pytest.raises(PolycError, match="must be a loop enclosing 'k'"):
        floyd.schedule().index_split("k", at="j")
    with pytest.raises(PolycError):
        floyd.schedule().index_split("j", at="nope")


def test_pinned_plane_is_found_from_the_dependences():
    s = floyd.schedule()
    assert pinned_plane(s, floyd.dependences(), s.dim_index("j")) == ("k", 0)
    assert pinned_plane(s, floyd.dependences(), s.dim_index("k")) is None  # outermost: nothing encloses it
    t = shifted_pivot.schedule()
    assert pinned_plane(t, shifted_pivot.dependences(), t.dim_index("j")) == ("k", 1)
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm")
    m = mm.schedule()
    assert pinned_plane(m, mm.dependences(), m.dim_index("k")) is None  # a reduction chain


@pytest.mark.parametrize("n", [1, 2, 3, 37])
def test_auto_splits_floyd_warshall_and_matches_the_source_order(n):
    sched = auto_schedule(floyd, sizes=dict(N=1000))
    steps = [st.call_text() for st in sched.steps]
    assert "index_split('i', at='k', offset=0)" in steps and "index_split('j', at='k', offset=0)" in steps
    marks = _marks(sched)
    assert "parallel" in marks["i"] and "vector" in marks["j"], sched
    for d in sched.dims:
        if d.name is not None and d.marks & {"parallel", "vector"}:
            check_mark(sched, floyd.dependences(), d.name, "proof")
    g = _graph(n, seed=n)
    np.testing.assert_array_equal(_run(pc.compile(floyd, sched), paths=g)["paths"],
                                  _run(pc.compile(floyd), paths=g)["paths"])


def test_auto_finds_an_offset_plane():
    sched = auto_schedule(shifted_pivot, sizes=dict(N=2000))
    assert "index_split('j', at='k', offset=1)" in [st.call_text() for st in sched.steps], sched
    rng = np.random.default_rng(1)
    A, B = rng.uniform(-1, 1, 50), rng.uniform(-1, 1, (50, 50))
    got = _run(pc.compile(shifted_pivot, sched), A=A, B=B)["A"]
    np.testing.assert_allclose(got, _run(pc.compile(shifted_pivot), A=A, B=B)["A"], rtol=1e-13)


def test_saved_split_replays_and_a_tampered_offset_is_refused():
    s = floyd.schedule().index_split("j", at="k", offset=0).vectorize("j")
    again = Schedule.from_json(floyd, s.to_json())
    assert again.dims == s.dims and [st.call_text() for st in again.steps] == [st.call_text() for st in s.steps]
    doc = json.loads(s.to_json())
    doc["steps"][0]["kwargs"]["offset"] = 10 ** 12
    with pytest.raises(ScheduleFileError, match="offset"):
        Schedule.from_json(floyd, json.dumps(doc))
    doc["steps"][0]["kwargs"] = {"at": "k; system('x')", "offset": 0}
    with pytest.raises(ScheduleFileError):
        Schedule.from_json(floyd, json.dumps(doc))


def test_the_fuzzer_draws_index_splits_and_finds_no_mismatch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = fuzz_schedules(floyd, n=12, seed=5, sizes={"N": 7}, max_steps=3, dtype="i32",
                                 primitives={"index_split": 4, "parallel": 2, "vectorize": 2, "interchange": 1})
    assert summary.legal > 0 and summary.schedules > 0, summary
    assert summary.mismatches == 0, summary.failures
