"""Tensor Comprehensions-style range and shape inference."""
import numpy as np
import pytest

import polyc as pc
from polyc.errors import ShapeInferenceError


def shapes(k):
    return {t.name: tuple(str(e) for e in t.shape) for t in k.program.tensors}


def test_matmul_sizes_are_named_after_indices():
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]")
    assert shapes(k) == {"C": ("I", "J"), "A": ("I", "K"), "B": ("K", "J")}


def test_conv_output_shape_shrinks_by_the_filter():
    k = pc.kernel("O[n, o, h, w] +=! I[n, c, h + kh, w + kw] * W[o, c, kh, kw]")
    h_out = shapes(k)["O"][2]
    assert h_out.endswith("- KH + 1")


def test_stencil_range_is_the_largest_in_bounds():
    k = pc.kernel("B[i] = A[i] + A[i + 1]")
    assert shapes(k)["B"] == ("I - 1",)


def test_trace_ties_both_dimensions():
    assert shapes(pc.kernel("t +=! A[i, i]")) == {"t": (), "A": ("I", "I")}


def test_declared_output_fixes_the_range():
    k = pc.kernel("B[i] = A[i]", B=pc.f64["N"])
    assert shapes(k) == {"B": ("N",), "A": ("N",)}


def test_uninferable_range_asks_for_where():
    # (A strided read like X[i, 2 * j + q] is inferable now: J = floor(X_dim1 / 2), a derived size.)
    with pytest.raises(pc.ShapeInferenceError, match="where i in lo:hi"):
        pc.kernel("O[i] = A[i + 1] + B[i + 2]")


def test_a_reduction_over_a_range_that_depends_on_the_row_keeps_every_row():
    # Tensor Comprehensions' meaning: O has an element for every i, the identity where k's range
    # is empty (rows i >= K), not min(M, K) rows.
    k = pc.kernel("O[i] +=! A[i, k] where k in i:K")
    a = np.arange(15.0).reshape(5, 3)
    for schedule in (None, "auto"):
        assert pc.compile(k, schedule)(A=a).tolist() == [a[i, i:].sum() for i in range(5)]
    strict = pc.kernel("O[i] +=! A[i, k] where k in i+1:N", A=pc.f64["N", "N"])
    b = np.arange(16.0).reshape(4, 4)
    assert strict(A=b).tolist() == [b[i, i + 1:].sum() for i in range(4)]


def test_an_index_no_read_bounds_asks_for_its_range():
    with pytest.raises(ShapeInferenceError, match="no read bounds it from above"):
        pc.kernel("O[i] +=! A[i + k] where k in 0:T", T=pc.i64)
    with pytest.raises(ShapeInferenceError, match="where i in lo:hi"):
        pc.kernel("B[i] = select(0 <= i - 1 < N, A[i - 1], 0.0)", A=pc.f64["N"])


def test_a_tensor_read_then_updated_takes_its_shape_from_the_call():
    """`A` is passed in and updated: its writes are no range of their own (the index was 'cannot
    infer'); its extent is the call's, as an input's.  A write range of its own still sizes it."""
    import numpy as np
    import polyc as pc
    k = pc.kernel("B[i] = A[i] + 1.0\nA[i] = B[i] * 2.0")
    a = np.arange(1.0, 4.0)
    want = a.copy()
    k.reference(A=want)
    k(A=a)
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(a, [4.0, 6.0, 8.0])
    ranged = pc.kernel("A[i] = A[i] * 2.0 where i in 1:N")
    assert [str(d) for d in ranged.program.tensor("A").shape] == ["N"]
    with pytest.raises(ShapeInferenceError, match="cannot infer the range of index 'i'"):
        pc.kernel("A[i, j] = A[i, j] + A[j, i]")


def test_a_reduction_index_of_several_declared_extents_takes_their_intersection():
    # TC's graph2 (test_tc_mapper_bugs.cc MinInUpperBound): h runs below H and below R - KH + 1
    k = pc.kernel("""
        O[h] +=! J[h + r_k] * W1[r_k]
        Out[c] +=! I[c, h] * O[h]
    """, outputs=["Out"], I=pc.f64["C", "H"], J=pc.f64["R"], W1=pc.f64["KH"])
    rng = np.random.default_rng(3)
    for h, r in ((5, 7), (6, 5), (3, 9)):           # either bound may be the smaller
        i, j, w = rng.random((2, h)), rng.random(r), rng.random(3)
        o = np.array([j[x:x + 3] @ w for x in range(r - 2)])
        n = min(h, r - 2)
        want = i[:, :n] @ o[:n]
        np.testing.assert_allclose(pc.compile(k)(I=i, J=j, W1=w), want, rtol=1e-12)
        np.testing.assert_allclose(k.reference(I=i, J=j, W1=w), want, rtol=1e-12)
    # an output's index would size the output by their minimum: refused, saying so
    with pytest.raises(pc.ShapeInferenceError, match="ranges it over the smaller extent"):
        pc.kernel("Out[h] = I[h] * J[h]", I=pc.f64["H"], J=pc.f64["R"])
