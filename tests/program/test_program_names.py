"""Names a program makes for its operators' results, statements and temps never collide with each
other or with the user's names, and identical calls are shared only when they are identical."""
import numpy as np

import polyc as pc

double = pc.kernel("Y[i, j] = X[i, j] * 2.0", name="s")
plus_one = pc.kernel("Y[i, j] = X[i, j] + 1.0", name="s1")
add = pc.kernel("Y[i, j] = A[i, j] + B[i, j]", name="add")
scale = pc.kernel("Y[i, j] = X[i, j] * alpha", name="scale")


@pc.program
def named_like_a_result(s0_Y: pc.f64["N", "M"]):
    return add(A=double(X=s0_Y), B=s0_Y)


@pc.program
def eleven_calls(X: pc.f64["N", "M"]):
    first = plus_one(X=X)      # kernel s1, call 0: "s1" + "0"
    t = X
    for _ in range(10):        # kernel s, call 10: "s" + "10"
        t = double(X=t)
    return add(A=first, B=t)


@pc.program
def signed_zeros(A: pc.f64["N", "N"]):
    return scale(X=A, alpha=0.0), scale(X=A, alpha=-0.0)


def test_an_input_named_like_an_operators_result_is_its_own_tensor():
    x = np.ones((2, 3))
    assert named_like_a_result(x).tolist() == named_like_a_result.reference(x).tolist() == [[3.0] * 3] * 2


def test_calls_whose_kernel_name_and_number_read_alike_stay_apart():
    x = np.ones((2, 3))
    assert len({n.name for n in eleven_calls.nodes}) == len(eleven_calls.nodes)
    assert eleven_calls(X=x).tolist() == eleven_calls.reference(X=x).tolist() == [[1026.0] * 3] * 2


def test_calls_with_zero_and_negative_zero_are_not_shared():
    plus, minus = signed_zeros(A=np.ones((2, 2)))
    assert not np.signbit(plus).any() and np.signbit(minus).all()


def test_an_array_of_another_rank_is_named_as_such():
    import pytest
    from polyc.errors import ArgumentError
    product = pc.kernel("C[i, j] +=! A[i, k] * B[j, k]", name="rank_mm")

    @pc.program
    def gram(Q: pc.f64["S", "D"]):
        return product(A=Q, B=Q)
    for bad in (np.ones(4), np.ones((2, 2, 2))):
        with pytest.raises(ArgumentError, match=r"array Q of program gram must have 2 dimension\(s\)"):
            gram(bad)
    assert gram(np.ones((2, 3))).tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_operators_named_like_no_plain_identifier_compose_run_and_differentiate():
    """`_inc` and `ünï` make statement names (`_inc0_S0`) that isl spells otherwise: dependences,
    generated loops and checks read the statement names back (they looked up `u_g__inc0__S0_`)."""
    sq = pc.kernel("Y[i] = X[i] * X[i]", name="sq")
    inc = pc.kernel("Y[i] = X[i] + 1.0", name="_inc")
    triple = pc.kernel("Ö[i] = X[i] * 3.0", name="ünï")

    @pc.program
    def p(x: pc.f64["N"]):
        return sq(X=triple(X=inc(X=x)))
    x = np.arange(3.0)
    want = (3 * (x + 1)) ** 2
    np.testing.assert_array_equal(p(x=x), want)
    for schedule, options in ((None, {}), ("auto", {}), ("auto", {"specialise": True}), (None, {"target": "cuda-emu"})):
        np.testing.assert_array_equal(pc.compile(p.kernel, schedule, **options)(x=x), want)
    np.testing.assert_array_equal(pc.compile(pc.grad(p, of="out", wrt="x"))(x=x, out_grad=np.ones(3)), 18 * (x + 1))
