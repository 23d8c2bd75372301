"""Legality checks (`polyc.schedule.legality`) as the primitives use them: exact answers,
concrete counterexamples, the reduction exemption, the dependence cache and the isl budget."""
# ruff: noqa: F821
# flake8: noqa: F821
from __future__ import annotations

import gc
import weakref

import pytest

import polyc as pc
from polyc.errors import IllegalScheduleError, IslBudgetError
from polyc.poly import islutil
from polyc.schedule.legality import carried_at, check_legal, check_parallel, violations
from polyc.schedule.rewrite import dependences_of, is_reduction_dependence

matmul = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")


@pc.kernel
def jacobi_like(A: pc.f64["N", "N"]):
    for i in range(1, N):
        for j in range(0, N - 1):
            A[i, j] = A[i - 1, j + 1] * 0.5


@pc.kernel
def prefix(A: pc.f64["N"]):
    for i in range(1, N):
        A[i] += A[i - 1]


def test_dependences_are_cached_per_model():
    deps = dependences_of(matmul.model)
    assert dependences_of(matmul.model) is deps
    assert len(deps) == len(matmul.dependences())


def test_cached_dependences_do_not_keep_models_alive():
    k = pc.kernel("B[i] = A[i] * 2.0", name="tmp")
    assert dependences_of(k.model) is k.model.dependences  # computed once, cached on the model
    model = weakref.ref(k.model)
    del k
    gc.collect()
    assert model() is None


def test_source_order_is_legal_and_carries_exactly_the_reduction():
    s = matmul.schedule()
    deps = dependences_of(matmul.model)
    assert violations(s, deps) == []
    check_legal(s, deps, "source order")
    assert carried_at(s, deps, s.dim_index("i")) == []
    assert carried_at(s, deps, s.dim_index("j")) == []
    carried = carried_at(s, deps, s.dim_index("k"))
    assert carried and all(d.source == d.sink == "S1" for d, _ in carried)


def test_violation_message_has_kind_statements_array_pair_and_sizes():
    with pytest.raises(IllegalScheduleError) as e:
        jacobi_like.schedule().interchange("i", "j")
    text = str(e.value)
    assert "flow dependence S0 -> S0 on A" in text
    assert "S0[i=" in text and "writes A[" in text and "then reads" in text and "(with N=" in text
    assert e.value.dependence is not None and e.value.dependence.kind == "flow"
    # distance (1, -1): reversing j first makes it (1, 1), and then the interchange is legal
    s = jacobi_like.schedule().reverse("j").interchange("i", "j")
    assert violations(s, dependences_of(jacobi_like.model)) == []


def test_check_parallel_names_the_loop():
    s = matmul.schedule()
    deps = dependences_of(matmul.model)
    check_parallel(s, deps, "i", "parallel i")
    with pytest.raises(IllegalScheduleError, match=r"loop 'k' carries the flow dependence S1 -> S1 on C"):
        check_parallel(s, deps, "k", "parallel k")


def test_reduction_dependences_are_recognised():
    deps = dependences_of(matmul.model)
    kinds = {(d.kind, d.source, d.sink): is_reduction_dependence(matmul.model, d) for d in deps}
    assert kinds[("flow", "S1", "S1")] is True
    assert kinds[("flow", "S0", "S1")] is False
    for d in dependences_of(prefix.model):
        assert not is_reduction_dependence(prefix.model, d)  # A[i] += A[i-1] reads other elements


def test_isl_budget_stops_legality_checks(monkeypatch):
    s = matmul.schedule()
    dependences_of(matmul.model)  # computed before the budget is lowered
    monkeypatch.setattr(islutil, "DEFAULT_BUDGET", 1)
    with pytest.raises(IslBudgetError, match="needed more than 1 isl operations"):
        s.tile(i=4, j=4)
