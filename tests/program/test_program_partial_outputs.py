"""Operators whose output they do not write everywhere (a stencil's borders), inside programs.

Called alone, such a kernel returns its output zero-filled where it does not write it; a program
composes kernels, so the consumer reads those zeros too.  The producer's one definition becomes
`select(inside, e, 0)` over the whole shape (one definition: fusion and gradients see one), or,
with several writers, a zero fill runs first."""
import numpy as np
import pytest

import polyc as pc
from polyc.testing import check_grad

blur = pc.kernel("B[x] = (A[x - 1] + A[x] + A[x + 1]) / 3.0 where x in 1:N-1",
                 A=pc.tensor["N"], B=pc.tensor["N"], name="blur")
square = pc.kernel("Y[i] = X[i] * X[i]", name="square")


@pc.kernel
def ends(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range(min(2, N)):
        B[i] = A[i] * 2.0
    for i in range(max(N - 2, 2), N):
        B[i] = A[i] * 3.0


def _composed(a):
    return square(X=blur(A=a))


@pytest.mark.parametrize("options", [{}, {"fuse": True}, {"target": "cuda-emu"}, {"blocks": 2},
                                     {"contract": True}], ids=str)
def test_a_program_reads_the_zeros_the_operator_alone_returns(options):
    @pc.program(**options)
    def smooth_square(A: pc.f64["N"]):
        return square(X=blur(A=A))
    a = np.arange(1.0, 8.0)
    want = _composed(a)
    assert want[0] == want[-1] == 0.0
    np.testing.assert_allclose(smooth_square(A=a), want, rtol=1e-14)
    np.testing.assert_allclose(smooth_square.reference(A=a), want, rtol=1e-14)


def test_the_partly_written_output_keeps_one_definition_and_differentiates():
    @pc.program
    def smooth_square(A: pc.f64["N"]):
        return square(X=blur(A=A))
    writers = [st for st in smooth_square.kernel.program.statements if st.target.tensor.endswith("_B")]
    assert len(writers) == 1 and "select" in str(writers[0].value).lower()
    a = np.random.default_rng(0).standard_normal(9)
    seed = np.random.default_rng(1).standard_normal(9)
    got = smooth_square.grad(of="out", wrt="A")(A=a, out_grad=seed)["A_grad"]
    whole = pc.compile(pc.grad(smooth_square, of="out", wrt="A"))(A=a, out_grad=seed)
    dy = 2 * blur(A=a) * seed
    want = np.zeros(9)
    for x in range(1, 8):
        want[x - 1:x + 2] += dy[x] / 3.0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(whole, want, rtol=1e-12, atol=1e-14)
    check_grad(blur, of="B", wrt="A", A=a)


def test_an_output_with_several_writers_is_zero_filled_first():
    @pc.program
    def p(A: pc.f64["N"]):
        return square(X=ends(A=A))
    a = np.arange(1.0, 8.0)
    b = np.zeros(7)
    ends(A=a, B=b)
    np.testing.assert_array_equal(p(A=a), b * b)
    assert any(st.name.endswith("zero_B") for st in p.kernel.program.statements)
