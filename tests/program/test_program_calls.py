"""How programs and compiled kernels are called: a program is a Python function, so its arrays
bind by position as well as by name; a compiled kernel takes them by name and says so."""
import numpy as np
import pytest

import polyc as pc
from polyc.errors import ArgumentError
from kernels import programs as P

from .concurrent import mismatches_from_threads

TOL = dict(rtol=2e-4, atol=2e-5)


def test_program_arrays_bind_by_position_in_parameter_order():
    prog = P.ln_residual_gelu()
    a = P.inputs(prog, dict(M=3, N=8))
    by_name = prog(**a)
    np.testing.assert_array_equal(prog(a["x"], a["r"], a["g"], a["b"]), by_name)
    np.testing.assert_array_equal(prog(a["x"], a["r"], b=a["b"], g=a["g"]), by_name)
    np.testing.assert_allclose(prog.reference(a["x"], a["r"], a["g"], a["b"]), by_name, **TOL)
    assert prog.plan(a["x"], a["r"], a["g"], a["b"]) is prog.plan(**a)
    # the order is the parameters': gamma and beta swapped give another function
    assert not np.allclose(prog(a["x"], a["r"], a["b"], a["g"]), by_name)


def test_program_positional_mistakes_are_typed():
    prog = P.ln_residual_gelu()
    a = P.inputs(prog, dict(M=3, N=8))
    with pytest.raises(ArgumentError, match="takes 4 arrays"):
        prog(a["x"], a["r"], a["g"], a["b"], a["b"])
    with pytest.raises(ArgumentError, match="x both by position and by name"):
        prog(a["x"], x=a["x"], r=a["r"], g=a["g"], b=a["b"])
    with pytest.raises(ArgumentError, match="missing array argument"):
        prog(a["x"], a["r"])


def test_program_shape_disagreements_name_both_arrays():
    prog = P.ln_residual_gelu()
    a = P.inputs(prog, dict(M=3, N=8))
    with pytest.raises(ArgumentError, match=r"size N is 8 from x\.shape\[1\] but r\.shape\[1\] is 5 "
                                            r"\(r has shape \(3, 5\)\)"):
        prog(**dict(a, r=np.ones((3, 5), np.float32)))
    shifted = pc.kernel("Y[i] = A[i] + B[i + 1]", name="shifted_sum")

    @pc.program
    def shift(a: pc.f32["N"], b: pc.f32["N + 1"]):
        return shifted(A=a, B=b)
    with pytest.raises(ArgumentError, match=r"b\.shape\[0\] is 7 but shift expects N \+ 1 = 5 \(N is 4 from "
                                            r"a\.shape\[0\]\); b has shape \(7,\)"):
        shift(a=np.ones(4, np.float32), b=np.ones(7, np.float32))


def test_compiled_kernels_take_arrays_by_name():
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm")
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    for target in ("c", "cuda-emu"):
        f = pc.compile(mm, target=target)
        with pytest.raises(ArgumentError, match=r"by name.*f\(C=\.\.\., A=\.\.\., B=\.\.\.\)|by name.*A=\.\.\."):
            f(a, b)
        np.testing.assert_array_equal(f(A=a, B=b), np.full((2, 4), 3, np.float32))


def test_planned_buffers_are_kept_per_thread_and_concurrent_calls_stay_apart():
    """Intermediates live in buffers kept between calls (fresh multi-MB buffers cost page faults
    every call), one set per calling thread, so concurrent calls never share them."""
    prog = P.attention()
    shapes = (dict(S=24, D=8), dict(S=33, D=8))
    inputs = [P.inputs(prog, s, seed=k) for k, s in enumerate(shapes)]
    wants = [prog.reference(**a) for a in inputs]
    first = prog(**inputs[0])
    pool = prog._host_pool(prog.plan(**inputs[0]))
    assert all(b.ctypes.data % 64 == 0 for b in pool)
    np.testing.assert_array_equal(prog(**inputs[0]), first)
    assert prog._host_pool(prog.plan(**inputs[0])) is pool          # the same buffers, reused
    assert not mismatches_from_threads(prog, list(zip(inputs, wants)), threads=4, repeats=20, **TOL)


@pytest.mark.parametrize("options", [dict(vendor=True), dict(vendor=True, blocks=2), dict()])
def test_a_blas_product_of_a_computed_operand_read_transposed(options):
    # the BLAS call reads gelu(A) transposed in place of its skipped re-layout: gelu(A) is stored
    from kernels.program_ops import gelu, matmul_nt

    @pc.program(**options)
    def p(A: pc.f32["S", "S"]):
        return matmul_nt.kernel(A=A, B=gelu.kernel(X=A))

    n = 8 if options else 512          # by default BLAS takes products from 0.27 GFLOP
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    g = 0.5 * a * (1 + np.tanh(np.float32(0.7978845608028654) * (a + np.float32(0.044715) * a ** 3)))
    np.testing.assert_allclose(p(A=a), a @ g.T, rtol=2e-4, atol=2e-4)
    assert "BLAS" in p.explain()
