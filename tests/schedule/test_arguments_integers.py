"""Every integer argument of every schedule primitive is a real int within bounds that keep the
generated code's 64-bit loop arithmetic from overflowing; anything else is a typed error naming
the argument (before: `tile(i=2**64)` returned zeros, `shift(.., 2**63 - 1)` was wrong code and
`shift(.., 2**70)` hung in isl)."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.errors import PolycError, ScheduleArgumentError
from polyc.schedule.integers import MAX_SCHEDULE_INT, MAX_UNROLL_FACTOR, schedule_int

matmul = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")
shifted = pc.kernel("B[i] = A[i] * 2.0; C[i] = B[i] + 1.0", name="two")
BAD_TYPES = [True, 2.0, "4", None, [4]]
HUGE = [2**64, 2**63 - 1, 2**70, -(2**63), MAX_SCHEDULE_INT + 1]


def calls(value):
    """Every primitive's integer argument, set to `value`: (argument named in the error, thunk)."""
    s = matmul.schedule()
    t = shifted.schedule()
    return [
        ("tile size of 'i'", lambda: s.tile(i=value)),
        ("tile size of 'j'", lambda: s.tile({"j": value})),
        ("split factor", lambda: s.split("k", value)),
        ("skew factor", lambda: s.skew("j", "i", value)),
        ("shift amount", lambda: t.shift("S1", "i", value)),
        ("unroll factor", lambda: s.unroll("k", value)),
        ("unroll-and-jam factor", lambda: s.unroll_and_jam("i", value)),
        ("peel's front", lambda: s.peel("i", value)),
        ("peel's back", lambda: s.peel("i", 1, value)),
        ("'s mr", lambda: s.pack("S1", mr=value)),
        ("'s nv", lambda: s.pack("S1", nv=value)),
        ("'s kc", lambda: s.pack("S1", kc=value)),
        ("'s mc", lambda: s.pack("S1", mc=value)),
        ("'s nc", lambda: s.pack("S1", nc=value)),
    ]


@pytest.mark.parametrize("value", HUGE)
def test_huge_integers_are_refused_with_the_argument_named(value):
    for what, call in calls(value):
        with pytest.raises(ScheduleArgumentError, match="could overflow") as info:
            call()
        assert what in info.value.argument, (what, info.value.argument)
        assert isinstance(info.value, PolycError)


@pytest.mark.parametrize("value", BAD_TYPES)
def test_non_int_arguments_are_refused(value):
    for what, call in calls(value):
        if value is None and what.startswith("'s") or value is None and what == "unroll factor":
            continue  # None means "default" for pack's blocking and "fully" for unroll
        with pytest.raises(ScheduleArgumentError, match="must be an int") as info:
            call()
        assert what in info.value.argument


def test_lower_bounds_are_typed_errors():
    s = matmul.schedule()
    for call in (lambda: s.tile(i=0), lambda: s.split("i", -1), lambda: s.skew("j", "i", 0),
                 lambda: s.peel("i", -1), lambda: s.unroll("k", 0), lambda: s.pack("S1", mr=0),
                 lambda: s.unroll_and_jam("i", MAX_UNROLL_FACTOR + 1)):
        with pytest.raises(ScheduleArgumentError):
            call()


def test_values_at_the_bound_still_give_correct_code():
    """The largest allowed values are accepted and the compiled code is right (no wraparound)."""
    a = np.arange(6.0)
    s = shifted.schedule().shift("S1", "i", MAX_SCHEDULE_INT).shift("S0", "i", MAX_SCHEDULE_INT)
    out = pc.compile(shifted, s)(A=a)
    np.testing.assert_array_equal(out, a * 2.0 + 1.0)
    A, B = np.arange(12.0).reshape(3, 4), np.arange(20.0).reshape(4, 5)
    t = matmul.schedule().tile(i=MAX_SCHEDULE_INT, j=MAX_SCHEDULE_INT)
    np.testing.assert_allclose(pc.compile(matmul, t)(A=A, B=B), A @ B)


def test_validator_contract():
    assert schedule_int(-5, "x") == -5
    with pytest.raises(ScheduleArgumentError, match="x must be a positive int"):
        schedule_int(0, "x", minimum=1)


def test_tile_sizes_must_be_a_mapping():
    for sizes in (5, "i", [("i", 4)]):
        with pytest.raises(ScheduleArgumentError, match="keywords"):
            matmul.schedule().tile(sizes)


def test_compounded_skews_beyond_the_map_bound_are_refused():
    # Each factor is within bounds, but three skews add up to a coefficient of about 3 * 2**31.
    k = pc.kernel("B[i, j] = A[i, j] * 2.0")
    s = k.schedule().skew("j", "i", 2**31 - 1).skew("j", "i", 2**31 - 1)   # 2**32 - 2: still fits
    a = np.random.default_rng(0).random((3, 4))
    np.testing.assert_allclose(pc.compile(k, s)(A=a), 2 * a)
    with pytest.raises(ScheduleArgumentError, match=r"coefficients beyond \+-2\*\*32"):
        s.skew("j", "i", 2**31 - 1)


def test_flags_names_and_sizes_that_would_be_read_wrongly_are_refused():
    """`reduction="no"` is truthy (it asked for a reassociated reduction); a size given twice kept
    the keyword's; a loop named like a statement could never be addressed (`distribute("S1")`
    means the statement)."""
    from polyc.errors import NameClashError
    s = matmul.schedule()
    for call in (lambda: s.parallel("k", reduction="no"), lambda: s.vectorize("k", reduction=1)):
        with pytest.raises(ScheduleArgumentError, match="reduction must be True or False"):
            call()
    with pytest.raises(ScheduleArgumentError, match="tile gives loop 'i' a size twice"):
        s.tile({"i": 2}, i=4)
    with pytest.raises(NameClashError, match="already has a statement named 'S1'"):
        s.split("i", 2, outer="S1")
    assert s.parallel("k", reduction=True).history == ("parallel('k', reduction=True)",)
