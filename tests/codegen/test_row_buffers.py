"""Intermediates that live inside one iteration of a parallel loop (`schedule.storage.row_buffers`)
are kept per iteration in a row buffer on the stack; results are the same on 1 and 2 threads,
with rows too long for the stack falling back to the full temporary, and a temporary read across
iterations is never given one."""
import numpy as np
import pytest

import polyc as pc
from polyc.api import _resolve_schedule, _resolve_target
from polyc.schedule.storage import row_buffers

SOFTMAX = pc.kernel("""
    m[i] max=! X[i, j]
    e[i, j] = exp(X[i, j] - m[i])
    s[i] +=! e[i, j]
    Y[i, j] = e[i, j] / s[i]
""", name="softmax_rows")


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_the_row_buffer_is_proven_and_emitted():
    sched = _resolve_schedule(SOFTMAX, "auto", _resolve_target("c"), None)
    assert row_buffers(sched) == {"e": (0, "i")}
    src = pc.codegen(SOFTMAX, sched)
    assert "pc_row_" in src and src.count("pc_row_t_e[n_J];") == 1


@pytest.mark.parametrize("shape, dtype", [((37, 129), np.float32), ((9, 8193), np.float64)],
                         ids=["fits", "too-long-for-the-stack"])
def test_results_with_row_buffers(threads, shape, dtype):
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    got = pc.compile(SOFTMAX, schedule="auto")(X=x)
    np.testing.assert_allclose(got, _softmax(x.astype(np.float64)), rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_a_temporary_read_across_iterations_gets_no_row_buffer():
    k = pc.kernel("""
        t[i, j] = X[i, j] * 2.0
        Y[i, j] = t[i, j] + t[i - 1, j] where i in 1:N
    """, X=pc.f64["N", "M"], name="across_rows", outputs=["Y"])
    sched = _resolve_schedule(k, "auto", _resolve_target("c"), None)
    assert "t" not in row_buffers(sched)
    x = np.random.default_rng(1).standard_normal((6, 5))
    got = pc.compile(k, sched)(X=x)
    np.testing.assert_allclose(got[1:], 2 * x[1:] + 2 * x[:-1])
