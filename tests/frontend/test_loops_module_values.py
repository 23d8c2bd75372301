"""What a loop kernel reads from its module: globals are read once, when the kernel is defined
(compiled in as constants), and its reference runs with the same values; `float("inf")` and
friends are constants too."""
import numpy as np
import pytest

import polyc as pc
from polyc.errors import ParseError

SCALE = 2.0


@pc.kernel
def scaled(A: pc.f64["N"]):
    for i in range(N):
        A[i] = SCALE


@pc.kernel
def row_minimum(A: pc.f64["N", "M"], m: pc.f64["N"]):
    for i in range(N):
        m[i] = float("inf")
        for j in range(M):
            m[i] = min(m[i], A[i, j])


def test_reference_reads_the_globals_the_kernel_was_defined_with():
    global SCALE
    SCALE = 7.0
    try:
        compiled, reference = np.zeros(2), np.zeros(2)
        scaled(A=compiled)
        scaled.reference(A=reference)
        assert compiled.tolist() == reference.tolist() == [2.0, 2.0]
    finally:
        SCALE = 2.0


@pytest.mark.parametrize("schedule", (None, "auto"))
def test_float_of_a_string_is_a_constant(schedule):
    a = np.random.default_rng(0).random((3, 4))
    m = np.zeros(3)
    pc.compile(row_minimum, schedule)(A=a, m=m)
    assert np.array_equal(m, a.min(axis=1))


def test_float_of_a_word_that_is_no_number_is_a_parse_error():
    def bad(A: pc.f64["N"]):
        for i in range(N):
            A[i] = float("abc")
    with pytest.raises(ParseError, match="float\\('abc'\\) is not a number"):
        pc.kernel(bad)


@pc.kernel
def axpy(X: pc.f64["N"], Y: pc.f64["N"], alpha: float = 2.5, beta: float = 1.0):
    for i in range(N):
        Y[i] = alpha * X[i] + beta * Y[i]


@pc.kernel
def increments(A: pc.f64["N"], T: int = 3):
    for t in range(T):
        for i in range(N):
            A[i] = A[i] + 1.0


@pytest.mark.parametrize("given", [{}, {"alpha": 1.0}, {"beta": 0.0}, {"alpha": -1.0, "beta": 2.0}])
def test_parameters_left_out_take_their_python_defaults(given):
    x = np.arange(3.0)
    compiled, reference = np.ones(3), np.ones(3)
    axpy(X=x, Y=compiled, **given)
    axpy.reference(X=x, Y=reference, **given)
    alpha, beta = given.get("alpha", 2.5), given.get("beta", 1.0)
    assert compiled.tolist() == reference.tolist() == (alpha * x + beta).tolist()


def test_an_int_parameter_left_out_takes_its_default():
    a, r = np.zeros(2), np.zeros(2)
    increments(A=a)
    increments.reference(A=r)
    assert a.tolist() == r.tolist() == [3.0, 3.0]
    increments(A=a, T=2)
    assert a.tolist() == [5.0, 5.0]


def test_defaults_of_the_wrong_kind_are_refused():
    def array_default(A: pc.f64["N"] = None):
        for i in range(N):
            A[i] = 1.0

    def text_default(A: pc.f64["N"], alpha: float = "2"):
        for i in range(N):
            A[i] = alpha
    with pytest.raises(ParseError, match="array parameter `A` cannot have a default"):
        pc.kernel(array_default)
    with pytest.raises(ParseError, match="the default of `alpha` must be a number"):
        pc.kernel(text_default)
