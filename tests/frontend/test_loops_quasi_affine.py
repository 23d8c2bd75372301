"""Loop kernels: floor division and modulo by positive constants in subscripts, `if` tests and bounds."""
import numpy as np
import pytest

import polyc as pc

from .loops_helpers import check_loops

rng = np.random.default_rng(14)


@pc.kernel
def upsample(f: pc.f64["M"], g: pc.f64["N"]):
    for x in range(min(N, 2 * M - 1)):
        g[x] = f[(x + 1) // 2]


def test_floor_division_subscript():
    f = rng.random(5)
    check_loops(upsample, dict(f=f, g=np.zeros(9)), dict(g=f[(np.arange(9) + 1) // 2]))


@pc.kernel
def negative_floor(f: pc.f64[6], g: pc.f64["N"]):
    for x in range(min(N, 8)):
        g[x] = f[(x - 3) // 2 + 2] + f[(x - 3) % 4]


def test_negative_numerators_floor_like_python():
    f = rng.random(6)
    x = np.arange(8)
    check_loops(negative_floor, dict(f=f, g=np.zeros(8)), dict(g=f[(x - 3) // 2 + 2] + f[(x - 3) % 4]))


@pc.kernel
def modulo(A: pc.f64[3], B: pc.f64["N"]):
    for i in range(N):
        B[i] = A[i % 3] * (i % 2) + i // 4


def test_modulo_subscript_and_index_values():
    a = rng.random(3)
    i = np.arange(10)
    check_loops(modulo, dict(A=a, B=np.zeros(10)), dict(B=a[i % 3] * (i % 2) + i // 4))


@pc.kernel
def guard(A: pc.f64["N"], B: pc.f64["N", "L"]):
    for k in range(N):
        for l in range(L):
            if k // 2 == l:
                B[k, l] = A[k]
            else:
                B[k, l] = -1.0


def test_if_test_with_floor_division():
    a = rng.random(6)
    expected = np.array([[a[k] if k // 2 == l else -1.0 for l in range(3)] for k in range(6)])
    check_loops(guard, dict(A=a, B=np.zeros((6, 3))), dict(B=expected))


@pc.kernel
def half_range(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range((N + 1) // 2):
        B[2 * i] = A[2 * i] * 2.0
    for i in range(N // 2):
        for j in range(i // 3, (i + 1) // 2 + 1):
            B[2 * i + 1] += A[j]


@pytest.mark.parametrize("n", [7, 8])
def test_loop_bounds_with_floor_division(n):
    a = rng.random(n)
    b = np.zeros(n)
    b[0::2] = 2 * a[0::2]
    for i in range(n // 2):
        b[2 * i + 1] = sum(a[j] for j in range(i // 3, (i + 1) // 2 + 1))
    check_loops(half_range, dict(A=a, B=np.zeros(n)), dict(B=b))


@pc.kernel
def reduce_pairs(A: pc.f64["N"], B: pc.f64["M"]):
    for i in range(min(N, 2 * M)):
        B[i // 2] += A[i]


def test_floor_division_in_the_target():
    a = rng.random(8)
    check_loops(reduce_pairs, dict(A=a, B=np.zeros(4)), dict(B=a[0::2] + a[1::2]))


def test_divisor_must_be_a_positive_constant():
    def bad(A: pc.f64["N"], B: pc.f64["N"]):
        for i in range(N):
            B[i] = A[i // N]

    with pytest.raises(pc.ParseError, match="positive integer constant"):
        pc.kernel(bad)

    def zero(A: pc.f64["N"], B: pc.f64["N"]):
        for i in range(N):
            B[i] = A[i % -2]

    with pytest.raises(pc.ParseError, match="positive integer constant"):
        pc.kernel(zero)


def test_quotients_are_iterators_fixed_by_two_constraints():
    st = upsample.program.statements[0]
    assert st.iterators == ("x", "_q0") and st.divisions == ("_q0",)
    assert [str(c.expr) for c in st.domain[0][-2:]] == ["-2*_q0 + x + 1", "2*_q0 - x"]


@pc.kernel
def mixed(A: pc.f64["N"], B: pc.f64["N"], C: pc.f64[3, "N"]):
    for i in range(N - 1, -1, -1):
        for j in range(i % 3, min(N, i // 2 + 3), 2):
            s = A[j] * 2.0
            if ((i + j) // 2) % 2 == 0:
                s += A[(i + j) // 2]
            B[i] += s
            C[i % 3, i] = s


def test_nested_quotients_with_locals_descending_and_strided_loops():
    a = rng.random(9)
    b, c = np.zeros(9), np.zeros((3, 9))
    for i in range(8, -1, -1):
        for j in range(i % 3, min(9, i // 2 + 3), 2):
            s = a[j] * 2.0
            if ((i + j) // 2) % 2 == 0:
                s += a[(i + j) // 2]
            b[i] += s
            c[i % 3, i] = s
    check_loops(mixed, dict(A=a, B=np.zeros(9), C=np.zeros((3, 9))), dict(B=b, C=c))


@pc.kernel
def strided(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range(0, N, 2):
        if (i % 4) < 2 and -i // 3 > -5:
            B[i // 2] = A[i] + A[(N - 1 - i) // 2]


def test_strided_loop_with_quotients_and_a_modulo_inequality():
    a = rng.random(11)
    b = np.zeros(11)
    for i in range(0, 11, 2):
        if (i % 4) < 2 and -i // 3 > -5:
            b[i // 2] = a[i] + a[(10 - i) // 2]
    check_loops(strided, dict(A=a, B=np.zeros(11)), dict(B=b))


@pc.kernel
def every_other(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range(0, N, 2):
        B[i] = A[i] + 1.0


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_a_strided_loop_that_runs_once_or_not_at_all_after_auto(n):
    """At N <= 2 `"auto"` leaves no loop around the statement; the check of the generated loops
    spelled that as `[pc_call, ]`, which isl refused."""
    check_loops(every_other, {"A": np.arange(n, dtype=float), "B": np.zeros(n)})
