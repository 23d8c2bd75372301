"""Integer arithmetic keeps numpy's types and wraps as numpy does: uint8/uint16 operations stay in
their type (C would compute them in `int`), signed overflow wraps (undefined in C), and in loop
kernels an index or size next to integer data is a Python int, which adopts the data's type
(NEP 50), so compiled results equal the Python function's."""
import warnings

import numpy as np
import pytest

import polyc as pc

SCHEDULES = (None, "auto")


@pc.kernel
def u16_difference(A: pc.u16["N"], B: pc.u16["N"], C: pc.f64["N"]):
    for i in range(N):
        C[i] = A[i] - B[i]


@pc.kernel
def u8_minus_literal(A: pc.u8["N"], C: pc.i64["N"]):
    for i in range(N):
        C[i] = A[i] - 100


@pc.kernel
def u8_polynomial(A: pc.u8["N"], C: pc.u8["N"]):
    for i in range(N):
        C[i] = A[i] * A[i] + 1 - A[i] * 2


@pc.kernel
def i32_times_index(A: pc.i32["N"], C: pc.f64["N"]):
    for i in range(N):
        C[i] = A[i] * (i + 1) / 7.0


@pc.kernel
def i32_plus_size(A: pc.i32["N"], E: pc.i64["N"]):
    for i in range(N):
        E[i] = A[i] + N


@pc.kernel
def i32_product(A: pc.i32["N"], B: pc.i32["N"], C: pc.i32["N"]):
    for i in range(N):
        C[i] = A[i] * B[i] + A[i]


def _compare(kernel, schedule, inputs, out_name, out):
    got = {**{k: v.copy() for k, v in inputs.items()}, out_name: out.copy()}
    want = {**{k: v.copy() for k, v in inputs.items()}, out_name: out.copy()}
    pc.compile(kernel, schedule)(**got)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # numpy warns when int32 wraps
        kernel.reference(**want)
    np.testing.assert_array_equal(got[out_name], want[out_name])
    return got[out_name]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_uint16_subtraction_wraps_in_uint16(schedule):
    got = _compare(u16_difference, schedule, dict(A=np.array([1, 7], np.uint16), B=np.array([3, 2], np.uint16)),
                   "C", np.zeros(2))
    assert list(got) == [65534.0, 5.0]     # C's int promotion gave -2


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_uint8_with_a_literal_and_products_wrap_in_uint8(schedule):
    assert list(_compare(u8_minus_literal, schedule, dict(A=np.array([10], np.uint8)), "C",
                         np.zeros(1, np.int64))) == [166]
    assert list(_compare(u8_polynomial, schedule, dict(A=np.array([200, 3], np.uint8)), "C",
                         np.zeros(2, np.uint8))) == [177, 4]


def test_einstein_uint8_difference_wraps():
    k = pc.kernel("O[i] = A[i] - B[i]")
    a, b = np.array([1], np.uint8), np.array([3], np.uint8)
    assert k(A=a, B=b).tolist() == [254] == k.reference(A=a, B=b).tolist()


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_loop_index_next_to_int32_data_is_a_python_int(schedule):
    a = np.array([2**30, 2**30], np.int32)
    got = _compare(i32_times_index, schedule, dict(A=a), "C", np.zeros(2))
    assert got[1] < 0                       # int32 2**31 wraps, as in the Python function


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_size_next_to_int32_data_wraps(schedule):
    got = _compare(i32_plus_size, schedule, dict(A=np.array([2**31 - 1], np.int32)), "E", np.zeros(1, np.int64))
    assert got.tolist() == [-2**31]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_signed_overflow_wraps_and_is_computed_unsigned(schedule):
    a = np.array([2**30, 5], np.int32)
    got = _compare(i32_product, schedule, dict(A=a, B=a), "C", np.zeros(2, np.int32))
    assert got.tolist() == [2**30, 30]
    source = pc.compile(i32_product, schedule).source
    body = [line for line in source.splitlines() if "t_C[" in line and "=" in line]
    assert body and all("(uint32_t)" in line for line in body)     # no undefined behaviour in C


def test_einstein_indices_stay_int64():
    # Einstein kernels index with int64 (their reference uses numpy index arrays): no wrap.
    k = pc.kernel("O[i] = A[i] * (i + 1)")
    a = np.array([2**30, 2**30], np.int32)
    assert k(A=a).tolist() == [2**30, 2**31] == k.reference(A=a).tolist()


def test_int64_overflow_wraps_like_numpy():
    k = pc.kernel("O[i] = A[i] * A[i] + A[i]")
    a = np.array([2**62, 3], np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert k(A=a).tolist() == k.reference(A=a).tolist() == [2**62, 12]


def test_undeclared_scalar_of_an_integer_kernel_is_float64():
    k = pc.kernel("O[i] = A[i] * alpha")
    r = k(A=np.array([2**25 + 1], np.int64), alpha=1)
    assert r.dtype == np.float64 and int(r[0]) == 2**25 + 1     # float32 rounded it to 2**25
    t = pc.kernel("O[i] = select(A[i] > t, 1, 0)")
    assert t(A=np.array([16777217], np.int32), t=16777216.5).tolist() == [1]
    assert pc.kernel("O[i] = alpha where i in 0:N")(alpha=0.1, N=3).dtype == np.float64


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
@pytest.mark.parametrize("text, dtype, value", [
    ("s[i] +=! A[i, j]", pc.i32, 2**30),           # the running sum overflows int32
    ("s[i] *=! A[i, j]", pc.i64, 3**30),           # the running product overflows int64
    ("s[i] *=! A[i, j]", pc.u16, 65535),           # 65535 * 65535 overflows C's int
])
def test_integer_reductions_wrap_in_their_type_without_undefined_behaviour(text, dtype, value, target):
    """Updates (`+=`, `*=`, also the CUDA tree's partial sums) of integers are computed in an
    unsigned type: a signed overflow is undefined in C, and uint16 operands multiply in int."""
    k = pc.kernel(text, A=dtype["N", "M"])
    a = np.full((3, 300), value, dtype.numpy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = k.reference(A=a)
    for schedule in (None, "auto"):
        assert pc.compile(k, schedule, target=target)(A=a).tolist() == want.tolist()
    c = pc.compile(k).source
    assert not any(f"t_s[i_i] {op}= " in c for op in "+*")
    cuda = pc.codegen(k, "auto", target="cuda")
    assert "pc_part = (" + dtype.c_name + ")((uint" in cuda


def test_uint16_products_do_not_overflow_int():
    k = pc.kernel("B[i] = A[i] * A[i]", A=pc.u16["N"])
    a = np.array([65535, 3], np.uint16)
    assert pc.compile(k)(A=a).tolist() == (a * a).tolist() == [1, 9]
    assert "(uint32_t)" in pc.compile(k).source.split("t_B[")[-1]


@pytest.mark.parametrize("dtype", [pc.i64, pc.i32, pc.u8, pc.u16])
def test_floats_out_of_an_integer_range_convert_as_numpy_does_on_every_target(dtype):
    """NaN, +-1e30 and values past a narrow type: C leaves the conversion undefined and a GPU
    saturates; `pc_f2i_<t>` gives numpy's (x86) values on the C target and in generated CUDA."""
    a = np.array([1.7, -2.5, 1e30, -1e30, np.nan, 300.0, -1.0, 70000.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = a.astype(dtype.numpy)
    k = pc.kernel("B[i] = A[i] * 1.0", A=pc.f64["N"], B=dtype["N"])
    for target in ("c", "cuda-emu"):
        assert pc.compile(k, target=target)(A=a).tolist() == want.tolist()
    assert f"pc_f2i_{dtype.name}(" in pc.codegen(k, "auto", target="cuda").split("__global__")[-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.zeros(len(a), np.int64)
        pc.compile(_truncate, target="cuda-emu")(A=a, B=out)
        assert out.tolist() == a.astype(np.int64).tolist()


@pc.kernel
def _truncate(A: pc.f64["N"], B: pc.i64["N"]):
    for i in range(N):
        B[i] = int(A[i])
