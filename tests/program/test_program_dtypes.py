"""An operator's result inside a program has the type the kernel alone gives it for those inputs
(README "Types"): a float result of integer inputs stays float, integer arithmetic stays in its
integer type (wrapping as numpy's), and buffers are sized and viewed in those types."""
import numpy as np

import polyc as pc
from kernels.linalg import matmul
from kernels.program_ops import add, gelu, matmul_nt, scale


def test_a_float_operator_on_integer_inputs_is_float():
    @pc.program
    def half(X: pc.i32["M", "N"]):
        return scale.kernel(X=X, alpha=0.5)

    @pc.program
    def g(X: pc.i64["M", "N"]):
        return gelu.kernel(X=X)

    x = np.arange(-3, 3, dtype=np.int32).reshape(2, 3)
    got = half(X=x)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, pc.compile(scale.kernel)(X=x, alpha=0.5))
    np.testing.assert_array_equal(got, half.reference(X=x))
    xl = x.astype(np.int64)
    np.testing.assert_allclose(g(X=xl), pc.compile(gelu.kernel)(X=xl), rtol=1e-15)


def test_integer_inputs_of_an_untyped_program_stay_integers():
    @pc.program
    def addp(A: pc.tensor["M", "N"], B: pc.tensor["M", "N"]):
        return add.kernel(A=A, B=B)

    a = np.array([[2 ** 40 + 1, 3]], np.int64)
    b = np.array([[2 ** 53, 1]], np.int64)
    got = addp(A=a, B=b)
    assert got.dtype == np.int64 and got.tolist() == [[2 ** 53 + 2 ** 40 + 1, 4]]
    u = np.full((2, 3), 200, np.uint8)
    v = np.full((3, 2), 2, np.uint8)
    for vendor in (False, True):
        @pc.program(vendor=vendor)
        def mm(A: pc.tensor["M", "K"], B: pc.tensor["K", "N"]):
            return matmul.kernel(A=A, B=B)
        got = mm(A=u, B=v)
        assert got.dtype == np.uint8 and (got == np.uint8(1200 % 256)).all()   # wraps, as the kernel alone


def test_intermediates_of_other_widths_get_buffers_of_their_own_size():
    twox = pc.kernel("Y[i, j] = X[i, j] + X[i, j]", name="twox")

    @pc.program
    def p(A: pc.tensor["M", "K"], B: pc.tensor["K", "N"]):
        return twox(X=matmul.kernel(A=A, B=B))

    for dt in (np.int32, np.uint8, np.float32, np.int64):
        a, b = np.ones((4, 3), dt), np.ones((3, 5), dt)
        got = p(A=a, B=b)
        assert got.dtype == dt and (got == 6).all()
    widen = pc.kernel("Y[i, j] = X[i, j] * 1.0", X=pc.f32["M", "N"], Y=pc.f64["M", "N"], name="widen")
    narrow = pc.kernel("Y[i, j] = X[i, j] * 1.0", X=pc.f64["M", "N"], Y=pc.f32["M", "N"], name="narrow")

    @pc.program
    def q(X: pc.f32["M", "N"]):
        return narrow(X=matmul_nt.kernel(A=widen(X=X), B=widen(X=X)))

    x = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    xd = x.astype(np.float64)
    np.testing.assert_allclose(q(X=x), (xd @ xd.T).astype(np.float32), rtol=1e-6)
