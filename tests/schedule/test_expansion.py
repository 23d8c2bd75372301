"""Array expansion for `schedule="auto"` (`polyc.schedule.expansion`): a temporary that outer loops
reuse gets one copy per iteration when that makes a statement a contraction the scheduler packs
(PolyBench's doitgen), with the caller's arrays and results unchanged."""
import numpy as np
import pytest

import polyc as pc
from kernels import by_name
from polyc.schedule.expansion import expand_for_contraction

DOITGEN = by_name("doitgen")


def _inputs(sizes, seed=0):
    return DOITGEN.make_inputs(sizes, "f64", np.random.default_rng(seed))


def test_doitgen_total_is_expanded_and_copied_back():
    program, notes = expand_for_contraction(DOITGEN.kernel.program)
    assert len(notes) == 1 and "total" in notes[0]
    decls = {t.name: t for t in program.tensors}
    assert decls["total_x"].role == "temp" and [str(e) for e in decls["total_x"].shape] == ["NR", "NQ", "NP"]
    assert decls["total"].role == "inout"             # the caller's parameters do not change
    back = program.statements[-1]
    assert back.target.tensor == "total" and [str(e) for e in back.value.indices] == ["NR - 1", "NQ - 1", "e0"]


@pytest.mark.parametrize("preset", ["MINI", "SMALL"])
def test_auto_doitgen_packs_the_expanded_product_and_matches_source_order(preset):
    f = pc.compile(DOITGEN.kernel, "auto")
    assert f.kernel.expansion_notes and any(p.statement for p in f.schedule.packing)
    ref = pc.compile(DOITGEN.kernel)
    a, b = _inputs(DOITGEN.sizes[preset]), _inputs(DOITGEN.sizes[preset])
    f(**a)
    ref(**b)
    np.testing.assert_allclose(a["A"], b["A"], rtol=1e-12)
    np.testing.assert_allclose(a["total"], b["total"], rtol=1e-12)   # the last (r, q)'s sums, copied back


def running(A: pc.f64["R", "P"], acc: pc.f64["P"], out: pc.f64["R", "P"]):
    for r in range(R):
        for p in range(P):
            acc[p] += A[r, p] * 2.0
        for p in range(P):
            out[r, p] = acc[p]


def first_rows_only(A: pc.f64["R", "Q", "P"], C: pc.f64["P", "P"], t: pc.f64["P"]):
    for r in range(R):
        for q in range(Q):
            if r == 0:
                for p in range(P):
                    t[p] = 0.0
                    for s in range(P):
                        t[p] += A[r, q, s] * C[s, p]
            for p in range(P):
                A[r, q, p] = A[r, q, p] + 1.0


@pytest.mark.parametrize("fn", [running, first_rows_only])
def test_no_expansion_where_values_cross_iterations_or_the_last_iteration_misses_elements(fn):
    program, notes = expand_for_contraction(pc.kernel(fn).program)
    assert notes == ()


def test_einstein_kernels_are_left_alone():
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]")
    program, notes = expand_for_contraction(k.program)
    assert notes == () and program is k.program
