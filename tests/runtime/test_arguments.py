"""bind_arguments: every way a call can fail to fit a kernel, and the message the user sees."""
from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

import polyc as pc
from polyc.errors import ArgumentError
from polyc.ir import Affine, Constraint, Program, ScalarDecl, TensorDecl, f32, f64, i32, i64
from polyc.runtime import BoundCall, KernelParam, KernelSignature, bind_arguments, compile_c, \
    load_function, passed_dtypes


def tensor(name, dtype, shape, role):
    return TensorDecl(name, dtype, None if shape is None else tuple(Affine.parse(s) for s in shape), role)


def program(*tensors, sizes=(), scalars=(), assumptions=()):
    return Program("k", tuple(tensors), (), tuple(sizes), tuple(scalars), assumptions=tuple(assumptions))


MATMUL = program(tensor("A", f32, ("M", "K"), "input"), tensor("B", f32, ("K", "N"), "input"),
                 tensor("C", f32, ("M", "N"), "output"), sizes=("M", "K", "N"),
                 scalars=(ScalarDecl("alpha", f32),))
SHIFT = program(tensor("A", f64, ("N",), "input"), tensor("B", f64, ("N - 2",), "output"), sizes=("N",))
CONV = program(tensor("X", f64, ("H",), "input"), tensor("W", f64, ("KH",), "input"),
               tensor("Y", f64, ("H - KH + 1",), "output"), sizes=("H", "KH"))
UPDATE = program(tensor("X", f32, ("N",), "input"), tensor("Y", f32, ("N",), "inout"), sizes=("N",))


def mats(m=4, k=3, n=2, dtype=np.float32):
    return np.ones((m, k), dtype), np.ones((k, n), dtype)


def fails(prog, message, dtypes=None, **kwargs):
    """Assert that binding `kwargs` raises ArgumentError containing `message` verbatim."""
    with pytest.raises(ArgumentError, match=re.escape(message)):
        bind_arguments(prog, kwargs, dtypes=dtypes)


def test_binds_sizes_allocates_outputs_and_converts_scalars():
    a, b = mats()
    call = bind_arguments(MATMUL, {"A": a, "B": b, "alpha": 2})
    assert call.sizes == {"M": 4, "K": 3, "N": 2}
    assert call.arrays["A"] is a and call.arrays["B"] is b
    c = call.arrays["C"]
    assert c.shape == (4, 2) and c.dtype == np.float32 and not c.any()
    assert call.scalars == {"alpha": 2.0} and isinstance(call.scalars["alpha"], float)
    assert call.outputs == ("C",)
    assert call.results() is c


def test_passed_output_is_used_in_place_and_argument_error_is_a_type_error():
    a, b = mats()
    c = np.empty((4, 2), np.float32)
    assert bind_arguments(MATMUL, {"A": a, "B": b, "C": c, "alpha": 1.0}).arrays["C"] is c
    assert issubclass(ArgumentError, TypeError)


def test_unknown_keyword_lists_what_the_kernel_takes():
    a, b = mats()
    fails(MATMUL, "unknown argument 'D' for kernel 'k'; it takes arrays A, B, C; scalars alpha; sizes M, K, N",
          A=a, B=b, alpha=1.0, D=a)
    fails(MATMUL, "unknown argument 'alpah' for kernel 'k' (did you mean alpha?)", A=a, B=b, alpah=1.0)


def test_temps_cannot_be_passed():
    prog = program(tensor("A", f32, ("N",), "input"), tensor("T", f32, ("N",), "temp"),
                   tensor("B", f32, ("N",), "output"), sizes=("N",))
    fails(prog, "T is an intermediate computed inside kernel 'k'", A=np.ones(3, np.float32),
          T=np.ones(3, np.float32))


def test_missing_arguments():
    a, b = mats()
    fails(MATMUL, "missing input array A (float32[M, K])", B=b, alpha=1.0)
    fails(MATMUL, "missing scalar argument alpha (float32)", A=a, B=b)
    fails(UPDATE, "missing array Y (float32[N]): the kernel reads and updates it in place",
          X=np.ones(3, np.float32))


def test_non_numpy_and_device_arrays_are_refused():
    _, b = mats()
    fails(MATMUL, "A must be a numpy array but got list; pass a numpy array", A=[[1.0]], B=b, alpha=1.0)

    class DeviceArray:
        __cuda_array_interface__ = {"shape": (4, 3), "typestr": "<f4", "data": (0, False), "version": 3}

    fails(MATMUL, "A: device array passed to a CPU kernel (DeviceArray)", A=DeviceArray(), B=b, alpha=1.0)
    fails(MATMUL, "A is a masked array", A=np.ma.masked_array(np.ones((4, 3), np.float32)), B=b, alpha=1.0)


def test_wrong_dtype_is_never_cast():
    a, b = mats(dtype=np.float64)
    fails(MATMUL, "A has dtype float64 but the kernel expects float32; convert it explicitly, "
                  "e.g. A.astype(np.float32)", A=a, B=b, alpha=1.0)


def test_wrong_rank():
    _, b = mats()
    fails(MATMUL, "A must have 2 dimension(s) (float32[M, K]) but has 1: shape (3,)",
          A=np.ones(3, np.float32), B=b, alpha=1.0)


def test_non_contiguous_and_misaligned_arrays():
    a, b = mats()
    transposed = np.ones((3, 4), np.float32).T
    fails(MATMUL, "A is not C-contiguous (a transposed, strided or Fortran-order array); "
                  "use np.ascontiguousarray(A)", A=transposed, B=b, alpha=1.0)
    fails(MATMUL, "use np.ascontiguousarray(A)", A=np.ones((4, 6), np.float32)[:, ::2], B=b, alpha=1.0)
    raw = np.zeros(4 * 3 * 4 + 1, np.uint8)
    misaligned = raw[1:].view(np.float32).reshape(4, 3)
    assert misaligned.flags.c_contiguous and not misaligned.flags.aligned
    fails(MATMUL, "A is not aligned to its element size; copy it into fresh memory with A.copy()",
          A=misaligned, B=b, alpha=1.0)


def test_read_only_output():
    a, b = mats()
    c = np.zeros((4, 2), np.float32)
    c.flags.writeable = False
    fails(MATMUL, "C is read-only but the kernel writes it (role output); pass a writable array, e.g. C.copy()",
          A=a, B=b, C=c, alpha=1.0)
    y = np.zeros(3, np.float32)
    y.flags.writeable = False
    fails(UPDATE, "Y is read-only but the kernel writes it (role inout)", X=np.ones(3, np.float32), Y=y)


def test_read_only_input_is_fine():
    a, b = mats()
    a.flags.writeable = False
    bind_arguments(MATMUL, {"A": a, "B": b, "alpha": 1.0})


def test_shape_disagreement_names_both_arrays():
    a = np.ones((100, 200), np.float32)
    b = np.ones((300, 50), np.float32)
    fails(MATMUL, "size K is 200 from A.shape[1] but B.shape[0] is 300 (B has shape (300, 50))",
          A=a, B=b, alpha=1.0)
    c = np.ones((100, 49), np.float32)
    fails(MATMUL, "size N is 50 from B.shape[1] but C.shape[1] is 49",
          A=a, B=np.ones((200, 50), np.float32), C=c, alpha=1.0)


def test_affine_shapes_are_allocated_and_checked():
    call = bind_arguments(SHIFT, {"A": np.ones(10)})
    assert call.sizes == {"N": 10} and call.arrays["B"].shape == (8,)
    fails(SHIFT, "B.shape[0] is 7 but the kernel expects N - 2 = 8 (N is 10 from A.shape[0]; B has shape (7,))",
          A=np.ones(10), B=np.ones(7))


def test_size_solved_from_an_affine_dim_when_no_bare_symbol_binds_it():
    prog = program(tensor("B", f64, ("N - 2",), "input"), tensor("A", f64, ("N",), "output"), sizes=("N",))
    call = bind_arguments(prog, {"B": np.ones(8)})
    assert call.sizes == {"N": 10} and call.arrays["A"].shape == (10,)
    # A bare-symbol dim binds N first, so the affine dim is the one reported.
    fails(prog, "B.shape[0] is 8 but the kernel expects N - 2 = 9 (N is 11 from A.shape[0]; B has shape (8,))",
          B=np.ones(8), A=np.ones(11))
    double = program(tensor("A", f64, ("2*N",), "input"), sizes=("N",))
    fails(double, "A.shape[0] is 5 but the kernel expects 2*N, and no size N >= 0 gives that", A=np.ones(5))


def test_negative_output_extent_is_reported():
    call = bind_arguments(CONV, {"X": np.ones(10), "W": np.ones(3)})
    assert call.arrays["Y"].shape == (8,)
    fails(CONV, "cannot allocate Y: Y.shape[0] = H - KH + 1 = -2 is negative "
                "(H is 2 from X.shape[0], KH is 5 from W.shape[0])", X=np.ones(2), W=np.ones(5))


def test_zero_sizes_are_allowed():
    call = bind_arguments(MATMUL, {"A": np.ones((0, 3), np.float32), "B": np.ones((3, 0), np.float32),
                                   "alpha": 1.0})
    assert call.arrays["C"].shape == (0, 0)


def test_sizes_as_keywords():
    looped = program(tensor("A", f64, ("N",), "inout"), sizes=("N", "T"))
    fails(looped, "size T cannot be determined from the arrays passed (no array shape determines it); "
                  "pass it as an integer keyword, e.g. T=...", A=np.ones(3))
    assert bind_arguments(looped, {"A": np.ones(3), "T": 5}).sizes == {"N": 3, "T": 5}
    assert bind_arguments(looped, {"A": np.ones(3), "T": np.int64(0)}).sizes["T"] == 0
    fails(looped, "size T must be a non-negative integer but got -1", A=np.ones(3), T=-1)
    fails(looped, "size T must be an integer but got float 2.0", A=np.ones(3), T=2.0)
    fails(looped, "size T must be an integer but got bool True", A=np.ones(3), T=True)
    fails(looped, "size N is 5 from the argument N=5 but A.shape[0] is 3", A=np.ones(3), T=1, N=5)


def test_output_only_sizes_come_from_keywords():
    fill = program(tensor("B", f32, ("N",), "output"), sizes=("N",))
    fails(fill, "size N cannot be determined from the arrays passed (it appears only in the shape of B, "
                "which was not passed); pass it as an integer keyword, e.g. N=...")
    assert bind_arguments(fill, {"N": 4}).arrays["B"].shape == (4,)


def test_assumptions_on_sizes_are_checked():
    prog = program(tensor("A", f64, ("N",), "input"), sizes=("N",),
                   assumptions=(Constraint("ge", Affine.parse("N - 1")),))
    fails(prog, "the sizes violate an assumption of kernel 'k': N - 1 >= 0 (N is 0 from A.shape[0])", A=np.ones(0))


def test_aliasing_with_a_written_array_is_refused():
    x = np.ones(4, np.float32)
    fails(UPDATE, "X and Y alias: they are the same array, but the kernel writes Y; pass separate arrays",
          X=x, Y=x)
    base = np.ones(5, np.float32)
    fails(UPDATE, "X and Y alias: they overlap in memory (one is a view of the other)",
          X=base[:4], Y=base[1:])
    readers = program(tensor("P", f32, ("N",), "input"), tensor("Q", f32, ("N",), "input"),
                      tensor("R", f32, ("N",), "output"), sizes=("N",))
    bind_arguments(readers, {"P": x, "Q": x})  # two read-only uses of one array are fine


def test_scalar_types():
    a, b = mats()
    fails(MATMUL, "alpha must be a real number (float32) but got bool True", A=a, B=b, alpha=True)
    fails(MATMUL, "alpha is a scalar parameter (float32) but got an array", A=a, B=b, alpha=np.float32([1]))
    fails(MATMUL, "alpha must be a real number (float32) but got str '1'", A=a, B=b, alpha="1")
    assert bind_arguments(MATMUL, {"A": a, "B": b, "alpha": np.float64(0.5)}).scalars["alpha"] == 0.5
    steps = program(tensor("A", f64, ("N",), "inout"), sizes=("N",), scalars=(ScalarDecl("T", i32),))
    fails(steps, "T must be an integer (int32) but got float 2.0; polyc does not convert silently",
          A=np.ones(2), T=2.0)
    fails(steps, "T must be an integer (int32) but got bool False", A=np.ones(2), T=False)
    fails(steps, "T = 4294967296 does not fit in int32", A=np.ones(2), T=2 ** 32)
    assert bind_arguments(steps, {"A": np.ones(2), "T": np.int64(3)}).scalars == {"T": 3}
    fails(MATMUL, "alpha = 1e+39 does not fit in float32 (largest finite value 3.403e+38)", A=a, B=b, alpha=1e39)
    fails(MATMUL, "alpha = -1e+39 does not fit in float32", A=a, B=b, alpha=-10 ** 39)
    assert bind_arguments(MATMUL, {"A": a, "B": b, "alpha": -np.inf}).scalars["alpha"] == -np.inf
    assert bind_arguments(MATMUL, {"A": a, "B": b, "alpha": 3.4028235e38}).scalars["alpha"] == 3.4028235e38


@pytest.mark.parametrize("dtype", [pc.u8, pc.u16])
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_unsigned_scalar_parameters_are_passed_and_range_checked(dtype, target):
    f = pc.compile(pc.kernel("y[i] = x[i] * n", n=dtype), target=target)
    x = np.array([1, 200], dtype.numpy)
    np.testing.assert_array_equal(f(x=x, n=3), x * dtype.numpy.type(3))     # wraps as numpy does
    with pytest.raises(ArgumentError, match=f"n = -1 does not fit in {dtype.numpy_name}"):
        f(x=x, n=-1)


def test_undeclared_dtypes_come_from_arrays_or_the_dtypes_map():
    prog = program(tensor("A", None, ("N",), "input"), tensor("B", None, ("N",), "output"), sizes=("N",))
    fails(prog, "A has dtype int16, which polyc kernels do not support (supported: float32, float64, "
                "int32, int64, uint8, uint16)", A=np.ones(3, np.int16))
    fails(prog, "cannot allocate output B: its element type is not known", A=np.ones(3))
    assert passed_dtypes(prog, {"A": np.ones(3, np.int32)}) == {"A": i32}
    call = bind_arguments(prog, {"A": np.ones(3)}, dtypes={"B": f64})
    assert call.arrays["B"].dtype == np.float64
    fails(prog, "A has dtype float32 but the kernel expects float64", dtypes={"A": f64, "B": f64},
          A=np.ones(3, np.float32))


def test_c_args_follow_the_signature_and_allocate_temps():
    prog = program(tensor("A", f32, ("N",), "input"), tensor("T", f32, ("N + 1",), "temp"),
                   tensor("B", f32, ("N",), "output"), sizes=("N",), scalars=(ScalarDecl("s", i64),))
    a = np.ones(3, np.float32)
    call = bind_arguments(prog, {"A": a, "s": 7})
    sig = KernelSignature("k", (KernelParam("B", "array", f32), KernelParam("N", "size", i64),
                                KernelParam("A", "array", f32), KernelParam("T", "array", f32),
                                KernelParam("s", "scalar", i64)))
    b_arg, n, a_arg, t_arg, s = call.c_args(sig)
    assert b_arg is call.arrays["B"] and a_arg is a and n == 3 and s == 7
    assert t_arg.shape == (4,) and t_arg.dtype == np.float32
    assert call.c_args(sig)[3] is t_arg  # scratch is allocated once per call
    with pytest.raises(ArgumentError, match="A has dtype float32 but the kernel expects float64"):
        call.c_args(KernelSignature("k", (KernelParam("A", "array", f64),)))


def test_bound_call_drives_a_compiled_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    source = textwrap.dedent("""\
        #include <stdint.h>
        void matmul(float *restrict A, float *restrict B, float *restrict C,
                    int64_t M, int64_t K, int64_t N, float alpha) {
            #pragma omp parallel for
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    float acc = 0.0f;
                    for (int64_t k = 0; k < K; k++) acc += A[i * K + k] * B[k * N + j];
                    C[i * N + j] = alpha * acc;
                }
        }
    """)
    sig = KernelSignature("matmul", tuple(KernelParam(n, "array", f32) for n in "ABC")
                          + tuple(KernelParam(n, "size", i64) for n in "MKN")
                          + (KernelParam("alpha", "scalar", f32),))
    kernel = load_function(compile_c(source), sig)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 3)).astype(np.float32)
    call: BoundCall = bind_arguments(MATMUL, {"A": a, "B": b, "alpha": 0.5})
    kernel(*call.c_args(sig))
    np.testing.assert_allclose(call.results(), 0.5 * a @ b, rtol=1e-4, atol=1e-5)


@pc.kernel
def _shifted(A: pc.f64["N"], O: pc.f64["N"], s: int):
    for j in range(s, s + N):
        O[j - s] = A[j - s] + 1.0


def test_integer_parameters_that_would_overflow_the_loop_bounds_are_refused():
    """`s + N` in int64 wraps for s near 2**63: the loop ran nowhere and left O unwritten."""
    a = np.arange(4.0)
    f = pc.compile(_shifted)
    for s in (3, 2 ** 40):
        out = np.full(4, -7.0)
        f(A=a, O=out, s=s)
        np.testing.assert_array_equal(out, a + 1.0)
    assert 2 <= _shifted.program.index_scale <= 16
    as_value = pc.compile(pc.kernel("B[i] = A[i] * s", s=pc.i64))     # s only as data: it may be large
    assert as_value(A=np.ones(2), s=2 ** 62).tolist() == [2.0 ** 62] * 2
    with pytest.raises(ArgumentError, match=r"s = \d+ \(the argument s=\d+\) is too large"):
        f(A=a, O=np.zeros(4), s=2 ** 63 - 2)
    einstein = pc.compile(pc.kernel("O[i] +=! A[i, j - s] where j in s:s+M", s=pc.i64, A=pc.f64["N", "M"]))
    np.testing.assert_array_equal(einstein(A=np.ones((2, 4)), s=2 ** 50), [4.0, 4.0])
    np.testing.assert_array_equal(einstein(A=np.ones((2, 4)), s=-2 ** 50), [4.0, 4.0])
    for s in (2 ** 63 - 2, -2 ** 62):
        with pytest.raises(ArgumentError, match="too large"):
            einstein(A=np.ones((2, 4)), s=s)
