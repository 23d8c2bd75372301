"""Programs at their edges: 0-d results beside row blocks, loop kernels that define their outputs
by accumulation, mixed float types, and polyc entry points that take kernels, not programs."""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels.linalg import matmul
from kernels.nn import softmax
from kernels.program_ops import matmul_nt, scale

from .loop_accumulators import column_sum_of_squares, running_total

total = pc.kernel("s +=! X[i, j]", name="total")
relu = pc.kernel("Y[i, j] = max(X[i, j], 0.0)", name="relu")


def _attention_with_sums(blocks):
    @pc.program(blocks=blocks)
    def attention_with_sums(Q: pc.f64["S", "D"], K: pc.f64["S", "D"], V: pc.f64["S", "D"]):
        s = matmul_nt.kernel(A=Q, B=K)
        p = softmax.kernel(X=scale.kernel(X=s, alpha=0.125))
        return {"out": matmul.kernel(A=p, B=V), "score_sum": total(X=s), "p_sum": total(X=p)}
    return attention_with_sums


@pytest.mark.parametrize("blocks", [False, 64, "auto"])
def test_a_0d_result_beside_row_blocks(blocks, threads):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((256, 16)) for _ in range(3))
    prog = _attention_with_sums(blocks)
    r = prog(Q=q, K=k, V=v)
    s = q @ k.T
    p = np.exp(0.125 * s - (0.125 * s).max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(r["score_sum"], s.sum(), rtol=1e-12)
    np.testing.assert_allclose(r["p_sum"], 256.0, rtol=1e-12)
    np.testing.assert_allclose(r["out"], p @ v, rtol=1e-10)
    if blocks == 64:     # the softmax's 0-d sum runs in the blocks, as a row accumulation
        assert "copy of total" in prog.explain() or "total" in prog.explain().split("rows S")[1]


def test_a_loop_kernel_that_defines_its_output_by_accumulation(threads):
    def squares(blocks):
        @pc.program(blocks=blocks)
        def squares(X: pc.f64["M", "N"]):
            return column_sum_of_squares(X=relu(X=X))
        return squares
    x = np.random.default_rng(1).standard_normal((300, 7))
    whole, blocked = squares(False), squares(64)
    got = whole(X=x)
    np.testing.assert_allclose(got, (np.maximum(x, 0) ** 2).sum(0), rtol=1e-14)
    np.testing.assert_array_equal(blocked(X=x), got)      # the blocks add the rows in the same order
    assert "reduced over the blocks in order" in blocked.explain()


def test_a_loop_kernel_that_reads_what_its_output_held_is_still_refused():
    with pytest.raises(pc.ProgramError, match=r"updates c in place \(it reads values c had before the call\)"):
        @pc.program
        def totals(X: pc.f64["M", "N"]):
            return running_total(X=X)


def test_mixed_undeclared_float_types_are_named_by_the_programs_parameters():
    @pc.program
    def attention(Q: pc.tensor["S", "D"], K: pc.tensor["S", "D"], V: pc.tensor["S", "D"]):
        return matmul.kernel(A=softmax.kernel(X=matmul_nt.kernel(A=Q, B=K)), B=V)
    q = np.ones((5, 4))
    with pytest.raises(pc.ArgumentError, match=r"program attention must share one float type unless declared "
                                               r"\(Q is float32, K is float64, V is float64\)"):
        attention(Q=q.astype(np.float32), K=q, V=q)


@pytest.mark.parametrize("entry", [pc.compile, pc.codegen])
def test_compile_and_codegen_say_what_to_pass_for_a_program(entry):
    @pc.program
    def probabilities(X: pc.f64["M", "N"]):
        return softmax.kernel(X=X)
    with pytest.raises(pc.PolycError, match="not the operator program 'probabilities': call the program itself"):
        entry(probabilities)
    assert "polyc_" in pc.codegen(probabilities.kernel)
