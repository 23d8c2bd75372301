"""One contraction analysis (`polyc.poly.contraction`) for the CPU packing and the CUDA tiling."""
from __future__ import annotations

import polyc as pc
from polyc.poly.contraction import Contraction, contraction_form, loop_groups, tiled_contraction
from polyc.schedule import packing


def _last(k):
    return k.program.statements[-1].name


def test_packing_uses_the_shared_analysis():
    assert packing.contraction_form is contraction_form and packing.Contraction is Contraction


def test_matmul_is_both_forms():
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]")
    c = contraction_form(k.program, _last(k))
    assert isinstance(c, Contraction) and (c.m, c.n, c.k) == (("i",), ("j",), ("k",))
    t = tiled_contraction(k.model, _last(k))
    assert t is not None and (t.i, t.j, t.k, t.batch) == (("i",), ("j",), ("k",), None)
    assert (t.a.tensor, t.b.tensor) == ("A", "B")


def test_batched_and_transposed_operands():
    k = pc.kernel("C[b, i, j] +=! B[b, k, j] * A[b, i, k]")
    t = tiled_contraction(k.model, _last(k))
    assert t is not None and t.batch == "b" and (t.a.tensor, t.b.tensor) == ("A", "B")
    assert isinstance(contraction_form(k.program, _last(k)), Contraction)


def test_the_forms_differ_where_their_kernels_differ():
    # any combination of two reads tiles on the GPU; packing needs a product
    k = pc.kernel("C[i, j] +=! max(A[i, k], B[k, j])")
    assert tiled_contraction(k.model, _last(k)) is not None
    assert "product" in contraction_form(k.program, _last(k))
    # several loops per group: packed (im2col) on the CPU, an implicit matrix product on the GPU
    conv = pc.kernel("Y[n, f, h, w] +=! X[n, c, h + kh, w + kw] * K[f, c, kh, kw]")
    assert isinstance(contraction_form(conv.program, _last(conv)), Contraction)
    t = tiled_contraction(conv.model, _last(conv))
    assert t is not None and t.grouped and (t.a.tensor, t.b.tensor) == ("K", "X")
    assert (t.i, t.j, t.k, t.batch) == (("f",), ("n", "h", "w"), ("c", "kh", "kw"), None)
    # a target loop neither factor reads (a broadcast) is no product
    bc = pc.kernel("C[i, j, l] +=! A[i, k] * B[k, j]", A=pc.f32["I", "K"], B=pc.f32["K", "J"], C=pc.f32["I", "J", "L"])
    assert tiled_contraction(bc.model, _last(bc)) is None


def test_reading_the_target_or_a_triangle_is_no_tiled_contraction():
    k = pc.kernel("C[i, j] += C[i, k] * B[k, j]", C=pc.f64["N", "N"], B=pc.f64["N", "N"])
    assert tiled_contraction(k.model, _last(k)) is None
    assert "own target" in contraction_form(k.program, _last(k))
    tri = pc.kernel("C[i, j] +=! A[i, k] * B[k, j] where k in 0:i")
    assert tiled_contraction(tri.model, _last(tri)) is None


def test_loop_groups_classify_by_target_and_factors():
    k = pc.kernel("C[b, i, j] +=! A[b, i, k] * B[k, j]")
    st = k.program.statements[-1]
    a, b = st.value.accesses()
    g = loop_groups(st, a, b)
    assert (g.left_only, g.right_only, g.reduction, g.unclassified) == (("b", "i"), ("j",), ("k",), ())
