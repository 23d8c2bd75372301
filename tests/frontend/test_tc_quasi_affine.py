"""Item 4: floor division and modulo by constants in subscripts, ranges, guards and extents."""
import numpy as np
import pytest

import polyc as pc

from .tc_helpers import check_all

rng = np.random.default_rng(4)


def test_upsampling_subscript_floor_division():
    k = pc.kernel("g[x] = f[(x + 1) // 2]")
    assert str(k.program.tensor("g").shape[0]) == "2*f_dim0 - 1"
    f = rng.random(5)
    check_all(k, dict(f=f), f[(np.arange(9) + 1) // 2])


def test_modulo_subscript_on_declared_input():
    k = pc.kernel("b[i] = a[i % 3] where i in 0:N", a=pc.f64[3])
    a = rng.random(3)
    check_all(k, dict(a=a, N=8), a[np.arange(8) % 3])


def test_strided_max_pooling_output_extent_is_a_floor():
    k = pc.kernel("O[h] max=! I[2 * h + k] where k in 0:2")
    assert k.program.derived_sizes and k.program.derived_sizes[0][2] == 2
    for n in (8, 9):
        a = rng.random(n)
        m = n // 2
        check_all(k, dict(I=a), np.maximum(a[0:2 * m:2], a[1:2 * m:2]))


def test_strided_convolution_extent():
    k = pc.kernel("O[h] +=! I[3 * h + k] * W[k]")
    i, w = rng.random(14), rng.random(4)
    oh = (14 - 4) // 3 + 1
    expected = np.array([i[3 * h:3 * h + 4] @ w for h in range(oh)])
    check_all(k, dict(I=i, W=w), expected)


def test_where_bound_with_division_of_a_size():
    k = pc.kernel("O[h] max=! I[2 * h + k] where h in 0:H/2, k in 0:2", I=pc.f64["H"])
    a = rng.random(7)
    check_all(k, dict(I=a), np.maximum(a[0:6:2], a[1:7:2]))


def test_guard_with_floor_division():
    k = pc.kernel("O[k, l] = select(k // 2 == l, A[k], 0.0) where l in 0:3", A=pc.f64[6])
    a = rng.random(6)
    expected = np.array([[a[kk] if kk // 2 == ll else 0.0 for ll in range(3)] for kk in range(6)])
    check_all(k, dict(A=a), expected)


def test_index_modulo_as_value():
    k = pc.kernel("O[i] = A[i] * (i % 3) + (i // 2)")
    a = rng.random(7)
    check_all(k, dict(A=a), a * (np.arange(7) % 3) + np.arange(7) // 2)


def test_non_constant_divisor_is_refused():
    with pytest.raises(pc.ParseError, match="positive integer constant"):
        pc.kernel("O[i] = A[i // N]", A=pc.f64["N"], O=pc.f64["N"])


def test_division_on_the_left_is_refused():
    with pytest.raises(pc.ParseError, match="left-hand side"):
        pc.kernel("O[i // 2] = A[i]")


def test_data_dependent_index_is_refused_as_not_affine():
    with pytest.raises(pc.ParseError, match="affine"):
        pc.kernel("O[i] = A[B[i]]")


def test_cuda_mapping_puts_both_image_axes_on_the_grid():
    # The quotient loops run once per pixel: they are not grid axes, x and y are.
    k = pc.kernel("g[x, y] = f[(x + 1) // 2, y // 2]")
    src = pc.codegen(k, target="cuda")
    assert "blockIdx.y" in src and "blockIdx.x" in src
    f = rng.random((4, 5))
    xs, ys = np.arange(7), np.arange(10)
    check_all(k, dict(f=f), f[((xs + 1) // 2)[:, None], (ys // 2)[None, :]])


def test_errors_show_divisions_not_internal_loops():
    with pytest.raises(pc.OutOfBoundsError) as info:
        pc.kernel("b[i] = a[i % 3] where i in 0:N")
    msg = str(info.value)
    assert "floor((i) / 3)" in msg and "_q" not in msg


def test_negative_numerator_floors_toward_minus_infinity():
    k = pc.kernel("g[x] = f[(x - 1) // 2 + 1] + (x - 2) % 3 where x in 0:N")
    f = rng.random(6)
    xs = np.arange(9)
    check_all(k, dict(f=f, N=9), f[(xs - 1) // 2 + 1] + (xs - 2) % 3)


def test_schedule_primitives_see_through_quotient_loops():
    k = pc.kernel("g[x, y] = f[(x + 1) // 2, y // 2]")
    s = k.schedule().tile(x=4, y=8).parallel("x_outer").vectorize("y_inner")
    f = rng.random((5, 6))
    xs, ys = np.arange(9), np.arange(12)
    np.testing.assert_allclose(pc.compile(k, s)(f=f), f[((xs + 1) // 2)[:, None], (ys // 2)[None, :]])


def test_errors_show_sizes_derived_from_others_as_their_floors():
    with pytest.raises(pc.OutOfBoundsError) as info:
        pc.kernel("B[i] = A[i // 2 + (N + 1) // 2]", A=pc.f64["N"], B=pc.f64["N"])
    msg = str(info.value)
    assert "A[floor((i) / 2) + floor((N + 1) / 2)]" in msg and "with N = 1, at i = 0" in msg
    assert "_size" not in msg
