"""Rows of a reduction jammed into one vector loop (`unroll_and_jam` of the row loop, then
`vectorize(..., reduction=True)`): each unrolled row keeps its own accumulator.  Before, the
refusal of the schedule hid that the C emitter had one accumulator per statement: all rows
would have been summed into the last one."""
import numpy as np
import pytest

import polyc as pc


def _jammed(k, rows=4):
    return k.schedule().unroll_and_jam("i", rows).vectorize("j", reduction=True)


@pytest.mark.parametrize("op, ref", [("+=!", lambda a, x: a @ x), ("max=!", lambda a, x: (a * x).max(axis=1))])
def test_jammed_rows_each_keep_an_accumulator(op, ref):
    k = pc.kernel(f"y[i] {op} A[i, j] * x[j]", name="mv_jam", A=pc.f64[8, "J"])
    sched = _jammed(k)
    src = pc.codegen(k, sched)
    assert src.count("reduction(") >= 4 and "pc_acc3" in src
    rng = np.random.default_rng(0)
    a, x = rng.standard_normal((8, 37)), rng.standard_normal(37)
    np.testing.assert_allclose(pc.compile(k, sched)(A=a, x=x), ref(a, x), rtol=1e-12)


def test_jammed_rows_with_a_remainder_are_right():
    """Seven rows by four: the last block's missing rows are guarded (emitted in order)."""
    k = pc.kernel("y[i] +=! A[i, j] * x[j]", name="mv_jam_rem")
    sched = _jammed(k)
    rng = np.random.default_rng(1)
    for rows in (7, 8, 1):
        a, x = rng.standard_normal((rows, 13)), rng.standard_normal(13)
        np.testing.assert_allclose(pc.compile(k, sched)(A=a, x=x), a @ x, rtol=1e-12)


def test_two_updates_of_one_element_share_its_accumulator():
    k = pc.kernel("y[i] +=! A[i, j] * x[j]\ny[i] += B[i, j]", name="two_updates", A=pc.f64[4, "J"],
                  B=pc.f64[4, "J"])
    rng = np.random.default_rng(2)
    a, b, x = rng.standard_normal((4, 9)), rng.standard_normal((4, 9)), rng.standard_normal(9)
    got = pc.compile(k, schedule="auto")(A=a, B=b, x=x)
    np.testing.assert_allclose(got, a @ x + b.sum(axis=1), rtol=1e-12)
