"""Programs composed of programs' kernels, loop kernels, integer products and mixed types."""
import numpy as np
import pytest

import polyc as pc
from polyc.errors import ProgramError

sq = pc.kernel("Y[i] = X[i] * X[i]", name="sq")
two = pc.kernel("B[i] = A[i] * 2.0 where i in 1:N-1\nB[0] = A[0]", name="two", A=pc.tensor["N"], B=pc.tensor["N"])


@pc.program
def inner(x: pc.f64["N"]):
    return two(A=sq(X=x))


def test_a_programs_kernel_called_twice_keeps_its_statements_in_order():
    """Each call's statements are ordered after the previous call's: the second call of a kernel
    whose own orders run 0, 1000, ... was ordered before the first call's `B[0] = A[0]`."""
    @pc.program
    def outer(x: pc.f64["N"]):
        return inner.kernel(x=inner.kernel(x=x))
    x = np.arange(3.0, 8.0)
    want = outer(x=x)
    np.testing.assert_array_equal(want, [81.0, 2048.0, 5000.0, 10368.0, 0.0])
    np.testing.assert_array_equal(outer.kernel(x=x), want)
    orders = [st.order[0] for st in outer.kernel.program.statements]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)


@pc.kernel
def cube(X: pc.f64["N"], Y: pc.f64["N"]):
    for i in range(N):
        Y[i] = X[i] * X[i] * X[i]


def test_the_reference_of_a_program_with_a_loop_kernel_passes_it_its_outputs():
    @pc.program
    def p(x: pc.f64["N"]):
        return sq(X=cube(X=x))
    x = np.arange(1.0, 4.0)
    np.testing.assert_array_equal(p.reference(x=x), x ** 6)
    np.testing.assert_array_equal(p(x=x), x ** 6)


def test_an_integer_product_is_never_a_blas_call():
    mmi = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mmi", C=pc.i64["I", "J"])
    ident = pc.kernel("Y[i, j] = X[i, j]", name="ident")

    @pc.program(vendor=True)
    def p(A: pc.f64["I", "K"], B: pc.f64["K", "J"]):
        return ident(X=mmi(A=A, B=B))
    a, b = np.full((6, 4), 0.5), np.ones((4, 3))
    np.testing.assert_array_equal(p(A=a, B=b), mmi(A=a, B=b))     # truncated after every step: 0
    assert "BLAS" not in p.explain() and "gemm" not in p.explain().lower()


def test_undeclared_float_tensors_of_one_kernel_share_a_type_in_a_program_too():
    m = pc.kernel("Y[i, j] = X[i, j] * B[i, j]", name="m")
    with pytest.raises(ProgramError, match="y is float32 where an earlier one is float64") as e:
        @pc.program
        def p(x: pc.f64["I", "J"], y: pc.f32["I", "J"]):
            return m(X=x, B=y)
    assert "return m(X=x, B=y)" in str(e.value)
