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
