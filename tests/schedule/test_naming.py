"""Loop names given to primitives never clash with the kernel's names; isl never confuses a user
name with one of its keywords or with polyc's internal isl variables."""
from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import polyc as pc
from polyc.poly.islutil import isl_name, user_name


def _matmul(**declared):
    return pc.kernel("C[i, j] +=! A[i, k] * B[k, j] * alpha", name="mm", **declared)


def _ab(m=7, k=3, n=5):
    rng = np.random.default_rng(0)
    return rng.random((m, k)), rng.random((k, n))


@pytest.mark.parametrize("kw, kind", [
    (dict(outer="K"), "size"),          # used to change what K means: a wrong result
    (dict(inner="I"), "size"),
    (dict(outer="A"), "tensor"),
    (dict(inner="alpha"), "scalar"),
    (dict(outer="j"), "loop"),
    (dict(outer="k", inner="i_in"), "loop"),
])
def test_split_refuses_a_new_loop_name_the_kernel_already_uses(kw, kind):
    mm = _matmul()
    with pytest.raises(pc.NameClashError, match=rf"already has an? {kind} named"):
        mm.schedule().split("i", 2, **kw)


def test_split_refuses_an_index_name_and_repeated_names():
    k = pc.kernel("B[i] = A[i] * 2.0\nD[j] = B[j] + 1.0")     # one loop, named c0 (i and j share it)
    assert k.schedule().loop_names == ("c0",)
    with pytest.raises(pc.NameClashError, match="already has an index named 'i'"):
        k.schedule().split("c0", 2, outer="i")
    with pytest.raises(pc.NameClashError, match="two new loops"):
        k.schedule().tile({"c0": 2}).split("c0_inner", 2, outer="x", inner="x")
    assert issubclass(pc.NameClashError, pc.PolycError)


def test_split_with_fresh_names_and_keeping_the_loop_name_still_work():
    mm = _matmul()
    a, b = _ab()
    for s in (mm.schedule().split("i", 2, outer="io", inner="ii"),
              mm.schedule().split("i", 2, inner="i"),
              mm.schedule().tile(i=2, j=2).interchange("i_inner", "j_outer")):
        np.testing.assert_allclose(pc.compile(mm, s)(A=a, B=b, alpha=2.0), a @ b * 2.0, rtol=1e-12)


@pytest.mark.parametrize("size", ["t0", "MOD"] + [pytest.param(x, marks=pytest.mark.slow) for x in ("u1", "i0", "and_")])
def test_sizes_named_like_isl_internals_or_keywords(size):
    """Time maps use `t0, t1, ...` over the kernel's sizes, and isl names unnamed dimensions `i0`,
    `o0`, `e0`: a size of that name used to be read as equal to a time dimension (wrong results)."""
    mm = _matmul(A=pc.f64[size, "K"], B=pc.f64["K", "M"])
    a, b = _ab()
    for s in (mm.schedule().tile(i=2, j=2), mm.schedule().unroll_and_jam("i", 2, separate=True)):
        np.testing.assert_allclose(pc.compile(mm, s)(A=a, B=b, alpha=1.0), a @ b, rtol=1e-12)


def test_isl_name_is_injective_ascii_and_parses():
    names = ["i", "I", "and", "AND", "and_", "and__", "t0", "t0_", "q", "_x", "__A_0", "α", "α_", "x_", "X_data",
             "polyc_r", "i0", "o1", "e0", "min", "Infty", "rat", "exists", "mod", "MOD", "floor", "a__b", "_"]
    spelled = {n: isl_name(n) for n in names}
    assert len(set(spelled.values())) == len(names)
    for n, e in spelled.items():
        assert e.isascii() and user_name(e) == n
        isl.Set(f"[{e}] -> {{ [{e}_x, x] : 0 <= x < {e} and {e}_x = {e} }}")   # parses as a name
    assert spelled["i"] == "i" and spelled["and"] == "and_" and spelled["X_data"] == "X_data"
    assert user_name("t0") == "t0" and user_name("S0") == "S0"      # internal names pass unchanged


def test_errors_speak_user_names():
    """Sizes read back from isl (sample points in messages) are the user's names, not isl's."""
    with pytest.raises(pc.OutOfBoundsError, match=r"with MOD = \d+, at mod = \d+"):
        pc.kernel("B[mod] = A[mod + 1]", A=pc.f64["MOD"], B=pc.f64["MOD"])


from hypothesis import given, settings, strategies as st  # noqa: E402

_names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(_names, _names)
def test_isl_name_round_trips_and_never_collides(a, b):
    ea, eb = isl_name(a), isl_name(b)
    assert user_name(ea) == a and ea.isascii()
    assert (ea == eb) == (a == b)
    assert not ea.startswith("_") and ea.lower() not in {"and", "or", "mod", "min", "max", "floor", "infty"}
