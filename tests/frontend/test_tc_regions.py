"""Item 2: intermediates of chained stencils cover the region actually written (negative offsets)."""
import numpy as np
import pytest

import polyc as pc

from .tc_helpers import check_all

rng = np.random.default_rng(3)


def test_chained_stencil_with_negative_offset():
    k = pc.kernel("B[x] = A[x - 1] + A[x + 1]\nC[x] = B[x] * 2.0")
    a = rng.random(9)
    expected = np.zeros(8)  # C covers x in [1, N - 1); element 0 is not written (zero-filled)
    expected[1:] = (a[:-2] + a[2:]) * 2.0
    check_all(k, dict(A=a), expected)


def test_unsharp_mask_2d_chain():
    k = pc.kernel("""
        bx[x, y] = (I[x - 1, y] + I[x, y] + I[x + 1, y]) / 3.0
        by[x, y] = (bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) / 3.0
        O[x, y] = 2.0 * I[x, y] - by[x, y]
    """)
    img = rng.random((7, 6))
    bx = (img[:-2] + img[1:-1] + img[2:]) / 3.0
    by = (bx[:, :-2] + bx[:, 1:-1] + bx[:, 2:]) / 3.0
    expected = np.zeros((6, 5))
    expected[1:, 1:] = 2.0 * img[1:-1, 1:-1] - by
    check_all(k, dict(I=img), expected)


def test_region_is_in_the_output_shape():
    k = pc.kernel("B[x] = A[x - 1] + A[x + 1]\nC[x] = B[x] * 2.0")
    assert str(k.program.tensor("C").shape[0]) == "A_dim0 - 1"
    assert any(str(c) == "x - 1 >= 0" for c in k.program.statements[1].domain[0])


def test_shape_covers_every_statement_writing_the_tensor():
    # loopy's strided temporary: two statements interleave the writes of t.
    k = pc.kernel("t[2*j] = j where j in 0:8\nt[2*j+1] = j where j in 0:8\nout[i] = t[2*i] + t[2*i + 1] where i in 0:8")
    assert str(k.program.tensor("t").shape[0]) == "16"
    check_all(k, {}, 2.0 * np.arange(8))


def test_pure_definition_takes_its_region_from_the_update_that_follows():
    # Halide's conv_layer: `conv = bias` has no read that ranges x; the += update does.
    k = pc.kernel("""
        conv[c, x] = bias[c]
        conv[c, x] += w[c, k] * inp[x + k] where k in 0:3
        relu[c, x] = fmax(0.0, conv[c, x])
    """, relu=pc.f64["C", "X"], inp=pc.f64["X + 2"], bias=pc.f64["C"], w=pc.f64["C", 3])
    bias, w, inp = rng.standard_normal(2), rng.standard_normal((2, 3)), rng.standard_normal(8)
    conv = bias[:, None] + np.stack([np.convolve(inp, w[c][::-1], "valid") for c in range(2)])
    check_all(k, dict(bias=bias, w=w, inp=inp), np.maximum(conv, 0.0))


def test_range_nobody_gives_is_still_an_error():
    with pytest.raises(pc.ShapeInferenceError, match="cannot infer the range of index 'x'"):
        pc.kernel("f[x] = 2.0\ng[x] = f[x] + 1.0")
