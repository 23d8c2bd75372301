"""Loop generation for large automatic schedules: isl sees the schedule without the padding dims
that order nothing, so the gradient of a small MLP (7 packed contractions, ~100 schedule dims)
generates its loops in seconds, not tens of seconds, and the loops stay the same program."""
import time

import islpy as isl
import numpy as np
import pytest

import polyc as pc
from polyc.api import _resolve_schedule
from polyc.codegen.loop_ast import build_loop_ast, drop_constant_dims
from polyc.target import Target

MLP = """
    H[n, h] +=! X[n, d] * W1[d, h]
    A[n, h] = tanh(H[n, h] + b1[h])
    Z[n, c] +=! A[n, h] * W2[h, c]
    O[n, c] = Z[n, c] + b2[c]
    mx[n] max=! O[n, c]
    se[n] +=! exp(O[n, c] - mx[n])
    L +=! -T[n, c] * (O[n, c] - mx[n] - log(se[n])) * inv_n
"""


def test_drop_constant_dims_keeps_only_dims_that_order():
    smap = isl.UnionMap("[N] -> { S[i] -> [0, i, 0, 5]; T[i] -> [0, i, 1, 5] }")
    reduced, keep = drop_constant_dims(smap, 4)
    assert keep == [1, 2]
    assert reduced.is_equal(isl.UnionMap("[N] -> { S[i] -> [i, 0]; T[i] -> [i, 1] }"))


def test_drop_constant_dims_keeps_a_dim_that_differs_or_varies():
    smap = isl.UnionMap("[N] -> { S[i] -> [0, i]; T[i] -> [1, i] }")
    reduced, keep = drop_constant_dims(smap, 2)
    assert keep == [0, 1] and reduced.is_equal(smap)


@pytest.mark.slow
def test_mlp_gradient_auto_schedule_generates_loops_fast_and_right():
    mlp = pc.kernel(MLP, name="mlp_loss", outputs=["L"])
    g = pc.grad(mlp, of="L", wrt=["W1", "b1", "W2", "b2"])
    sched = _resolve_schedule(g, "auto", Target.host())
    start = time.process_time()
    build_loop_ast(sched)
    spent = time.process_time() - start
    # ~3 s after dropping the padding dims, ~10 s before (51 s under load): a 10x regression fails.
    assert spent < 25.0, f"loop generation took {spent:.1f} s of CPU"
    rng = np.random.default_rng(0)
    n, d, h, c = 8, 2, 4, 2
    data = dict(X=rng.standard_normal((n, d)), T=np.eye(c)[rng.integers(0, c, n)], inv_n=1.0 / n,
                W1=rng.standard_normal((d, h)), b1=rng.standard_normal(h),
                W2=rng.standard_normal((h, c)), b2=rng.standard_normal(c), L_grad=np.array(1.0))
    want = pc.compile(g)(**data)
    got = pc.compile(g, schedule=sched)(**data)
    for name in ("W1_grad", "b1_grad", "W2_grad", "b2_grad"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-9)


def test_a_run_of_constant_dims_becomes_one_rank_dim_in_the_same_order():
    smap = isl.UnionMap("[N] -> { S[i] -> [1, 0, i, 2, 7]; T[i] -> [0, 3, i, 2, 7]; U[i] -> [1, 0, i, 1, 9] }")
    reduced, keep = drop_constant_dims(smap, 5)
    assert keep == [0, 2, 3]
    assert reduced.is_equal(isl.UnionMap("[N] -> { S[i] -> [1, i, 1]; T[i] -> [0, i, 1]; U[i] -> [1, i, 0] }"))
