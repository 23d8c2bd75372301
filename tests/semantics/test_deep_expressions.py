"""Deep expression trees (a 1,000-term sum, 108 nested parentheses) work in every stage after
parsing: lowering, the isl model, typing, the C and CUDA printers, the interpreter and the
reference; past `polyc.ir.depth.MAX_EXPRESSION_DEPTH` they are a typed `ExpressionTooDeepError`
(before: `RecursionError`)."""
from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

import polyc as pc
from polyc.errors import ExpressionTooDeepError, ParseError
from polyc.ir.depth import MAX_EXPRESSION_DEPTH, expression_depth


def _load_kernel(tmp_path, name: str, body_expr: str):
    """A loop kernel `y[i] = <body_expr>` written to a module file (the front end reads source)."""
    path = tmp_path / f"{name}.py"
    path.write_text("import polyc as pc\n\n\n"
                    f"def {name}(x: pc.f64['N'], y: pc.f64['N']):\n"
                    "    for i in range(N):\n"
                    f"        y[i] = {body_expr}\n")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _terms(n: int) -> str:
    return " + ".join(f"x[i] * {k % 7 + 1}.0" for k in range(n))


def _expected_sum(x: np.ndarray, n: int) -> np.ndarray:
    out = x * 1.0
    for k in range(1, n):
        out = out + x * float(k % 7 + 1)
    return out


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_loop_kernel_with_a_1000_term_sum(tmp_path, target):
    fn = _load_kernel(tmp_path, f"sum1000_{target.replace('-', '_')}", _terms(1000))
    k = pc.kernel(fn)
    assert expression_depth(k.program.statements[0].value) > 1000
    x = np.linspace(-1, 1, 5)
    y, y_ref = np.zeros(5), np.zeros(5)
    pc.compile(k, target=target)(x=x, y=y)
    k.reference(x=x, y=y_ref)
    np.testing.assert_array_equal(y, y_ref)          # same order of additions as Python
    np.testing.assert_array_equal(y, _expected_sum(x, 1000))


def test_loop_kernel_with_108_nested_parentheses(tmp_path):
    expr = "x[i]"
    for k in range(108):
        expr = f"({expr} * 0.5 + {k}.0)" if k % 2 else f"max({expr}, {k}.0 - 60.0)"
    fn = _load_kernel(tmp_path, "nested108", expr)
    k = pc.kernel(fn)
    x = np.linspace(-100, 100, 7)
    y, y_ref = np.zeros(7), np.zeros(7)
    pc.compile(k, schedule="auto")(x=x, y=y)
    k.reference(x=x, y=y_ref)
    np.testing.assert_array_equal(y, y_ref)
    assert "pc_max_f64(" in pc.codegen(k, k.schedule(), target="cuda")


def test_einsum_1000_term_sum_compiles_and_interprets():
    k = pc.kernel("y[i] = " + " + ".join(f"x[i] * {k % 7 + 1}.0" for k in range(1000)))
    x = np.linspace(-1, 1, 5)
    expected = _expected_sum(x, 1000)
    np.testing.assert_array_equal(pc.compile(k)(x=x), expected)
    np.testing.assert_array_equal(k.reference(x=x), expected)
    k.dependences()                                   # the isl model walks the tree too


def test_past_the_documented_limit_is_a_typed_error():
    n = MAX_EXPRESSION_DEPTH + 1
    before = sys.getrecursionlimit()
    with pytest.raises(ExpressionTooDeepError) as err:
        pc.kernel("y[i] = " + " + ".join(["x[i]"] * n))
    assert isinstance(err.value, ParseError) and err.value.line == 1
    assert str(MAX_EXPRESSION_DEPTH) in str(err.value)
    assert sys.getrecursionlimit() == before


@pytest.mark.slow
def test_at_the_documented_limit_everything_still_works(tmp_path):
    n = MAX_EXPRESSION_DEPTH - 10      # the loop kernel's function body adds a few levels
    k = pc.kernel("y[i] = " + " + ".join(["x[i]"] * n))
    x = np.arange(4.0)
    np.testing.assert_array_equal(pc.compile(k, schedule="auto")(x=x), x * n)
    np.testing.assert_array_equal(pc.compile(k, target="cuda-emu")(x=x), x * n)
    np.testing.assert_array_equal(k.reference(x=x), x * n)
    fn = _load_kernel(tmp_path, "sum_limit", " + ".join(["x[i]"] * n))
    lk = pc.kernel(fn)
    y = np.zeros(4)
    pc.compile(lk)(x=x, y=y)
    np.testing.assert_array_equal(y, x * n)
