"""Programs that cannot be traced give typed errors at the user's line; clean-ups (common
subexpressions, dead operators, folded scalars) and the fusion rule's refusals."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import polyc as pc
from kernels.linalg import matmul, transpose
from kernels.nn import softmax
from kernels.program_ops import add, gelu, scale
from polyc.errors import ProgramError


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def test_shape_mismatch_names_the_line():
    def bad(a: pc.f32["M", "K"], b: pc.f32["N", "K"]):
        return matmul.kernel(A=a, B=b)   # K != N
    with pytest.raises(ProgramError, match=r"shape mismatch: kernel matmul needs B.shape\[0\] = K") as e:
        pc.program(bad)
    assert isinstance(e.value, pc.PolycError)
    assert e.value.location.line == _line_of(bad, "matmul.kernel(A=a")


def test_calling_a_non_kernel_is_refused_at_its_line():
    def bad(a: pc.f32["M", "K"]):
        return np.exp(a)
    with pytest.raises(ProgramError, match="only polyc kernels") as e:
        pc.program(bad)
    assert e.value.location.line == _line_of(bad, "np.exp")

    def worse(a: pc.f32["M", "K"]):
        return softmax(X=a)             # the LibraryKernel, not its .kernel
    with pytest.raises(ProgramError, match="not callable") as e:
        pc.program(worse)
    assert e.value.location.line == _line_of(worse, "softmax(X=a)")


def test_tensor_of_another_program_and_missing_annotations():
    leaked = {}

    def first(a: pc.f32["M", "N"]):
        leaked["h"] = a
        return gelu.kernel(X=a)
    pc.program(first)

    def second(a: pc.f32["M", "N"]):
        return add.kernel(A=a, B=leaked["h"])   # not produced in this program
    with pytest.raises(ProgramError, match="must be a tensor of this program"):
        pc.program(second)

    def unannotated(a):
        return gelu.kernel(X=a)
    with pytest.raises(ProgramError, match="needs a tensor type annotation"):
        pc.program(unannotated)


def test_missing_scalar_and_wrong_rank():
    def no_alpha(a: pc.f32["M", "N"]):
        return scale.kernel(X=a)
    with pytest.raises(ProgramError, match="needs its scalar alpha"):
        pc.program(no_alpha)

    def rank(a: pc.f32["N"]):
        return gelu.kernel(X=a)
    with pytest.raises(ProgramError, match="rank 2"):
        pc.program(rank)


def test_common_subexpressions_dead_operators_and_folded_scalars():
    @pc.program
    def prog(a: pc.f32["M", "N"]):
        x = gelu.kernel(X=a)
        y = gelu.kernel(X=a)            # same computation: shared
        scale.kernel(X=a, alpha=3.0)    # never used: removed
        return add.kernel(A=x, B=y)
    assert [n.kernel.name for n in prog.nodes] == ["gelu", "add"]
    assert any("shared" in n for n in prog.notes) and any("removed" in n for n in prog.notes)
    a = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    np.testing.assert_allclose(prog(a=a), 2 * gelu.reference(a), rtol=1e-5, atol=1e-6)
    # a folded scalar is a constant of the combined program, not a parameter
    @pc.program
    def scaled(a: pc.f32["M", "N"]):
        return scale.kernel(X=a, alpha=0.25)
    assert scaled.kernel.program.scalars == ()
    np.testing.assert_allclose(scaled(a=a), a * np.float32(0.25))


def test_transposed_consumer_is_not_fused():
    """A transpose reads its producer column-wise: no row of the intermediate is complete inside one
    iteration of a fused loop, so the rule keeps them apart (and the result is still right)."""
    @pc.program
    def prog(a: pc.f32["M", "N"]):
        return transpose.kernel(A=gelu.kernel(X=a))
    a = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
    np.testing.assert_allclose(prog(a=a), gelu.reference(a).T, rtol=1e-5, atol=1e-6)
    assert len(prog.groups) == 2


def test_combined_kernel_holds_every_statement():
    from kernels.programs import attention
    prog = attention()
    k = prog.kernel
    assert len(k.program.statements) == 1 + 2 + 1 + 6 + 2    # transpose, products, scale, softmax
    assert {t.name for t in k.program.tensors if t.role == "temp"} >= {"relayout_matmul5_C", "softmax2_e"}
    arrays = {n: np.random.default_rng(2).standard_normal((7, 3)).astype(np.float32) for n in "QKV"}
    np.testing.assert_allclose(k(**arrays), prog.reference(**arrays), rtol=2e-4, atol=2e-5)


def test_html_shows_groups_and_memory():
    from kernels.programs import attention, inputs
    prog = attention()
    assert "call the program" in prog._repr_html_()
    prog(**inputs(prog, dict(S=8, D=2)))
    page = prog._repr_html_()
    assert "<svg" in page and "attention_head_g0" in page and "planned peak" in page and "loop outline" in page


def test_call_arguments_are_checked():
    @pc.program
    def prog(a: pc.f32["M", "N"]):
        return gelu.kernel(X=a)
    with pytest.raises(pc.ArgumentError, match="missing array argument a"):
        prog()
    with pytest.raises(pc.ArgumentError, match="dtype float64"):
        prog(a=np.zeros((2, 3)))
    with pytest.raises(pc.ArgumentError, match="no parameter b"):
        prog(a=np.zeros((2, 3), np.float32), b=1)


def test_a_cuda_program_without_a_usable_gpu_says_what_is_missing():
    from polyc.runtime.cuda_pycuda import import_driver
    try:
        import_driver()
    except pc.TargetUnavailableError:
        pass
    else:
        pytest.skip("this machine can run target 'cuda'")

    @pc.program(target="cuda")
    def p(X: pc.f32["I", "K"], Y: pc.f32["K", "J"]):
        return matmul.kernel(A=X, B=Y)
    with pytest.raises(pc.TargetUnavailableError, match="target 'cuda'"):
        p(X=np.ones((3, 4), np.float32), Y=np.ones((4, 5), np.float32))


def test_tracing_errors_say_what_happened_where():
    sq = pc.kernel("Y[i] = X[i] * X[i]", name="sq_err")

    def typo(X: pc.f64["N"]):
        return sq(X=sqq(X=X))  # noqa: F821 - the typo under test
    with pytest.raises(ProgramError, match="tracing program typo raised NameError: name 'sqq' is not defined"):
        pc.program(typo)

    def positional(X: pc.f64["N"]):
        return sq(X)
    with pytest.raises(ProgramError, match=r"by name, not by position .* call it as f\(X=\.\.\.\)") as e:
        pc.program(positional)
    assert e.value.location.line == _line_of(positional, "sq(X)")


def test_inputs_too_small_for_a_chain_of_shrinking_operators():
    shift = pc.kernel("B[i] = A[i] + A[i + 1]", name="shift")

    @pc.program
    def shifts(A: pc.f64["N"]):
        return shift(A=shift(A=shift(A=A)))     # extent N - 3

    assert shifts(A=np.ones(3)).shape == (0,)
    for call in (shifts, shifts.reference, shifts.plan):
        with pytest.raises(pc.ArgumentError, match=r"shape\[0\] = N - 3 = -1 is negative with N=2"):
            call(A=np.ones(2))


def test_a_compiled_kernel_inside_a_program_is_a_program_error_at_the_line():
    callee = pc.compile(gelu.kernel)
    with pytest.raises(ProgramError, match="symbolic while a program is traced") as e:
        @pc.program
        def outer(X: pc.f64["M", "N"]):
            return callee(X=X)
    assert e.value.location is not None and e.value.location.line > 0


def test_plan_views_and_summaries_say_what_they_mean():
    @pc.program
    def p(X: pc.f64["M", "N"]):
        return gelu.kernel(X=X)

    x = np.ones((3, 4))
    p.plan(X=x)
    assert p.groups and p.memory.summary() == "intermediates: none"    # the plan just made
    @pc.program
    def mm(A: pc.f32["M", "K"], B: pc.f32["K", "N"]):
        return matmul.kernel(A=A, B=B)

    a = np.ones((511, 511), np.float32)
    mm(A=a, B=a)
    assert "(0.2669 GFLOP < 0.2684)" in mm.explain()
