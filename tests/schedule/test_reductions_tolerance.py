"""`check_kernel` judges reassociated reductions with a tolerance that grows with their length."""
import numpy as np
import pytest

import polyc as pc
from polyc.testing import check_kernel
from polyc.testing.check import reassociates, reassociation_rtol, reduction_length


def test_reduction_length_is_the_product_of_the_reduction_extents():
    k = pc.kernel("C[i, j] +=! A[i, k, l] * B[k, l, j]")
    assert reduction_length(k, "C", {"I": 3, "J": 4, "K": 5, "L": 7}) == 35
    assert reduction_length(pc.kernel("B[i] = A[i] * 2.0"), "B", {"I": 9}) == 1


def test_only_reassociating_schedules_get_the_wider_tolerance():
    k = pc.kernel("s[i] +=! A[i, j]")
    assert reassociates(pc.compile(k, "auto").schedule)
    assert not reassociates(pc.compile(k, "auto", reassociate=False).schedule)
    assert not reassociates(k.schedule())
    assert reassociates(k.schedule(), target="cuda-emu")
    assert reassociation_rtol(1000, np.zeros(1, np.float32)) == pytest.approx(1000 * 2.0 ** -23)


def test_the_tolerance_of_a_reassociated_sum_scales_with_its_length():
    k = pc.kernel("s[i] +=! A[i, j]", name="rowsum")
    A = np.random.default_rng(0).uniform(0.5, 1.5, (4, 20000)).astype(np.float32)
    inputs = {"A": A, "s": np.zeros(4, np.float32)}

    def off_by(rel):  # a reference 'rel' away from the exact sums
        return lambda A, s: {"s": A.astype(np.float64).sum(axis=1) * (1 + rel)}
    # 20000 terms: rtol = 20000 * eps(f32) = 2.4e-3, against 2e-4 for f32 results otherwise.
    check_kernel(k, "auto", inputs=inputs, reference=off_by(1e-3))
    with pytest.raises(AssertionError, match="differ"):
        check_kernel(k, "auto", inputs=inputs, reference=off_by(1e-2))
    with pytest.raises(AssertionError, match="differ"):
        check_kernel(k, pc.compile(k, "auto", reassociate=False).schedule, inputs=inputs, reference=off_by(1e-3))
    check_kernel(k, "auto", sizes={"I": 3, "J": 20000}, dtype="f32", reference=off_by(1e-3))


def test_sizes_missing_one_of_the_kernel_sizes_are_refused_by_name():
    k = pc.kernel("s[i] +=! A[i, j] where j in 0:i+1")
    with pytest.raises(ValueError, match="A_dim1"):
        check_kernel(k, "auto", sizes={"I": 6, "J": 6})
