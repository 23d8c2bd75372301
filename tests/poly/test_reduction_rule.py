"""One reduction rule (`polyc.poly.reduction`): an update is a reduction only when its value does
not read its target.  `A[i] += A[i] * B[k]` is an update whose order is its meaning."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.errors import IllegalScheduleError
from polyc.poly.reduction import is_reduction_dependence, is_reduction_update
from polyc.schedule.gpu import carried_levels


def scaled(A: pc.f64["N"], B: pc.f64["K"]):
    for i in range(N):  # noqa: F821
        for k in range(K):  # noqa: F821
            A[i] += A[i] * B[k]


def summed(A: pc.f64["N"], B: pc.f64["K"]):
    for i in range(N):  # noqa: F821
        for k in range(K):  # noqa: F821
            A[i] += B[k]


def _self_dependences(kernel):
    st = kernel.program.statements[0]
    return st, [d for d in kernel.dependences() if d.source == d.sink == st.name and d.array == st.target.tensor]


def test_an_update_that_reads_its_target_is_no_reduction():
    k = pc.kernel(scaled)
    st, deps = _self_dependences(k)
    assert st.update == "+" and deps
    assert not is_reduction_update(st)
    assert not any(is_reduction_dependence(k.program, d) for d in deps)


def test_an_update_that_does_not_read_its_target_is_a_reduction():
    k = pc.kernel(summed)
    st, deps = _self_dependences(k)
    assert is_reduction_update(st) and all(is_reduction_dependence(k.program, d) for d in deps)


def test_the_gpu_mapping_counts_the_scaling_chain_as_a_real_dependence():
    """The CUDA mapping's old rule (an update of its own target is a reduction chain) put the k
    loop of `A[i] += A[i] * B[k]` among the loops carrying only a reduction."""
    k = pc.kernel(scaled)
    s = k.schedule()
    kdim = s.dim_index("k")
    carried, other = carried_levels(s, k.dependences())
    assert kdim in carried["S0"] and kdim in other["S0"]
    carried, other = carried_levels(pc.kernel(summed).schedule(), pc.kernel(summed).dependences())
    assert kdim in carried["S0"] and kdim not in other["S0"]


def test_no_reduction_strategy_applies_and_results_stay_exact():
    k = pc.kernel(scaled)
    with pytest.raises(IllegalScheduleError):
        k.schedule().parallel("k", reduction=True)
    with pytest.raises(IllegalScheduleError):
        k.schedule().vectorize("k", reduction=True)
    a, b = np.linspace(1, 2, 5), np.linspace(0.1, 0.3, 7)
    want = k.reference(A=a.copy(), B=b)
    f = pc.compile(k, target="cuda-emu")
    assert not any("reduction_parallel" in d.marks for d in f.schedule.dims)
    np.testing.assert_allclose(f(A=a.copy(), B=b), want, rtol=1e-12)
