"""`%` and `//` floor as in Python and numpy (`np.mod`, `np.floor_divide`), on integers and floats,
in both front ends, the C and CUDA-emulation back ends and the interpreter; an integer divisor of
zero gives 0 and `INT_MIN // -1` wraps (numpy's results), never a signal.
"""
# ruff: noqa: F821
# flake8: noqa: F821
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.errors import ParseError

FLOATS = np.array([-7.5, -7.0, -3.0, -0.5, -0.0, 0.0, 0.5, 3.0, 7.0, 7.5, 1.0, -1.0, 1e300, -1e-300, np.inf, -np.inf,
                   np.nan, 5.0])
FLOAT_DIVISORS = np.array([3.0, 3.0, -3.0, 2.0, 2.0, -2.0, -0.25, 0.1, -2.5, 2.5, 0.1, 0.1, 1e-10, 3.0, 2.0, 2.0,
                           1.0, np.inf])


def _same(got, expected):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
    # also the sign of zeros, as numpy gives them
    np.testing.assert_array_equal(np.signbit(np.asarray(got)), np.signbit(np.asarray(expected)))


def _ints(dtype):
    info = np.iinfo(dtype)
    a = np.array([-7, -7, 7, 7, 0, -1, 5, info.min, info.min, info.max, info.min, 9, -9, 3], dtype=dtype)
    b = np.array([3, -3, -3, 3, 5, 2, 0, -1, 7, -1, 1, 0, 0, -7], dtype=dtype)
    return a, b


def floor_ops(A: pc.f64["N"], B: pc.f64["N"], Q: pc.f64["N"], R: pc.f64["N"]):
    for i in range(N):
        Q[i] = A[i] // B[i]
        R[i] = A[i] % B[i]


def floor_ops_int(A: pc.i64["N"], B: pc.i64["N"], Q: pc.i64["N"], R: pc.i64["N"], S: pc.i64["N"]):
    for i in range(N):
        Q[i] = A[i] // B[i]
        R[i] = A[i] % B[i]
        S[i] = A[i] % 3 + (A[i] // -4) + (i - 3) % 4


def floor_ops_i32(A: pc.i32["N"], B: pc.i32["N"], Q: pc.i32["N"], R: pc.i32["N"]):
    for i in range(N):
        Q[i] = A[i] // B[i]
        R[i] = A[i] % B[i]


def float_literals(A: pc.f32["N"], R: pc.f32["N"]):
    for i in range(N):
        R[i] = A[i] % 3.0 + A[i] // 0.5


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_loop_kernel_float_floor_semantics(target):
    k = pc.kernel(floor_ops)
    n = len(FLOATS)
    q, r = np.empty(n), np.empty(n)
    pc.compile(k, target=target)(A=FLOATS, B=FLOAT_DIVISORS, Q=q, R=r)
    q2, r2 = np.empty(n), np.empty(n)
    with np.errstate(all="ignore"):
        k.reference(A=FLOATS, B=FLOAT_DIVISORS, Q=q2, R=r2)
        _same(q, np.floor_divide(FLOATS, FLOAT_DIVISORS))
        _same(r, np.mod(FLOATS, FLOAT_DIVISORS))
    _same(q, q2)
    _same(r, r2)
    assert r[0] == 1.5 and q[0] == -3.0          # -7.5 % 3.0 is 1.5 in Python, C's fmod gives -1.5


def test_float_literal_divisor_on_negative_values():
    k = pc.kernel(float_literals)
    a = np.array([-1.0, -4.5, 2.0, -0.25], dtype=np.float32)
    r, r2 = np.empty_like(a), np.empty_like(a)
    pc.compile(k)(A=a, R=r)
    k.reference(A=a, R=r2)
    _same(r, r2)
    _same(r, np.mod(a, np.float32(3)) + np.floor_divide(a, np.float32(0.5)))


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_loop_kernel_integer_floor_semantics_and_zero_divisors(target):
    k = pc.kernel(floor_ops_int)
    a, b = _ints(np.int64)
    q, r, s = (np.zeros_like(a) for _ in range(3))
    pc.compile(k, target=target)(A=a, B=b, Q=q, R=r, S=s)
    with np.errstate(all="ignore"):
        expected_q, expected_r = np.floor_divide(a, b), np.mod(a, b)
        q2, r2, s2 = (np.zeros_like(a) for _ in range(3))
        k.reference(A=a, B=b, Q=q2, R=r2, S=s2)   # numpy scalars: 0 for a zero divisor, no exception
    _same(q, expected_q)
    _same(r, expected_r)
    _same((q, r, s), (q2, r2, s2))
    assert q[7] == np.iinfo(np.int64).min       # INT_MIN // -1 wraps, as numpy does
    assert q[6] == 0 and r[6] == 0              # 5 // 0 and 5 % 0 give 0


def test_int32_floor_semantics():
    k = pc.kernel(floor_ops_i32)
    a, b = _ints(np.int32)
    q, r = np.zeros_like(a), np.zeros_like(a)
    pc.compile(k)(A=a, B=b, Q=q, R=r)
    with np.errstate(all="ignore"):
        _same(q, np.floor_divide(a, b))
        _same(r, np.mod(a, b))


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_einsum_mod_and_floordiv_are_numpy_mod_and_floor_divide(target, dtype):
    k = pc.kernel("R[i] = A[i] % B[i]\nS[i] = A[i] % 3 - B[i] % -2\nQ[i] = A[i] // B[i] + A[i] // -4")
    if np.dtype(dtype).kind == "i":
        a, b = _ints(dtype)
    else:
        with np.errstate(over="ignore"):
            a, b = FLOATS.astype(dtype), FLOAT_DIVISORS.astype(dtype)
    out = pc.compile(k, target=target)(A=a, B=b)
    with np.errstate(all="ignore"):
        _same(out["R"], np.mod(a, b))
        _same(out["S"], np.mod(a, dtype(3)) - np.mod(b, dtype(-2)))
        _same(out["Q"], np.floor_divide(a, b) + np.floor_divide(a, dtype(-4)))
    assert out["Q"].dtype == dtype
    ref = k.reference(A=a, B=b)
    for name in "RSQ":
        _same(ref[name], out[name])


@pytest.mark.parametrize("text", ["B[i] = A[i] % 0", "B[i] = A[i] % (A[i] - A[i])"])
def test_einsum_integer_mod_by_zero_gives_zero(text):
    k = pc.kernel(text, A=pc.i64["N"])
    a = np.arange(-3, 4, dtype=np.int64)
    _same(pc.compile(k)(A=a), np.zeros_like(a))
    _same(k.reference(A=a), np.zeros_like(a))


def div_by_literal_zero(A: pc.i64["N"], B: pc.i64["N"]):
    for i in range(N):
        B[i] = A[i] % 0


def floordiv_by_literal_zero(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range(N):
        B[i] = A[i] // 0.0


def true_div_by_literal_zero(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range(N):
        B[i] = A[i] / 0


@pytest.mark.parametrize("fn, op", [(div_by_literal_zero, "%"), (floordiv_by_literal_zero, "//"),
                                    (true_div_by_literal_zero, "/")])
def test_loop_kernel_literal_zero_divisor_is_refused(fn, op):
    with pytest.raises(ParseError) as err:
        pc.kernel(fn)
    assert "divides by the literal zero" in str(err.value) and err.value.line is not None
    assert f"A[i] {op} 0" in str(err.value)


def test_printed_c_calls_the_helpers():
    k = pc.kernel(floor_ops_int)
    src = pc.codegen(k, k.schedule())
    assert "pc_floordiv_i64(" in src and "pc_mod_i64(" in src
    body = "\n".join(line for line in src.splitlines() if not line.startswith("static inline"))
    assert " % " not in body and " / " not in body


@pytest.mark.parametrize("dtypes", [(pc.i32, pc.i64), (pc.f32, pc.f64)])
def test_cuda_source_with_every_helper_compiles_with_nvcc(dtypes):
    from polyc.runtime.cuda import compile_cuda_check, find_nvcc
    if find_nvcc() is None:
        pytest.skip("nvcc (CUDA toolkit) is not installed here")
    a, b = dtypes
    k = pc.kernel("Q[i, j] = A[i, j] // B[i, j] + A[i, j] % B[i, j] + max(A[i, j], B[i, j]) - min(A[i, j], 3)\n"
                  "m[i] max=! A[i, j]\nn[i] min=! B[i, j]", A=a["N", "M"], B=b["N", "M"])
    src = pc.codegen(k, target="cuda")   # the scheduler's block/thread mapping, as a user gets it
    assert f"pc_floordiv_{b.name}(" in src and f"pc_max_{a.name}(" in src
    compile_cuda_check(src, "sm_80")


def index_over_parameter(A: pc.i64["N"], d: int):
    for i in range(N):
        A[i] = (i - 2) // d + (i - 2) % d


def test_zero_divisor_on_python_ints_compiled_gives_zero_reference_raises():
    """The documented difference: on plain Python ints (loop indices, `int` parameters) the
    reference stops where Python raises ZeroDivisionError (a typed ReferenceFailedError that says so);
    compiled code gives numpy's 0."""
    k = pc.kernel(index_over_parameter)
    a = np.full(5, 7, dtype=np.int64)
    pc.compile(k)(A=a, d=0)
    _same(a, np.zeros(5, dtype=np.int64))
    with pytest.raises(pc.ReferenceFailedError, match="ZeroDivisionError") as info:
        k.reference(A=np.zeros(5, dtype=np.int64), d=0)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    b, b_ref = np.zeros(5, dtype=np.int64), np.zeros(5, dtype=np.int64)
    pc.compile(k)(A=b, d=3)
    k.reference(A=b_ref, d=3)
    _same(b, b_ref)
    _same(b, np.arange(-2, 3) // 3 + np.arange(-2, 3) % 3)
