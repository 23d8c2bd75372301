"""Schedule primitives: each has a legal case whose compiled result matches numpy / the kernel run
as written, and an illegal case whose message names the dependence (kind, statements, array,
one concrete pair of instances and the sizes)."""
# ruff: noqa: F821
# flake8: noqa: F821
from __future__ import annotations

import re

import numpy as np
import pytest

import polyc as pc
from polyc.errors import IllegalScheduleError, PolycError
from polyc.testing.check import check_kernel

F64 = {"A": pc.f64, "B": pc.f64, "C": pc.f64}

matmul = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")
rowmax = pc.kernel("m[i] max=! A[i, j]", name="rowmax")


@pc.kernel
def prodcons(A: pc.f64["N"], B: pc.f64["N"], C: pc.f64["N"]):
    for i in range(N):
        B[i] = A[i] * 2.0
    for i in range(1, N):
        C[i] = B[i] + B[i - 1]


@pc.kernel
def lookahead(A: pc.f64["N"], B: pc.f64["N"], C: pc.f64["N"]):
    for i in range(N):
        B[i] = A[i] * 2.0
    for i in range(N - 1):
        C[i] = B[i] + B[i + 1]


@pc.kernel
def seidel(A: pc.f64["N", "N"]):
    for i in range(1, N - 1):
        for j in range(1, N - 1):
            A[i, j] = A[i - 1, j + 1] + A[i, j - 1]


@pc.kernel
def rows(A: pc.f64["N", "N"], B: pc.f64["N", "N"]):
    for i in range(N):
        for j in range(1, N):
            B[i, j] = B[i, j - 1] + A[i, j]


@pc.kernel
def two_in_loop(a: pc.f64["N"], b: pc.f64["N"], x: pc.f64["N"]):
    for i in range(1, N):
        a[i] = b[i - 1] + x[i]
        b[i] = a[i] * 0.5


@pc.kernel
def prefix(A: pc.f64["N"]):
    for i in range(1, N):
        A[i] += A[i - 1]


def mm_inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.random((13, 7)), rng.random((7, 11))


def run_matmul(s):
    A, B = mm_inputs()
    C = pc.compile(matmul, s)(A=A, B=B)
    np.testing.assert_allclose(C, A @ B, rtol=1e-12)


def assert_names_pair(err: Exception, kind: str, src: str, snk: str, array: str) -> None:
    text = str(err)
    assert f"{kind} dependence {src} -> {snk} on {array}" in text, text
    assert re.search(rf"{src}\[\w+=-?\d+", text) and re.search(rf"{snk}\[\w+=-?\d+", text), text
    assert "(with " in text and "=" in text.split("(with ")[-1], text


# -- tile / split ------------------------------------------------------------------------------

def test_tile_names_and_order_and_result():
    s = matmul.schedule().tile(i=4, j=8)
    assert s.loop_names == ("i_outer", "j_outer", "i_inner", "j_inner", "k")
    run_matmul(s)
    src = pc.codegen(matmul, s, dtypes=F64)
    assert "for (int64_t i_i_outer" in src and "for (int64_t i_j_inner" in src


def test_tile_three_loops_with_odd_sizes():
    run_matmul(matmul.schedule().tile(i=3, j=5, k=2))


def test_split_names_and_custom_names():
    s = matmul.schedule().split("k", 4)
    assert s.loop_names == ("i", "j", "k_outer", "k_inner")
    s2 = matmul.schedule().split("i", 2, outer="ii", inner="it")
    assert s2.loop_names == ("ii", "it", "j", "k")
    run_matmul(s)
    run_matmul(s2)


def test_tile_unknown_loop_lists_loops():
    with pytest.raises(PolycError, match=r"no loop named 'q'.*i, j, k"):
        matmul.schedule().tile(q=4)


def test_tile_bad_size():
    with pytest.raises(PolycError, match="positive int"):
        matmul.schedule().tile(i=0)


def test_tile_illegal_on_seidel():
    with pytest.raises(IllegalScheduleError) as e:
        seidel.schedule().tile(i=2, j=2)
    assert_names_pair(e.value, "flow", "S0", "S0", "A")


# -- interchange / reorder / skew / reverse ------------------------------------------------------

def test_interchange_and_reorder_matmul():
    s = matmul.schedule().interchange("j", "k")
    assert s.loop_names == ("i", "k", "j")
    run_matmul(s)
    s = matmul.schedule().reorder("k", "j", "i")
    assert s.loop_names == ("k", "j", "i")
    run_matmul(s)


def test_interchange_illegal_stencil_names_the_pair():
    with pytest.raises(IllegalScheduleError) as e:
        seidel.schedule().interchange("i", "j")
    assert_names_pair(e.value, "flow", "S0", "S0", "A")
    assert "interchange('i', 'j') is illegal" in str(e.value)


def test_skew_makes_interchange_legal():
    s = seidel.schedule().skew("j", "i", 1).interchange("i", "j")
    check_kernel(seidel, s, sizes={"N": 9})


def test_reverse_legal_and_illegal():
    run_matmul(matmul.schedule().reverse("i"))
    with pytest.raises(IllegalScheduleError) as e:
        matmul.schedule().reverse("k")
    assert_names_pair(e.value, "flow", "S1", "S1", "C")


# -- shift / fuse / distribute ---------------------------------------------------------------------

def test_fuse_legal_and_result():
    s = prodcons.schedule().fuse("S0", "S1")
    assert len(pc.codegen(prodcons, s).split("for (")) == 2  # one loop
    check_kernel(prodcons, s, sizes={"N": 10})


def test_fuse_illegal_breaks_producer_consumer():
    with pytest.raises(IllegalScheduleError) as e:
        lookahead.schedule().fuse("S0", "S1")
    assert_names_pair(e.value, "flow", "S0", "S1", "B")


def test_shift_then_fuse_is_legal():
    s = lookahead.schedule().shift("S1", "i", 1).fuse(0, 1)
    check_kernel(lookahead, s, sizes={"N": 10})


def test_shift_illegal():
    with pytest.raises(IllegalScheduleError) as e:
        two_in_loop.schedule().shift("S1", "i", -1)
    assert_names_pair(e.value, "flow", "S0", "S1", "a")
    with pytest.raises(IllegalScheduleError) as e:
        two_in_loop.schedule().shift("S1", "i", 2)
    assert_names_pair(e.value, "flow", "S1", "S0", "b")


def test_distribute_loop_and_statement():
    fused = prodcons.schedule().fuse("S0", "S1")
    for s in (fused.distribute("i"), fused.distribute("S1")):
        assert len(pc.codegen(prodcons, s).split("for (")) == 3  # two loops
        check_kernel(prodcons, s, sizes={"N": 10})


def test_distribute_illegal():
    with pytest.raises(IllegalScheduleError) as e:
        two_in_loop.schedule().distribute("i")
    assert_names_pair(e.value, "flow", "S1", "S0", "b")


def test_unknown_statement():
    with pytest.raises(PolycError, match="S0, S1"):
        prodcons.schedule().shift("S7", "i", 1)


# -- unroll / unroll-and-jam / peel ---------------------------------------------------------------

def test_full_unroll_after_split():
    s = matmul.schedule().split("k", 4).unroll("k_inner")
    src = pc.codegen(matmul, s, dtypes=F64)
    assert "k_inner" not in src.split("{", 2)[-1]  # no loop over k_inner is left
    run_matmul(s)


def test_unroll_by_factor_is_a_pragma():
    s = matmul.schedule().unroll("k", 4)
    assert "#pragma GCC unroll 4" in pc.codegen(matmul, s, dtypes=F64)
    run_matmul(s)


def test_full_unroll_of_parametric_loop_refused():
    with pytest.raises(PolycError, match="grows with the sizes"):
        matmul.schedule().unroll("k")


def test_unroll_and_jam():
    s = matmul.schedule().unroll_and_jam("i", 3)
    assert "i_inner" not in pc.codegen(matmul, s, dtypes=F64)
    run_matmul(s)


def test_unroll_and_jam_illegal():
    with pytest.raises(IllegalScheduleError) as e:
        seidel.schedule().unroll_and_jam("i", 2)
    assert_names_pair(e.value, "flow", "S0", "S0", "A")


def test_peel():
    s = prodcons.schedule().peel("i", front=1, back=2)
    src = pc.codegen(prodcons, s)
    assert "B[0] = " in src
    check_kernel(prodcons, s, sizes={"N": 10})
    check_kernel(prodcons, s, sizes={"N": 2})


def test_peel_bad_arguments():
    with pytest.raises(PolycError, match="non-negative"):
        prodcons.schedule().peel("i", front=-1)


# -- parallel / vectorize / reductions -------------------------------------------------------------

def test_parallel_legal_and_pragma():
    s = matmul.schedule().tile(i=4, j=4).parallel("i_outer")
    assert "#pragma omp parallel for" in pc.codegen(matmul, s, dtypes=F64)
    run_matmul(s)


def test_parallel_of_reduction_loop_refused():
    with pytest.raises(IllegalScheduleError) as e:
        matmul.schedule().parallel("k")
    assert "loop 'k' carries" in str(e.value)
    assert_names_pair(e.value, "flow", "S1", "S1", "C")


def test_parallel_reduction_strategy():
    s = matmul.schedule().reorder("k", "i", "j").parallel("k", reduction=True)
    assert "reduction_parallel" in s.dims[s.dim_index("k")].marks
    src = pc.codegen(matmul, s, dtypes=F64)
    # each thread sums into a private copy of C, added to C at the end (tests/codegen/test_private_reductions.py)
    assert "pc_private_" in src and "#pragma omp critical" in src and "#pragma omp atomic" not in src
    run_matmul(s)
    s2 = matmul.schedule().parallel_reduction("k")
    run_matmul(s2)


def test_parallel_reduction_max_uses_a_reduction_clause_not_critical():
    s = rowmax.schedule().parallel("j", reduction=True)
    src = pc.codegen(rowmax, s, dtypes={"A": pc.f64, "m": pc.f64})
    assert "reduction(max:pc_acc)" in src and "omp critical" not in src
    A = np.random.default_rng(1).random((9, 17))
    np.testing.assert_allclose(pc.compile(rowmax, s)(A=A), A.max(axis=1))


def test_reduction_strategy_does_not_cover_recurrences():
    with pytest.raises(IllegalScheduleError) as e:
        prefix.schedule().parallel("i", reduction=True)
    assert_names_pair(e.value, "flow", "S0", "S0", "A")


def test_parallel_without_reduction_need_is_plain():
    s = matmul.schedule().parallel("i", reduction=True)
    assert "parallel" in s.dims[s.dim_index("i")].marks


def test_vectorize_innermost_and_not():
    s = matmul.schedule().interchange("j", "k").vectorize("j")
    assert "#pragma omp simd" in pc.codegen(matmul, s, dtypes=F64)
    run_matmul(s)
    with pytest.raises(IllegalScheduleError, match="not innermost"):
        matmul.schedule().vectorize("j")
    with pytest.raises(IllegalScheduleError) as e:
        rows.schedule().vectorize("j")
    assert_names_pair(e.value, "flow", "S0", "S0", "B")


def test_marks_are_reproved_after_later_primitives():
    s = rows.schedule().parallel("i")
    with pytest.raises(IllegalScheduleError, match="marked parallel"):
        s.skew("i", "j", 1)


# -- printing ----------------------------------------------------------------------------------

def test_str_and_tree():
    s = matmul.schedule().tile(i=4, j=4).parallel("i_outer")
    text = str(s)
    assert "tile(i=4, j=4)" in text and "parallel('i_outer')" in text
    tree = s.tree
    assert "for i_outer [parallel]  (floor((i)/4))" in tree
    assert "S1: C[i, j] += A[i, k] * B[k, j]" in tree
    assert "tile(i=4, j=4).parallel('i_outer')" in repr(s)


def test_primitives_return_new_schedules():
    s = matmul.schedule()
    t = s.tile(i=4)
    assert s.loop_names == ("i", "j", "k") and t is not s


def test_gpu_mapping_delegates_and_is_recorded():
    s = matmul.schedule().map_to_blocks("i").map_to_threads("j")
    assert "block" in s.dims[s.dim_index("i")].marks and "thread" in s.dims[s.dim_index("j")].marks
    assert s.history == ("map_to_blocks('i')", "map_to_threads('j')")
    with pytest.raises(IllegalScheduleError, match="loop 'k' carries"):
        matmul.schedule().map_to_threads("k")


def test_peeled_tree_shows_parts():
    tree = prodcons.schedule().peel("i", front=1).tree
    assert "(piece 1/2)" in tree and "(piece 2/2)" in tree
