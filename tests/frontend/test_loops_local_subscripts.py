"""Loop kernels: a local scalar holding an affine value of loop indices and sizes, used in subscripts."""
import numpy as np
import pytest

import polyc as pc

from .loops_helpers import check_loops

rng = np.random.default_rng(15)


@pc.kernel
def flat_transpose(A: pc.f64["R", 4], out: pc.f64["F"], M: int):
    for i in range(min(R, M)):
        for j in range(4):
            base_idx = i * 4 + j
            if base_idx < F:
                out[base_idx] = A[i, j] * 2.0


def test_flat_index_local():
    a = rng.random((3, 4))
    check_loops(flat_transpose, dict(A=a, out=np.zeros(12), M=3), dict(out=2 * a.reshape(12)))


@pc.kernel
def blocks(a: pc.f64["N"], b: pc.f64["N"]):
    for i in range(N):
        gid = i // 4
        start = gid * 4
        offset = i - start
        b[i] = a[start] + a[start + offset] * 10.0 + offset


def test_chained_locals_with_floor_division():
    a = rng.random(10)
    i = np.arange(10)
    check_loops(blocks, dict(a=a, b=np.zeros(10)), dict(b=a[i // 4 * 4] + 10 * a + i % 4))


@pc.kernel
def shifted(a: pc.f64["N"], b: pc.f64["N"]):
    first = 1
    last = N - 1
    for i in range(first, last):
        k = i - 1
        b[i] = a[k] + a[k + 2]


def test_size_valued_locals_in_bounds_and_subscripts():
    a = rng.random(7)
    expected = np.zeros(7)
    expected[1:6] = a[0:5] + a[2:7]
    check_loops(shifted, dict(a=a, b=np.zeros(7)), dict(b=expected))


def test_non_affine_value_is_refused_with_its_reason():
    def product(A: pc.f64["R", "C"], out: pc.f64["F"]):
        for i in range(R):
            for j in range(C):
                base_idx = i * C + j
                out[base_idx] = A[i, j]
    _refused(product, r"`base_idx` is a kernel-local scalar .* its value `i \* C \+ j` is not affine")


def _refused(fn, match=r"kernel-local scalar"):
    with pytest.raises(pc.ParseError, match=match):
        pc.kernel(fn)


def test_local_assigned_twice_is_refused():
    def twice(a: pc.f64["N"], b: pc.f64["N"]):
        for i in range(N):
            k = i
            k = N - 1 - i
            b[i] = a[k]
    _refused(twice)


def test_conditional_assignment_is_refused():
    def cond(a: pc.f64["N"], b: pc.f64["N"]):
        for i in range(N):
            if i > 0:
                k = i - 1
            b[i] = a[k]
    _refused(cond)


def test_data_dependent_local_is_refused():
    def data(a: pc.f64["N"], b: pc.i64["N"]):
        for i in range(N):
            k = b[i]
            a[k] = 1.0
    _refused(data)


def test_use_after_its_loop_is_refused():
    def after(a: pc.f64["N"], b: pc.f64["N"]):
        for i in range(N):
            k = i
        for j in range(N):
            b[j] = a[k]
    _refused(after)


def test_use_in_a_sibling_loop_of_the_same_name_is_refused():
    def sibling(a: pc.f64["N"], b: pc.f64["N"]):
        for i in range(N):
            k = i
            b[i] = 0.0
        for i in range(N):
            b[i] = a[k]
    _refused(sibling)


def test_use_before_assignment_is_refused():
    def before(a: pc.f64["N"], b: pc.f64["N"]):
        for i in range(N):
            b[i] = a[k]
            k = i
    _refused(before)


@pc.kernel
def uniform(a: pc.f64["A"], n: int, m: int):
    for i in range(n):
        gid = i // 4
        start = gid * 4
        for j in range(m):
            a[start + j] = a[start + j] + j


def test_bounds_needing_a_floor_of_int_parameters_are_checked_per_call():
    # In bounds iff A >= 4 * floor((n - 1) / 4) + m: a floor of the per-call sizes, computed per call.
    a = rng.random(12)
    expected = a.copy()
    for i in range(9):
        for j in range(3):
            expected[i // 4 * 4 + j] += j
    check_loops(uniform, dict(a=a, n=9, m=3), dict(a=expected))
    check_loops(uniform, dict(a=a, n=8, m=8), None)             # 4 * 1 + 8 == 12: just fits
    with pytest.raises(pc.ArgumentError):
        uniform(a=a.copy(), n=9, m=5)                            # 8 + 5 > 12
    with pytest.raises(pc.ArgumentError):
        uniform(a=a.copy(), n=13, m=1)                           # 12 + 1 > 12


def test_always_out_of_bounds_is_still_refused_at_definition():
    def always(a: pc.f64[4], n: int):
        for i in range(n):
            k = i // 4 * 4 + 4
            a[k] = 1.0
    with pytest.raises(pc.OutOfBoundsError):
        pc.kernel(always)


@pc.kernel
def clamped_by_locals(A: pc.f64["N", "M"], B: pc.f64["N", "M"]):
    for i in range(N):
        for j in range(M):
            lo = max(j - 1, 0)
            hi = min(j + 1, M - 1)
            B[i, j] = A[i, lo] + A[i, j] + A[i, hi]


@pytest.mark.parametrize("schedule", (None, "auto"))
def test_a_local_holding_min_or_max_of_affine_terms_indexes(schedule):
    a = np.random.default_rng(3).random((4, 5))
    got, want = np.zeros((4, 5)), np.zeros((4, 5))
    pc.compile(clamped_by_locals, schedule)(A=a, B=got)
    clamped_by_locals.reference(A=a, B=want)
    padded = np.pad(a, ((0, 0), (1, 1)), mode="edge")
    assert np.array_equal(got, want) and np.allclose(got, padded[:, :-2] + a + padded[:, 2:])


def _two_ways(a: pc.f32["n"], out: pc.f32["n"]):
    for i in range(n):  # noqa: F821
        b = i > 3
        late = not b or i == n - 1  # noqa: F821
        out[i] = a[i]
        if b:
            out[i] = 2 * a[i]
        if late:
            out[i] += 100.0


def _data_test(a: pc.f32["n"], out: pc.f32["n"]):
    for i in range(n):  # noqa: F821
        b = a[i] > 3
        if b:
            out[i] = 1.0


def test_a_local_holding_an_affine_condition_is_an_if_test():
    # loopy's test_conditional_two_ways: `<> b = i > 3` then `if b`
    k = pc.kernel(_two_ways)
    a = np.arange(8, dtype=np.float32)
    want = np.where(np.arange(8) > 3, 2 * a, a) + np.where((np.arange(8) <= 3) | (np.arange(8) == 7), 100, 0)
    out = np.zeros(8, np.float32)
    pc.compile(k)(a=a, out=out)
    np.testing.assert_array_equal(out, want)
    with pytest.raises(pc.ParseError, match="data-dependent control flow"):
        pc.kernel(_data_test)


def _reassigned_test(a: pc.f32["n"], out: pc.f32["n"]):
    for i in range(n):  # noqa: F821
        b = i > 3
        b = i > 5
        if b:
            out[i] = a[i]


def test_a_reassigned_condition_local_says_why_it_is_no_test():
    with pytest.raises(pc.ParseError, match="local `b` does not hold one here .it is assigned more than once"):
        pc.kernel(_reassigned_test)
