"""Regression tests for what the kernel fuzzer (`polyc.testing.kernel_fuzz`) found, minimised.

Each test is the smallest kernel/schedule/data that still shows the bug.  Bugs whose fix belongs
to another area are marked `xfail(strict=True)`: the test starts passing (and so fails as XPASS)
once the fix lands, which is the signal to drop the marker.
"""
# ruff: noqa: F821
# flake8: noqa: F821
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from polyc.testing.kernel_gen_common import load_function


def test_integer_max_reduction_reference_uses_the_type_extremes():
    """Found by the fuzzer (crash in the reference): the identity of an integer `max=!`/`min=!`
    is -inf/+inf, which the interpreter converted to an integer (OverflowError) while the C uses
    INT32_MIN/INT32_MAX.  Fixed in `polyc/runtime/interpreter.py`."""
    k = pc.kernel("B[i] max=! A[i, j]\nC[i] min=! A[i, j]", name="int_max_min", A=pc.i32["N", "M"])
    a = np.array([[-7, -3, -9], [4, 2, 8]], dtype=np.int32)
    want = {"B": np.array([-3, 8], dtype=np.int32), "C": np.array([-9, 2], dtype=np.int32)}
    ref = k.reference(A=a)
    got = pc.compile(k)(A=a)
    for name in want:
        np.testing.assert_array_equal(ref[name], want[name])
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_einstein_max_reduction_keeps_nan(target):
    """Silent mismatch: `max=!` over a row holding NaN gives the other values' max (or -inf for an
    all-NaN row) in compiled code, NaN in the reference."""
    k = pc.kernel("B[i] max=! A[i, j]", name="nan_max")
    a = np.array([[1.0, np.nan, 2.0], [np.nan, np.nan, np.nan]])
    np.testing.assert_array_equal(pc.compile(k, target=target)(A=a), k.reference(A=a))


def test_loop_max_with_nan_follows_python():
    """Silent mismatch: Python's `max(x, nan)` is x and `max(nan, x)` is nan, so a loop kernel's
    builtin max keeps the first operand unless a later one compares greater (np.maximum propagates)."""
    fn = load_function("loop_nan_max", """def loop_nan_max(A: pc.f64['N'], B: pc.f64['N']):
    for i in range(N):
        B[i] = max(B[i], A[i])
""")
    k = pc.kernel(fn)
    a, b = np.array([np.nan, 1.0]), np.array([0.0, np.nan])
    got, want = b.copy(), b.copy()
    pc.compile(k)(A=a, B=got)
    k.reference(A=a, B=want)
    np.testing.assert_array_equal(got, want)


def test_unroll_and_jam_of_two_statements_generates_cuda():
    """A legal schedule refused with an untyped-looking isl failure: `unroll_and_jam('i', 2)` of a
    loop kernel whose loop holds two statements compiled for "c" but not for "cuda"/"cuda-emu"
    (`isl_ast_build_node_from_schedule_map failed: position or range out of bounds`): the automatic
    GPU mapping rewrote the schedule's dimensions but kept the isl `unroll[2]` option of the old
    ones.  Fixed in `schedule/gpu.py`: the options follow the dims, and the unrolled loop stays
    written out inside each thread (it is not mapped)."""
    fn = load_function("uj_two", """def uj_two(A: pc.f64['N'], B: pc.f64['N'], C: pc.f64['N']):
    for i in range(N):
        B[i] = A[i]
        C[i] = A[i] + 1.0
""")
    k = pc.kernel(fn)
    s = k.schedule().unroll_and_jam("i", 2)
    src = pc.codegen(k, s, target="cuda")
    assert src.count("d_B[") == 2 and src.count("d_C[") == 2, src     # both copies of the jammed body
    f = pc.compile(k, s, target="cuda-emu")
    for n in (5, 6):
        a = np.arange(float(n))
        b, c = np.zeros(n), np.zeros(n)
        f(A=a, B=b, C=c)
        np.testing.assert_array_equal(b, a)
        np.testing.assert_array_equal(c, a + 1.0)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_local_scalar_in_loop_empty_at_small_size(target):
    """A valid kernel refused at call time for N=1: the local `t` lives in `range(2, N - 2)`, which
    is empty for N < 5; the reference ran fine, the compiled kernel raised ArgumentError ("cannot
    allocate t: t.shape[0] = N - 2 = -1 is negative").  A temp's extent is now max(0, ...): an
    empty loop runs zero times (`polyc/runtime/arguments.py`)."""
    fn = load_function("local_small", """def local_small(A: pc.f64['N'], B: pc.f64['N']):
    for k in range(2, N - 2):
        t = A[k] + 0.5
        B[k] = t * 2.0
""")
    k = pc.kernel(fn)
    f = pc.compile(k, target=target)
    for n in (1, 4, 7):
        a, b = np.arange(float(n)), np.zeros(n)
        want = np.zeros(n)
        want[2:n - 2] = (a[2:n - 2] + 0.5) * 2.0
        f(A=a, B=b)
        np.testing.assert_array_equal(b, want)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_auto_schedule_of_a_kernel_without_statements(target):
    """Found by the fuzzer (crash): a loop kernel whose loops hold only `pass` has no statements;
    `schedule="auto"` raised IndexError in the legality check.  Fixed in `schedule/legality.py`."""
    fn = load_function("no_statements", """def no_statements(A: pc.f64['N']):
    for i in range(N):
        pass
""")
    k = pc.kernel(fn)
    a = np.arange(3.0)
    pc.compile(k, "auto", target=target)(A=a)
    np.testing.assert_array_equal(a, np.arange(3.0))


def test_automatic_gpu_mapping_after_fuse_and_interchange():
    """A legal schedule refused at call time on "cuda-emu" although the user mapped nothing:
    `PolycError: loop 'i_1_outer' is mapped to blocks but sits inside a thread-mapped or serial
    in-kernel loop` (the same schedule runs on "c").  `fuse` puts S1 at j = 0 of S0's j loop, so the
    generated code runs S1 inside that loop; the loop tree left S1 out of it and tiled j to
    (block, thread) with S1's own block loop beneath.  Fixed in `schedule/gpu.py` (`loop_tree`)."""
    k = pc.kernel("T0[i, j] = 1.5\nT2[i] = A0[i]", name="fuse_interchange_gpu",
                  A0=pc.f32["M"], T0=pc.f32["N", "N"])
    s = k.schedule().fuse("S1", "S0").interchange("i", "j")
    a = np.arange(6, dtype=np.float32)
    want = pc.compile(k, s)(A0=a, N=4)
    np.testing.assert_array_equal(want["T0"], np.full((4, 4), 1.5, dtype=np.float32))
    np.testing.assert_array_equal(want["T2"], a)
    got = pc.compile(k, s, target="cuda-emu")(A0=a, N=4)
    for name in ("T0", "T2"):
        np.testing.assert_array_equal(got[name], want[name])


def test_loop_modulo_of_negative_integer_follows_python():
    """Silent mismatch: in a loop kernel `A[i] % 3` is Python's floored remainder (-7 % 3 == 2);
    the compiled C computes the truncated one (-1)."""
    fn = load_function("loop_mod", """def loop_mod(A: pc.i64['N'], B: pc.i64['N']):
    for i in range(N):
        B[i] = A[i] % 3
""")
    k = pc.kernel(fn)
    a = np.array([-7, 7, -3], dtype=np.int64)
    got, want = np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64)
    pc.compile(k)(A=a, B=got)
    k.reference(A=a, B=want)
    np.testing.assert_array_equal(want, [2, 1, 0])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_minus_of_a_negative_literal_compiles(target):
    """Found by the fuzzer (CompileError on a valid kernel, case seed=1 index=6683): `A[i] -= -(1)`
    printed as `A[i] += (--1.0f)`, which C reads as a decrement.  Fixed in `codegen/cexpr.py`."""
    fn = load_function("neg_neg", """def neg_neg(A: pc.f32['N']):
    for i in range(N):
        A[i] -= -(1)
""")
    k = pc.kernel(fn)
    a = np.zeros(3, dtype=np.float32)
    pc.compile(k, target=target)(A=a)
    np.testing.assert_array_equal(a, np.ones(3, dtype=np.float32))


def test_cuda_emu_local_scalar_in_triangular_loop_under_strided_loop():
    """A valid loop kernel refused on "cuda-emu" (case seed=1 index=7518, minimised): `PolycError:
    computing the dependences on A1 failed inside isl: ... isl_union_access_info_compute_flow
    failed: affine expression involves some of the domain dimensions`; "c" runs it correctly.
    An isl bug in the dataflow analysis of A1 (two sources, a triangular loop under a strided
    one); the dependences are then computed from their definition (`poly/dependences.py`)."""
    fn = load_function("local_tri_stride", """def local_tri_stride(A0: pc.f64['N', 'M'], A1: pc.f64['N']):
    for j in range(1, M - 1, 2):
        for k in range(0, N):
            for l in range(j):
                t0 = (A0[k, l] * A1[k])
                A1[k] = A0[k, l]
            A1[k] = A0[k, j]
""")
    k = pc.kernel(fn)
    rng = np.random.default_rng(0)
    a0, a1 = rng.random((6, 6)), rng.random(6)
    got, want = a1.copy(), a1.copy()
    pc.compile(k, target="cuda-emu")(A0=a0.copy(), A1=got)
    k.reference(A0=a0.copy(), A1=want)
    np.testing.assert_array_equal(got, want)


_TRI_STRIDE = """def tri(A0: pc.f64['N', 'M'], A1: pc.f64['N']):
    for j in range(1, M - 1, STEP):
        for k in range(0, N):
            for l in range(j):
                t0 = (A0[k, l] * A1[k])
                A1[k] = A0[k, l]
            A1[k] = A0[k, j]
"""


@pytest.mark.parametrize("source", [
    _TRI_STRIDE.replace("STEP", "1"), _TRI_STRIDE.replace("STEP", "3"),
    """def stencil(A: pc.f64['N'], B: pc.f64['N'], T: int):
    for t in range(T):
        for i in range(1, N - 1):
            B[i] = A[i - 1] + A[i + 1]
        for i in range(1, N - 1):
            A[i] = B[i] * 0.5
""",
    """def lower(L: pc.f64['N', 'N'], x: pc.f64['N'], b: pc.f64['N']):
    for i in range(N):
        s = b[i]
        for j in range(i):
            s -= L[i, j] * x[j]
        x[i] = s / L[i, i]
"""])
def test_dependences_by_definition_match_isl_dataflow(source):
    """The fallback used when isl's dataflow analysis fails computes the same relations as isl on
    kernels where it works (flow: last writer only; anti and output: every earlier access)."""
    from polyc.poly.dependences import compute_flow, dependences_by_definition
    name = source.split("(")[0].split()[-1]
    m = pc.kernel(load_function(name, source)).model
    for t in m.program.tensors:
        space = m.tensor_space_set(t.name, len(t.shape or ()))
        reads, writes = m.reads.intersect_range(space), m.writes.intersect_range(space)
        for sink, src, must in ((reads, writes, True), (writes, reads, False), (writes, writes, False)):
            want = compute_flow(sink, src, m.schedule_map, must)
            got = dependences_by_definition(sink, src, m.schedule_map, must)
            assert got.is_equal(want), (t.name, must, str(got), str(want))


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_float_accumulated_into_integer_intermediate(target):
    """Silent mismatch (case seed=1 index=7536, minimised): T is an i64 intermediate and
    `T[i] += A[i]` adds f64 values; the reference converted A before adding (T + (int64)A = -3 for
    T=-3, A=0.5).  The rule (README "Types") is numpy's `np.add(T, A, out=T, casting="unsafe")` and
    C's compound assignment: add in the promoted type, then convert: (int64)(-3 + 0.5) = -2.
    Fixed in `polyc/runtime/interpreter.py`."""
    k = pc.kernel("T[i] = B[i]\nT[i] += A[i]\nC[i] = T[i]", name="mixed_accumulate",
                  A=pc.f64["M"], B=pc.i64["M"])
    a = np.array([0.5, 1.5, -0.5, 0.9])
    b = np.array([-3, 2, 1, 0], dtype=np.int64)
    want = b.copy()
    np.add(want, a, out=want, casting="unsafe")
    np.testing.assert_array_equal(want, [-2, 3, 0, 0])
    np.testing.assert_array_equal(k.reference(A=a, B=b), want)
    np.testing.assert_array_equal(pc.compile(k, target=target)(A=a, B=b), want)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_float_reduced_into_integer_converts_at_every_step(target):
    """The same rule for `+=!` and `*=`: each step combines in float and converts, so the row
    [1.5, -0.7, 0.5] sums to int64 0 (1.5 -> 1, 0.3 -> 0, 0.5 -> 0), not 1 (converting each term
    first, or only the total), and -3 *= 0.5 gives -1."""
    k = pc.kernel("T[i] +=! A[i, j]\nC[i] = T[i]", name="mixed_reduce", A=pc.f64["M", "N"], T=pc.i64["M"])
    a = np.array([[1.5, -0.7, 0.5], [0.9, 0.9, 0.9]])
    np.testing.assert_array_equal(k.reference(A=a), [0, 0])
    np.testing.assert_array_equal(pc.compile(k, target=target)(A=a), [0, 0])
    m = pc.kernel("T[i] = B[i]\nT[i] *= A[i]\nC[i] = T[i]", name="mixed_scale", A=pc.f64["M"], B=pc.i64["M"])
    b, a1 = np.array([-3, 3], dtype=np.int64), np.array([0.5, 1.5])
    np.testing.assert_array_equal(m.reference(A=a1, B=b), [-1, 4])
    np.testing.assert_array_equal(pc.compile(m, target=target)(A=a1, B=b), [-1, 4])


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_strided_loops_interchanged_tiled_and_skewed_stay_in_their_domain(target):
    """Silent wrong answer (case seed=1 index=9712, minimised): with N=6 the only j is 2, yet the
    compiled kernel stores -(j) = -10 into A[2]: an instance with j=10 runs."""
    fn = load_function("stride_interchange_skew", """def stride_interchange_skew(A: pc.f64['M'], N: int):
    for j in range(2, N - 2, 2):
        for k in range(0, M, 2):
            A[k] = -(j)
""")
    k = pc.kernel(fn)
    s = k.schedule().interchange("j", "k").tile(k=8, j=2).skew("j_outer", "k_inner", 1)
    got, want = np.zeros(4), np.zeros(4)
    pc.compile(k, s, target=target)(A=got, N=6)
    k.reference(A=want, N=6)
    np.testing.assert_array_equal(want, [-2.0, 0.0, -2.0, 0.0])
    np.testing.assert_array_equal(got, want)
