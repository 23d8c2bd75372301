"""Arguments of schedule primitives: one rule for loop names, given or read back, and plain
refusals for what cannot be a tile, a factor or a pack blocking."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.schedule.auto import auto_schedule

clamped = pc.kernel("B[x] = A[max(x - 1, 0)] + 2.0 * A[min(x + 1, N - 1)] where x in 0:N", name="clamp1d",
                    A=pc.f64["N"])


@pytest.mark.parametrize("make", [lambda k: k.schedule().tile(_max0=2), lambda k: auto_schedule(k),
                                  lambda k: auto_schedule(k).parallel("x"),
                                  lambda k: k.schedule().tile(_max0=2).reverse("_max0_inner")])
def test_schedules_of_polyc_made_loops_read_back(make):
    """A clamped subscript's loops (`_max0`, `_min1`) and those tiling makes of them are the
    kernel's own names: `from_json` reads `to_json`'s output back."""
    s = make(clamped)
    again = pc.Schedule.from_json(clamped, s.to_json())
    a = np.arange(7.0)
    np.testing.assert_array_equal(pc.compile(clamped, again)(A=a), pc.compile(clamped, s)(A=a))


@pytest.mark.parametrize("name", ["for", "int", "__x", "_mine", "polyc_x", "\u00efx"])
def test_a_new_loop_name_follows_the_rule_saved_schedules_are_read_with(name):
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]")
    with pytest.raises(pc.NameClashError, match="cannot name a new loop"):
        mm.schedule().split("i", 2, outer=name)
    s = mm.schedule().split("i", 2, outer="rows")
    assert pc.Schedule.from_json(mm, s.to_json()).loop_names == s.loop_names


def test_tile_by_a_dict_needs_loop_names():
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]")
    with pytest.raises(pc.ScheduleArgumentError, match="3 is no loop name"):
        mm.schedule().tile({3: 2})


def test_a_zero_skew_is_refused_in_one_plain_sentence():
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]")
    with pytest.raises(pc.ScheduleArgumentError) as e:
        mm.schedule().skew("j", "i", 0)
    assert str(e.value).count("not 0") == 1 and "overflow" not in str(e.value)


@pytest.mark.parametrize("blocking", [dict(mr=3), dict(nv=3), dict(mr=5, nv=1)])
def test_pack_default_cache_blocks_round_to_the_register_tile_asked_for(blocking):
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", A=pc.f32["M", "K"], B=pc.f32["K", "N"])
    s = mm.schedule().pack("S1", **blocking)
    plan = s.packing[0] if isinstance(s.packing, tuple) else next(iter(s.packing.values()))
    assert plan.mc % plan.mr == 0
    a = np.random.default_rng(0).standard_normal((37, 29)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((29, 41)).astype(np.float32)
    np.testing.assert_allclose(pc.compile(mm, s)(A=a, B=b), a @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(pc.ScheduleArgumentError, match="mc must be a multiple of mr"):
        mm.schedule().pack("S1", mr=8, mc=7)


def test_a_skewed_strip_mined_trace_on_cuda_emu():
    """A legal unmapped schedule whose thread loop starts at `c ? 0 : e` (fixed in codegen)."""
    k = pc.kernel("t +=! A[i, i]")
    s = k.schedule().split("i", 2).skew("i_inner", "i_outer", 1).interchange("i_outer", "i_inner")
    a = np.arange(36.0).reshape(6, 6)
    assert pc.compile(k, s, target="cuda-emu")(A=a) == np.trace(a)
