"""Einstein-notation parsing and lowering: statements, reductions, where clauses and parse errors."""
import pytest

import polyc as pc
from polyc.frontend.einsum import program_from_einsum


def lowered(text, **declared):
    return program_from_einsum(text, "k", declared)


def test_reduction_lowers_to_init_and_update():
    p = lowered("C[i, j] +=! A[i, k] * B[k, j]")
    init, upd = p.statements
    assert init.iterators == ("i", "j") and init.update is None and init.value == pc.ir.Const(0)
    assert upd.iterators == ("i", "j", "k") and upd.update == "+" and upd.reduction == ("k",)
    assert [t.role for t in p.tensors] == ["output", "input", "input"]


@pytest.mark.parametrize("op,identity", [("*=!", 1), ("max=!", float("-inf")), ("min=!", float("inf"))])
def test_reduction_identities(op, identity):
    init, upd = lowered(f"m[i] {op} X[i, j]").statements
    assert init.value.value == identity and upd.update == op[:-2]


def test_plain_accumulate_makes_target_inout():
    p = lowered("C[i] += A[i]")
    assert len(p.statements) == 1 and p.tensor("C").role == "inout"


def test_intermediates_are_temps_and_where_clauses_become_constraints():
    p = lowered("t[i] = A[i] * 2\nB[i, k] +=! t[j] where j in 0:i+1, k in 0:1")
    assert p.tensor("t").role == "temp" and p.tensor("B").role == "output"
    upd = p.statements[-1]
    assert "j" not in upd.inferred and "i" in upd.inferred
    assert {str(c) for c in upd.domain[0]} >= {"j >= 0", "i - j >= 0"}


def test_affine_subscripts_and_scalar_parameters():
    p = lowered("B[i] = alpha * A[2 * i + 1] - i")
    st = p.statements[0]
    assert str(st.value.accesses()[0]) == "A[2*i + 1]"
    assert [s.name for s in p.scalars] == ["alpha"]


def test_declared_types_fix_dtype_and_shape():
    p = lowered("B[i] = A[i]", A=pc.f32["N"], B=pc.f32["N"])
    assert p.tensor("A").dtype == pc.f32 and str(p.tensor("B").shape[0]) == "N"


def error_of(text, **declared):
    with pytest.raises(pc.ParseError) as info:
        program_from_einsum(text, "k", declared)
    return info.value


def test_parse_error_has_line_column_and_caret():
    e = error_of("C[i] = A[i]\nD[i] = A[i] +* 2")
    assert (e.line, e.column) == (2, 14)
    assert "expected a value" in str(e)
    lines = str(e).splitlines()
    assert lines[-2].strip() == "D[i] = A[i] +* 2" and lines[-1].index("^") == lines[-2].index("*")


def test_non_affine_subscript_is_refused_at_its_column():
    e = error_of("B[i] = A[i * j]")
    assert "must be affine" in str(e) and e.column == 12  # the caret sits under the `*`


def test_unknown_function_lists_the_available_ones():
    e = error_of("B[i] = foo(A[i])")
    assert "unknown function 'foo'" in str(e) and "exp" in str(e)


def test_missing_bang_for_reduction_is_explained():
    e = error_of("B[i] = A[i, k]")
    assert "appears only on the right-hand side" in str(e) and "+=!" in str(e)


def test_rank_mismatch_and_bad_where():
    assert "rank" in str(error_of("B[i] = A[i] + A[i, i]"))
    assert "no subscript" in str(error_of("B[i] = A[i] where q in 0:3"))
    assert "expected 'in'" in str(error_of("B[i] = A[i] where i 0:3"))


def test_unused_declaration_is_refused():
    assert "never uses" in str(error_of("B[i] = A[i]", Z=pc.f32["N"]))


def test_unexpected_character():
    e = error_of("B[i] = A[i] $ 2")
    assert "unexpected character '$'" in str(e) and e.column == 13
