"""The user's path end to end: define, compile, call on numpy arrays; errors at call time."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import polyc as pc

MATMUL = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")


def test_issue_example_matmul():
    f = pc.compile(MATMUL)
    rng = np.random.default_rng(0)
    A = rng.random((300, 200), dtype=np.float32)
    B = rng.random((200, 50), dtype=np.float32)
    C = f(A=A, B=B)
    assert C.dtype == np.float32 and C.shape == (300, 50)
    np.testing.assert_allclose(C, A @ B, rtol=1e-4)
    assert "t_C[i_i][i_j] += (t_A[i_i][i_k] * t_B[i_k][i_j]);" in f.source and "int64_t n_K" in f.source


def test_one_compiled_kernel_serves_every_size_and_dtype():
    f = pc.compile(MATMUL)
    for m, k, n in [(1, 1, 1), (7, 13, 5), (2, 3, 11)]:
        for dt in (np.float32, np.float64):
            A, B = np.ones((m, k), dt), np.ones((k, n), dt)
            C = f(A=A, B=B)
            assert C.dtype == dt and np.all(C == k)


def test_several_outputs_come_back_as_a_dict():
    k = pc.kernel("S[i] +=! X[i, j]\nM[i] max=! X[i, j]")
    X = np.arange(12.0).reshape(3, 4)
    out = pc.compile(k)(X=X)
    assert set(out) == {"S", "M"}
    np.testing.assert_array_equal(out["S"], X.sum(1))
    np.testing.assert_array_equal(out["M"], X.max(1))


def test_scalar_parameters_and_functions():
    k = pc.kernel("Y[i] = select(X[i] > 0, alpha * X[i], exp(X[i]) - 1)")
    X = np.linspace(-2, 2, 9)
    np.testing.assert_allclose(k(X=X, alpha=0.5), np.where(X > 0, 0.5 * X, np.expm1(X)))


def test_float32_literals_stay_float32():
    k = pc.kernel("Y[i] = X[i] * 0.5 + 1")
    src = pc.codegen(k, dtypes={"X": pc.f32})
    assert "0.5f" in src and "1.0f" in src


def test_passed_output_is_updated_in_place():
    k = pc.kernel("C[i] += A[i]")
    C = np.ones(4)
    pc.compile(k)(A=np.arange(4.0), C=C)
    np.testing.assert_array_equal(C, [1, 2, 3, 4])


@pytest.mark.parametrize("kwargs,message", [
    (dict(A=np.ones((3, 2)), B=np.ones((3, 2))), "size K is 2 from A.shape[1] but B.shape[0] is 3"),
    (dict(A=np.ones((3, 2))), "missing"),
    (dict(A=np.ones((3, 2)), B=np.ones((2, 2), np.float32)), "must share a float type"),
    (dict(A=np.ones(3), B=np.ones((3, 2))), "must have 2 dimension(s)"),
    (dict(A=np.ones((2, 4))[:, ::2], B=np.ones((2, 2))), "contiguous"),
    (dict(A=[[1.0]], B=np.ones((1, 1))), "numpy array"),
    (dict(A=np.ones((1, 1)), B=np.ones((1, 1)), Z=np.ones(1)), "Z"),
])
def test_argument_errors(kwargs, message):
    with pytest.raises(pc.ArgumentError) as info:
        MATMUL(**kwargs)
    assert message in str(info.value)


def test_an_integer_array_passed_for_float_results_is_refused():
    """numpy's `matmul(a, b, out=c_int)` refuses the cast; polyc truncated every partial sum."""
    a, b = np.full((2, 4), 0.6), np.ones((4, 2))
    with pytest.raises(pc.ArgumentError, match=r"C is int64, but the kernel stores float64 values into it"):
        MATMUL(A=a, B=b, C=np.zeros((2, 2), np.int64))
    with pytest.raises(pc.ArgumentError, match="y is int32"):
        pc.compile(pc.kernel("y[i] = x[i] * 0.5"))(x=np.ones(3), y=np.zeros(3, np.int32))
    for made_float in ("B[i] = exp(A[i])", "B[i] = A[i] / 2"):      # floats made of integer data
        with pytest.raises(pc.ArgumentError, match="B is int64, but the kernel stores float64"):
            pc.kernel(made_float)(A=np.arange(3), B=np.zeros(3, np.int64))
    assert pc.kernel("B[i] = A[i] // 2")(A=np.arange(3), B=np.zeros(3, np.int64)).tolist() == [0, 0, 1]
    accumulate = pc.compile(pc.kernel("C[i] += A[i]"))
    with pytest.raises(pc.ArgumentError, match="C is int64"):
        accumulate(A=np.ones(3), C=np.zeros(3, np.int64))
    counts = np.zeros(3, np.int64)         # integers into an integer array: as before
    accumulate(A=np.arange(3), C=counts)
    assert counts.tolist() == [0, 1, 2]
    declared = pc.compile(pc.kernel("y[i] = x[i] * 0.5", y=pc.i32["N"], x=pc.f64["N"]))
    assert declared(x=np.array([1.0, 3.0, 5.0])).tolist() == [0, 1, 2]     # truncated, as declared


def test_wrong_scalar_type():
    k = pc.kernel("Y[i] = X[i] * n", n=pc.i64)
    with pytest.raises(pc.ArgumentError, match="n"):
        k(X=np.ones(3, dtype=np.int64), n=1.5)


def test_compile_error_keeps_source_and_compiler_message():
    with pytest.raises(pc.CompileError) as info:
        pc.compile(MATMUL, flags=["-O2", "-fno-such-option-polyc"])(A=np.ones((2, 2)), B=np.ones((2, 2)))
    err = info.value
    assert "polyc_matmul" in err.source and "no-such-option-polyc" in str(err)


def test_compile_from_two_processes_at_once(tmp_path):
    script = textwrap.dedent("""
        import numpy as np, polyc as pc
        k = pc.kernel("Y[i, j] = X[j, i] * 3 + 1", name="two_process_kernel")
        X = np.arange(6.0).reshape(2, 3)
        assert np.array_equal(pc.compile(k)(X=X), X.T * 3 + 1)
        print("ok")
    """)
    env = dict(os.environ, POLYC_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=os.getcwd()) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert all(o[0].strip() == "ok" for o in outs)
    assert len(list((tmp_path / "cache").rglob("*.so"))) == 1


def test_reference_matches_compiled_for_an_einsum_kernel():
    k = pc.kernel("m[i] max=! X[i, j]\ne[i, j] = exp(X[i, j] - m[i])\ns[i] +=! e[i, j]\nY[i, j] = e[i, j] / s[i]")
    X = np.random.default_rng(1).standard_normal((5, 7))
    np.testing.assert_allclose(k(X=X), k.reference(X=X), rtol=1e-12)
