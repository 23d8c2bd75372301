"""Packed sums of products (`T += P1 * P2 + Q1 * Q2`, PolyBench's syr2k): every product's factors
packed side by side at each k position, the products summed as written before each update.  Exact
bit for bit against the source order (no FMA contraction) across edges, blocks, threads, both
packed paths, triangles and three terms; `"auto"` packs syr2k."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.errors import PolycError
from polyc.ir.text import expr_text
from polyc.poly.contraction import contraction_form
from polyc.schedule.packing import default_blocking, register_tile

from kernels.polybench.blas import syr2k

EXACT = ["-O3", "-march=native", "-ffp-contract=off"]
SMALL = dict(mr=3, nv=1, kc=5, mc=6)     # one vector of lanes; m blocks of 6 rows


def _copies(arrays):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in arrays.items()}


def _check(kernel, sched, **arrays):
    """(packed result, source-order result) of `kernel` on copies of `arrays`."""
    return (pc.compile(kernel, sched, flags=EXACT)(**_copies(arrays)),
            pc.compile(kernel, flags=EXACT)(**_copies(arrays)))


def test_a_sum_of_products_over_the_same_loops_is_a_contraction():
    k = pc.kernel(syr2k)
    c = contraction_form(k.program, "S1")
    assert not isinstance(c, str)
    assert (c.m, c.n, c.k) == (("i",), ("j",), ("k",))
    # each product keeps its own factors: the lane side reads A[j, k] * alpha, then B[j, k] * alpha
    assert [(expr_text(m), expr_text(n)) for m, n in c.terms] == [("B[i, k]", "A[j, k] * alpha"),
                                                                   ("A[i, k]", "B[j, k] * alpha")]


def test_sums_that_are_not_one_contraction_are_refused_with_the_reason():
    outer = pc.kernel("C[i, j] += A[i, k] * B[k, j] + D[k, i] * E[j, k]", name="turned",
                      C=pc.f64["N", "N"], A=pc.f64["N", "N"], B=pc.f64["N", "N"], D=pc.f64["N", "N"], E=pc.f64["N", "N"])
    assert not isinstance(contraction_form(outer.program, "S0"), str)   # the same loops, other layouts
    mixed = pc.kernel("C[i, j] += A[i, k] * B[k, j] + D[i, j] * E[j, k]", name="mixed",
                      C=pc.f64["N", "N"], A=pc.f64["N", "N"], B=pc.f64["N", "N"], D=pc.f64["N", "N"], E=pc.f64["N", "N"])
    why = contraction_form(mixed.program, "S0")
    assert isinstance(why, str) and "in the product `D[i, j] * E[j, k]`" in why
    with pytest.raises(PolycError, match="contraction"):
        mixed.schedule().pack("S0")
    diff = pc.kernel("C[i, j] += A[i, k] * B[k, j] - D[i, k] * E[k, j]", name="diff",
                     C=pc.f64["N", "N"], A=pc.f64["N", "N"], B=pc.f64["N", "N"], D=pc.f64["N", "N"], E=pc.f64["N", "N"])
    assert "sum of such products" in contraction_form(diff.program, "S0")
    with pytest.raises(PolycError, match="single product"):
        pc.kernel(syr2k).schedule().pack("S1", lanes="A")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_packed_sums_equal_the_source_order_across_every_edge(threads, dtype):
    mm2 = pc.kernel("C[i, j] += A[i, k] * B[k, j] + D[i, k] * E[j, k]", name="mm2")
    sched = mm2.schedule().pack("S0", **SMALL).parallel("i_block")
    assert "few rows" in pc.codegen(mm2, sched)      # M <= 6 runs the few-rows path, more the classic one
    rng = np.random.default_rng(7)
    for m, n, k in ((1, 3, 2), (5, 9, 11), (6, 17, 5), (7, 8, 13), (13, 33, 17), (4, 5, 0)):
        arrays = dict(A=rng.standard_normal((m, k)), B=rng.standard_normal((k, n)), D=rng.standard_normal((m, k)),
                      E=rng.standard_normal((n, k)), C=rng.standard_normal((m, n)))
        arrays = {name: a.astype(dtype) for name, a in arrays.items()}
        got, want = _check(mm2, sched, **arrays)
        np.testing.assert_array_equal(got, want)
        a = {name: x.astype(np.float64) for name, x in arrays.items()}
        np.testing.assert_allclose(got, a["C"] + a["A"] @ a["B"] + a["D"] @ a["E"].T, rtol=1e-4, atol=1e-4)


def test_a_packed_triangle_of_two_products_equals_the_source_order(threads):
    k = pc.kernel(syr2k)
    rng = np.random.default_rng(8)
    for blocking in (SMALL, {}):
        sched = k.schedule().pack("S1", **blocking)
        for n, m in ((1, 1), (5, 3), (6, 7), (20, 13), (37, 29)):
            arrays = dict(C=rng.standard_normal((n, n)), A=rng.standard_normal((n, m)), B=rng.standard_normal((n, m)),
                          alpha=1.5, beta=1.2)
            got = _copies(arrays)
            pc.compile(k, sched, flags=EXACT)(**got)
            want = _copies(arrays)
            pc.compile(k, flags=EXACT)(**want)
            np.testing.assert_array_equal(got["C"], want["C"])
            # the upper triangle is never written
            np.testing.assert_array_equal(np.triu(got["C"], 1), np.triu(arrays["C"], 1))


def test_three_products_are_summed_left_to_right():
    k3 = pc.kernel("C[i, j] += A[i, k] * B[k, j] + D[i, k] * B[k, j] + A[i, k] * E[k, j]", name="mm3",
                   C=pc.f32["M", "N"], A=pc.f32["M", "K"], B=pc.f32["K", "N"], D=pc.f32["M", "K"], E=pc.f32["K", "N"])
    assert len(contraction_form(k3.program, "S0").terms) == 3
    rng = np.random.default_rng(9)
    arrays = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in
              dict(A=(19, 23), B=(23, 40), D=(19, 23), E=(23, 40), C=(19, 40)).items()}
    got, want = _check(k3, k3.schedule().pack("S0", **SMALL), **arrays)
    np.testing.assert_array_equal(got, want)


def test_the_register_tile_and_blocks_make_room_for_every_product():
    assert register_tile(32, 1) == (8, 2) and register_tile(32, 2) == (8, 2)
    assert register_tile(16, 1) == (6, 2) and register_tile(16, 2) == (5, 2)   # 10 + 2 x (2 + 1) = 16
    one, two = default_blocking(8, terms=1), default_blocking(8, terms=2)
    assert two[2] * 2 == one[2]          # kc halves: a k block holds as many bytes


def test_auto_packs_syr2k():
    f = pc.compile(pc.kernel(syr2k), "auto")
    sched = f.schedule_for({"N": 1200, "M": 1000})[1]
    assert "pack('S1'" in str(sched)
