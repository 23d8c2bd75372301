"""Parser limits (hardening): deep nesting, long sums and huge literals are parsed or refused cleanly."""
import pytest

import polyc as pc
from polyc.frontend.einsum import program_from_einsum
from polyc.frontend.einsum_parser import MAX_NESTING, parse_einsum


def test_deep_parentheses_below_the_limit_parse_and_lower():
    depth = 150
    src = "B[i] = " + "(" * depth + "A[i] + 1.0" + ")" * depth
    program = program_from_einsum(src)
    assert program.statements[0].target.tensor == "B"


def test_nesting_past_the_limit_is_a_parse_error_with_position():
    depth = MAX_NESTING + 50
    with pytest.raises(pc.ParseError, match=f"nested more than {MAX_NESTING}") as info:
        parse_einsum("B[i] = " + "(" * depth + "A[i]" + ")" * depth)
    assert info.value.location.line == 1 and info.value.location.column > MAX_NESTING


def test_thousand_term_sum_parses_and_lowers_left_associative():
    src = "B[i] = " + " + ".join(f"A[i] * {k}.0" for k in range(1000))
    program = program_from_einsum(src)
    value = program.statements[0].value
    depth = 0
    while hasattr(value, "lhs"):
        value, depth = value.lhs, depth + 1
    assert depth == 999 + 1  # 999 additions, then the first product


def test_nested_calls_and_subscripts():
    src = "B[i] = " + "exp(" * 120 + "A[i]" + ")" * 120
    assert parse_einsum(src)[0].rhs.kind == "call"


def test_huge_integer_literal_is_a_parse_error():
    with pytest.raises(pc.ParseError, match="5000 digits"):
        parse_einsum("B[i] = A[i] * " + "7" * 5000)


def test_precedence_is_unchanged():
    rhs = parse_einsum("B[i] = -A[i] * 2 + C[i] % 3 < 4 and not D[i] > 1 or E[i] == 0")[0].rhs
    assert rhs.value == "or"
    land = rhs.args[0]
    assert land.value == "and" and land.args[1].kind == "un" and land.args[1].value == "not"
    cmp = land.args[0]
    assert cmp.value == "<" and cmp.args[0].value == "+"
    assert cmp.args[0].args[0].value == "*" and cmp.args[0].args[0].args[0].kind == "un"


def test_not_inside_arithmetic_is_refused():
    with pytest.raises(pc.ParseError, match="whole condition"):
        parse_einsum("B[i] = A[i] + not C[i]")
