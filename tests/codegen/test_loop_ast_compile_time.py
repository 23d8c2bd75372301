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


def _chain(n: int) -> pc.Kernel:
    """`n` matmuls in a row: each result is the next one's left operand."""
    lines = []
    for s in range(n):
        src = "A" if s == 0 else f"T{s - 1}"
        dst = "C" if s == n - 1 else f"T{s}"
        lines.append(f"{dst}[i, j] +=! {src}[i, k] * W{s}[k, j]")
    return pc.kernel("\n".join(lines), name="chain", outputs=["C"])


def test_separate_nests_are_generated_one_group_at_a_time(monkeypatch):
    """Eight tiled, unpacked contractions in sequence: isl sees one group of statements at a time
    (as a schedule tree's sequence would show it), so loop generation fits in 2M isl operations;
    on the whole flat map it needed over 3M (and ~40 s of CPU for a chain of 15)."""
    from polyc.poly import islutil
    from polyc.schedule.auto import auto_schedule
    k = _chain(8)
    target = Target.from_description("c l1=32K l2=1M l3=32M cores=2 vector_bytes=64")
    sched = auto_schedule(k, target, pack=False)
    monkeypatch.setattr(islutil, "DEFAULT_BUDGET", 2_000_000)
    loops = build_loop_ast(sched)
    from polyc.codegen.loop_ast import Call, walk
    order = [n.statement for n in walk(loops) if isinstance(n, Call)]
    # Every statement appears; each product is initialised before it is accumulated, and
    # accumulated before the next product reads it (S2s initialises product s, S2s+1 updates it).
    first = {name: order.index(name) for name in dict.fromkeys(order)}
    assert set(first) == {st.name for st in k.program.statements}
    for s in range(8):
        assert first[f"S{2 * s}"] < first[f"S{2 * s + 1}"]
        if s:
            assert first[f"S{2 * s - 1}"] < first[f"S{2 * s + 1}"]
    rng = np.random.default_rng(1)
    data = {"A": rng.standard_normal((5, 5)), **{f"W{s}": rng.standard_normal((5, 5)) for s in range(8)}}
    got = pc.compile(k, schedule=sched)(**data)
    want = data["A"]
    for s in range(8):
        want = want @ data[f"W{s}"]
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_groups_keep_the_order_of_their_constants():
    """Three statements at constants 2, 0, 1 of the first dim run in the order 0, 1, 2."""
    from polyc.codegen.loop_ast import Call, walk
    k = pc.kernel("B[i] = A[i] + 1\nC[i] = B[i] * 2\nD[i] = C[i] - 3", name="three")
    sched = k.schedule()
    loops = build_loop_ast(sched)
    order = [n.statement for n in walk(loops) if isinstance(n, Call)]
    assert order == [st.name for st in k.program.statements]
    got = pc.compile(k, schedule=sched)(A=np.arange(4.0))
    np.testing.assert_allclose(got, (np.arange(4.0) + 1) * 2 - 3)
