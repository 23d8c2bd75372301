"""The isl operation budget: an expensive computation stops with IslBudgetError, never hangs."""
import islpy as isl
import pytest

import polyc as pc
from polyc.poly.islutil import isl_budget


def test_budget_exceeded_raises_typed_error_and_context_stays_usable():
    s = isl.Set("[N] -> { [i, j, k] : 0 <= i < N and 0 <= j < i and 0 <= k < j }")
    shift = isl.Map("{ [i, j, k] -> [i + 1, j, k] }")
    with pytest.raises(pc.IslBudgetError, match="more than 50 isl operations"):
        with isl_budget("growing a set", budget=50):
            for _ in range(100):
                s = s.union(s.apply(shift)).coalesce()
    assert not isl.Set("{ [x] : 0 <= x < 3 }").is_empty()


def test_genuine_isl_errors_are_not_mistaken_for_budget():
    with pytest.raises(pc.PolycError) as info:
        with isl_budget("reading garbage", budget=10**6):
            isl.Map("{ [x] -> [y] }").apply_range(isl.Map("{ [a, b] -> [c] }"))
    assert not isinstance(info.value, pc.IslBudgetError)


@pytest.mark.parametrize("value", ["1e6", "abc", "-1", "20_000_000", str(2 ** 64)])
def test_a_bad_budget_in_the_environment_is_a_typed_error_not_an_import_failure(value):
    import os
    import subprocess
    import sys
    code = ("import polyc as pc\n"
            "try:\n    pc.kernel('B[i] = A[i] * 2.0')\nexcept pc.IslBudgetError as e:\n    print('typed', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, POLYC_ISL_BUDGET=value))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("typed POLYC_ISL_BUDGET=") and "whole number" in out.stdout
