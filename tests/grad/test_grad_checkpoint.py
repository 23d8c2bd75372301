"""`pc.grad(..., checkpoint="store")`: gradients of kernels that overwrite the values they read
(in-place time loops), by array expansion (`polyc.grad.expansion`) and a reverse sweep
(`polyc.grad.reverse`), checked against finite differences."""
import numpy as np
import pytest

import polyc as pc
from kernels import by_name
from polyc.grad.expansion import expand
from polyc.testing import check_grad

JACOBI_1D = by_name("jacobi-1d")


def test_without_a_strategy_an_in_place_time_loop_is_refused_with_the_way_out():
    with pytest.raises(pc.GradError) as e:
        pc.grad(JACOBI_1D.kernel, of="A", wrt=["A"])
    assert "checkpoint='store'" in str(e.value)


def test_an_unknown_strategy_is_refused():
    with pytest.raises(pc.GradError, match="not a strategy"):
        pc.grad(JACOBI_1D.kernel, of="A", wrt=["A"], checkpoint="revolve")


def test_the_expanded_kernel_computes_what_the_kernel_computes():
    """Every value in its own element, each read redirected to its writer by isl's dataflow."""
    ex = expand(JACOBI_1D.kernel.program)
    assert dict(ex.final) == {"A": "A_final", "B": "B_final"}
    written = [st.target.tensor for st in ex.program.statements]
    assert len(written) == len(set(written))          # one array per statement: nothing overwritten
    rng = np.random.default_rng(0)
    A, B = rng.random(17), rng.random(17)
    got = pc.compile(pc.Kernel(ex.program))(A=A, B=B, TSTEPS=6)
    A2, B2 = A.copy(), B.copy()
    JACOBI_1D.kernel(A=A2, B=B2, TSTEPS=6)
    np.testing.assert_array_equal(got["A_final"], A2)
    np.testing.assert_array_equal(got["B_final"], B2)


@pytest.mark.parametrize("schedule", [None, "auto"])
def test_jacobi_1d_gradient_with_respect_to_both_arrays_passed_in(schedule):
    g = pc.grad(JACOBI_1D.kernel, of="A", wrt=["A", "B"], checkpoint="store")
    assert g.grad_names.seed == "A_grad" and g.grad_names["A"] == "A_grad2" and g.grad_names["B"] == "B_grad"
    rng = np.random.default_rng(1)
    check_grad(JACOBI_1D.kernel, "A", ["A", "B"], dict(A=rng.random(13), B=rng.random(13), TSTEPS=5),
               checkpoint="store", schedule=schedule)


def test_jacobi_1d_gradient_is_the_transposed_linear_map():
    """The kernel is linear in (A, B): its gradient is exactly M^T ybar, M built column by column."""
    N, T = 9, 4
    cols = []
    for k in range(2 * N):
        e = np.zeros(2 * N)
        e[k] = 1.0
        A, B = e[:N].copy(), e[N:].copy()
        JACOBI_1D.kernel(A=A, B=B, TSTEPS=T)
        cols.append(A)
    M = np.stack(cols, axis=1)                        # A_final = M @ [A; B]
    ybar = np.random.default_rng(2).standard_normal(N)
    g = pc.compile(pc.grad(JACOBI_1D.kernel, of="A", wrt=["A", "B"], checkpoint="store"))
    got = g(A=np.random.rand(N), B=np.random.rand(N), A_grad=ybar, TSTEPS=T)
    np.testing.assert_allclose(np.concatenate([got["A_grad2"], got["B_grad"]]), M.T @ ybar, rtol=1e-12, atol=1e-14)


def test_the_gradients_reference_runs_its_time_loop_in_order():
    """The gradient's statements interleave inside the reversed time loop; the interpreter ran
    each over all time steps before the next (zeros where the sweep had not arrived yet)."""
    N, T = 8, 3
    g = pc.grad(JACOBI_1D.kernel, of="A", wrt=["A", "B"], checkpoint="store")
    rng = np.random.default_rng(3)
    args = dict(A=rng.random(N), B=rng.random(N), A_grad=rng.standard_normal(N), TSTEPS=T)
    want = pc.compile(g)(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()})
    got = g.reference(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()})
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["seidel-2d", "fdtd-2d", "lu", "durbin"])
def test_polybench_kernels_that_update_in_place(name):
    lk = by_name(name)
    ex = expand(lk.kernel.program)
    wrt = [t.name for t in ex.program.tensors if t.role == "input" and t.dtype.is_float]
    of = next(t.name for t in lk.kernel.program.tensors if t.role in ("output", "inout"))
    check_grad(lk.kernel, of, wrt, lk.make_inputs(lk.sizes["MINI"], "f64", np.random.default_rng(3)),
               checkpoint="store")


def damped_steps(x: pc.f64["N"], s: pc.f64["T"], T: int):
    for t in range(T):
        s[t] = 0.0
        for i in range(N):
            s[t] += x[i] * x[i]
        for i in range(N):
            x[i] = x[i] * 0.9 + 0.01 * s[t] * x[i]


def test_a_reduction_inside_the_time_loop_and_an_in_place_update():
    k = pc.kernel(damped_steps)
    rng = np.random.default_rng(4)
    check_grad(k, "x", ["x"], dict(x=rng.standard_normal(11), s=np.zeros(6), T=6), checkpoint="store")
    check_grad(k, "s", ["x"], dict(x=rng.standard_normal(11), s=np.zeros(6), T=6), checkpoint="store")


def test_cuda_emu_runs_the_reverse_sweep():
    rng = np.random.default_rng(5)
    check_grad(JACOBI_1D.kernel, "A", ["A"], dict(A=rng.random(10), B=rng.random(10), TSTEPS=3),
               checkpoint="store", target="cuda-emu")


def rnn(W: pc.f64["N", "N"], h: pc.f64["N"], a: pc.f64["N"], T: int):
    for t in range(T):
        for i in range(N):
            a[i] = 0.0
            for j in range(N):
                a[i] += W[i, j] * h[j]
        for i in range(N):
            h[i] = np.tanh(a[i])


def test_a_recurrent_network_stores_one_sum_per_step_not_one_per_term():
    """`a[i] += W[i, j] * h[j]` accumulates in place: its stored values are T x N (a running sum
    per step and row, started by a copy of `a[i] = 0`), not T x N x N."""
    k = pc.kernel(rnn)
    ex = expand(k.program)
    shapes = {t.name: tuple(str(e) for e in t.shape) for t in ex.program.tensors if t.role == "temp"}
    assert all(len(s) == 2 for s in shapes.values()), shapes
    rng = np.random.default_rng(6)
    inputs = dict(W=rng.standard_normal((7, 7)) * 0.4, h=rng.standard_normal(7), a=np.zeros(7), T=5)
    for schedule in (None, "auto"):
        check_grad(k, "h", ["W", "h"], inputs, checkpoint="store", schedule=schedule)
