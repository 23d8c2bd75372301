"""Tensor Comprehensions' `def` form, read verbatim: signature types, returns, several defs,
round-bracket subscripts, `T.d` extents, `where exists`, and errors that point into the user's text."""
from __future__ import annotations

import re

import numpy as np
import pytest

import polyc as pc
from polyc.cli import main
from polyc.errors import ParseError
from polyc.ir import TensorType
from polyc.ir.types import DType

from ..corpus import tc_kernels

rng = np.random.default_rng(31)

MATMUL = """
def matmul(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, r_k) * B(r_k, n)
}
"""

LAYERS = """
# fully connected layers, as TC's tests write them
def fcrelu(float(B,M) I, float(N,M) W1, float(N) B1) -> (O1) {
    O1(b, n) +=! I(b, m) * W1(n, m)
    O1(b, n) = O1(b, n) + B1(n)
    O1(b, n) = fmax(O1(b, n), 0)
}
def scaled(double(N) X, double alpha) -> (Y) {
    T(i) = X(i) * alpha
    Y(i) = T(i) + 1
}
"""


def test_a_def_is_read_as_written():
    mm = pc.kernel(MATMUL)
    assert mm.name == "matmul"
    a, b = rng.random((4, 5), dtype=np.float32), rng.random((5, 3), dtype=np.float32)
    c = mm(A=a, B=b)
    assert c.dtype == np.float32
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    np.testing.assert_allclose(pc.compile(mm, schedule="auto")(A=a, B=b), a @ b, rtol=1e-5)


def test_signature_types_are_declared_and_checked():
    mm = pc.kernel(MATMUL)
    with pytest.raises(pc.PolycError, match="float32"):      # `float` is 32-bit: float64 arrays refused
        mm(A=np.ones((2, 3)), B=np.ones((3, 2)))
    with pytest.raises(pc.PolycError, match="K"):            # the shared size K must agree
        mm(A=np.ones((2, 3), np.float32), B=np.ones((4, 2), np.float32))


def test_name_picks_one_of_several_defs_and_only_returns_are_outputs():
    i, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5, 4), (5,)))
    fc = pc.kernel(LAYERS, name="fcrelu")
    np.testing.assert_allclose(fc(I=i, W1=w, B1=b), np.maximum(i @ w.T + b, 0), rtol=1e-5, atol=1e-6)
    sc = pc.kernel(LAYERS, name="scaled")
    roles = {t.name: t.role for t in sc.program.tensors}
    assert roles["T"] == "temp" and roles["Y"] == "output" and roles["X"] == "input"
    x = rng.random(6)
    np.testing.assert_allclose(sc(X=x, alpha=3.0), x * 3.0 + 1)
    with pytest.raises(ParseError, match=r"defines 2 kernels \(fcrelu, scaled\); pick one with name="):
        pc.kernel(LAYERS)
    with pytest.raises(ParseError, match="no definition is named 'relu'; the text defines fcrelu, scaled"):
        pc.kernel(LAYERS, name="relu")


def test_returns_without_brackets_scalars_extents_and_exists():
    fill = pc.kernel("def constant_fill(float(N) A, float c) -> B {\n  B(i) = c where exists A(i)\n}")
    np.testing.assert_array_equal(fill(A=np.zeros(4, np.float32), c=2.5), np.full(4, 2.5, np.float32))
    scale = pc.kernel("def f(float(N, M) X) -> (Y) { Y(i, j) = X(i, j) * X.1 }")
    np.testing.assert_array_equal(scale(X=np.ones((2, 3), np.float32)), np.full((2, 3), 3.0, np.float32))
    pool = pc.kernel("def avg(float(I) B) -> A { A(i) +=! B(2*i + k) where k in 0:2 }")
    np.testing.assert_array_equal(pool(B=np.arange(7, dtype=np.float32)), [1.0, 5.0, 9.0])


def test_exists_bounds_ranges_in_plain_einstein_text_too():
    k = pc.kernel("B[i] = 1.0 where exists A[i + 1]")
    assert k(A=np.zeros(5)).shape == (4,)
    with pytest.raises(ParseError, match="'j' appears only on the right-hand side"):
        pc.kernel("B[i] = 1.0 where exists A[j]")
    counts = pc.kernel("def f(float(N, M) A) -> (B) { B(i) +=! 1.0 where exists A(i, j) }")   # j: a reduction
    np.testing.assert_array_equal(counts(A=np.zeros((2, 5), np.float32)), [5.0, 5.0])
    with pytest.raises(ParseError, match="'exists' takes a tensor access"):
        pc.kernel("B[i] = 1.0 where exists A[i] + 1")
    k = pc.kernel("B[exists] = A[exists] where exists in 0:3")      # an index may still be named exists
    np.testing.assert_array_equal(k(A=np.arange(3.0)), [0.0, 1.0, 2.0])


@pytest.mark.parametrize("text, line, column, message", [
    ("def f(half(N) A) -> (B) { B(i) = A(i) }", 1, 7, "polyc has no half type"),
    ("def f(float(N) A) -> (A) { A(i) = 1.0 }", 1, 23, "'A' is a parameter; TC returns new tensors only"),
    ("def f(float(N) A) -> (B)\n{ B(i) = A(i)", 2, 1, "this '{' is never closed"),
    ("def f(float(N) A) (B) { B(i) = A(i) }", 1, 19, "expected '->'"),
    ("def f(float(0) A) -> (B) { B(i) = A(i) }", 1, 13, "a size is a name or a positive integer"),
    ("def f(float(N) A) -> (B) { B(i) = A(i).3 }", 1, 39, "after the end of the statement"),
    ("def f(float(N) A) -> (B) { B(i) = A.1 }", 1, 35, "A has 1 dimension"),
    ("def f(float(N) A) -> (B) {\n  B(i) = A(i) +\n}", 3, 1, "expected a value"),   # `+` continues: at the `}`
    ("def f(float(N) A) -> (B) { B(i) = 2 * x where x = A(i) }", 1, 49, "'where x = ...' binds a name"),
    ("def f(float(N) A) -> (B) { B(i) = Z.0 }", 1, 35, "Z.0 names an extent of 'Z'"),
    ("def f(float(N) A) -> (B, O) { B(i) = A(i) }", 1, 1, "outputs names 'O', which no statement"),
])
def test_errors_point_into_the_text_as_written(text, line, column, message):
    with pytest.raises(ParseError, match=re.escape(message)) as info:
        pc.kernel(text)
    assert (info.value.line, info.value.column) == (line, column)
    assert text.split("\n")[line - 1] in str(info.value)      # the caret shows the user's own line


def test_keywords_may_add_to_the_signature_but_not_contradict_it():
    k = pc.kernel("def f(float(N) A) -> (B) { T(i) = A(i) * 2\n B(i) = T(i) + 1 }", T=pc.f64["N"])
    assert k.program.tensor("T").dtype == pc.f64
    with pytest.raises(ParseError, match="declared by the signature of matmul"):
        pc.kernel(MATMUL, A=pc.f64["M", "K"])
    with pytest.raises(ParseError, match=r"matmul returns \(C\); outputs=\['D'\] contradicts"):
        pc.kernel(MATMUL, outputs=["D"])


def test_statement_text_is_the_users_own():
    k = pc.kernel("def f(float(N) A) -> (B) { B(i) = A(i) * 2 }")
    assert k.program.statements[0].text == "B(i) = A(i) * 2"
    assert pc.kernel(MATMUL).program.statements[-1].text == "C(m, n) +=! A(m, r_k) * B(r_k, n)"


_TC_TYPE = {"f32": "float", "f64": "double", "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16"}


def _as_tc_def(spec) -> str:
    """A corpus kernel written back into TC's own form: its signature from the declarations."""
    params = []
    for name, decl in spec.declared.items():
        if isinstance(decl, DType):
            params.append(f"{_TC_TYPE[decl.name]} {name}")
        else:
            assert isinstance(decl, TensorType)
            params.append(f"{_TC_TYPE[decl.dtype.name]}({', '.join(str(e) for e in decl.shape)}) {name}")
    body = spec.source.replace("[", "(").replace("]", ")")
    return f"def {spec.name}({', '.join(params)}) -> ({', '.join(spec.outputs)}) {{\n{body}\n}}\n"


TC_SPECS = [s for s in tc_kernels.KERNELS if isinstance(s.source, str) and not s.xfail
            and all(isinstance(d, DType) or d.dtype is not None for d in s.declared.values())]


@pytest.mark.parametrize("spec", TC_SPECS, ids=[s.name for s in TC_SPECS])
def test_tc_corpus_kernels_in_their_def_form(spec):
    kernel = pc.kernel(_as_tc_def(spec), name=spec.name)
    inputs = spec.inputs(np.random.default_rng(20261123))
    expected = spec.reference(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()})
    got = kernel(**inputs)
    got = got if isinstance(got, dict) else {spec.outputs[0]: got}
    assert set(got) == set(spec.outputs)
    for name, want in expected.items():
        region = spec.regions.get(name)
        result = np.asarray(got[name])[region] if region is not None else np.asarray(got[name])
        np.testing.assert_allclose(result, want, rtol=2e-4, atol=2e-5)


def test_corpus_has_tc_kernels_in_def_form():
    assert len(TC_SPECS) >= 20


def test_cli_reads_every_def_of_a_tc_file(tmp_path, capsys):
    path = tmp_path / "layers.tc"
    path.write_text(MATMUL + "def relu(float(M, N) X) -> (Y) {\n    Y(m, n) = fmax(X(m, n), 0)\n}\n")
    assert main(["codegen", f"{path}::relu"]) == 0
    assert "void polyc_relu(" in capsys.readouterr().out
    assert main(["codegen", str(path)]) != 0
    assert "several kernels (matmul, relu)" in capsys.readouterr().err


def test_an_output_index_over_tensors_of_different_extents_says_what_to_do():
    """TC ranges it over the smaller extent; polyc cannot size the output by a minimum and says so
    (instead of an out-of-bounds error about one of the reads)."""
    with pytest.raises(pc.ShapeInferenceError, match=r"index 'j' indexes B \(extent M\) and A \(extent N\) alone; "
                                                     r"Tensor Comprehensions ranges it over the smaller extent"):
        pc.kernel("def f(float(N) A, float(M) B) -> (O) { O(j) = B(j) + A(j) }")
    same = pc.kernel("def f(float(N) A, float(N) B) -> (O) { O(j) = B(j) + A(j) }")
    np.testing.assert_array_equal(same(A=np.ones(3, np.float32), B=np.ones(3, np.float32)), [2.0] * 3)


def test_names_read_as_python_reads_them():
    with pytest.raises(ParseError, match="a second parameter named 'A'"):
        pc.kernel("def f(float(N) A, float(N) \U0001d400) -> (B) { B(i) = A(i) + \U0001d400(i) * 10 }")
    with pytest.raises(ParseError, match="name one tensor"):
        pc.kernel("B[i] = A[i] * 2.0", **{"A": pc.f32["N"], "\U0001d400": pc.f64["N"]})


def test_what_tc_means_otherwise_is_refused_not_reinterpreted():
    with pytest.raises(ParseError, match="divides integers: TC divides them as C does"):
        pc.kernel("def d(int32(N) A) -> (O) { O(i) = A(i) / 2 }")
    floor = pc.kernel("def d(int32(N) A) -> (O) { O(i) = A(i) // 2 }")
    assert floor(A=np.array([7, 8], np.int32)).tolist() == [3, 4]
    halves = pc.kernel("def d(float(N) A) -> (O) { O(i) = A(i) / 2 }")      # floats: the same in both
    assert halves(A=np.array([1.0], np.float32)).tolist() == [0.5]
    with pytest.raises(ParseError, match="A is an input of f \\(its signature\\); TC's inputs are read-only"):
        pc.kernel("def f(float(M, K) A) -> (C) { A(m, k) = 1.0; C(m) +=! A(m, k) }")


def test_words_and_layouts_of_tc_text():
    k = pc.kernel("def f(float(N) A) -> (B) {\n B(i) = select(not (A(i) > 1) and (A(i) < 3), 1.0, 0.0) where\n"
                  "   i in (0):N\n}")
    assert k(A=np.array([0.0, 2.0, 5.0], np.float32)).tolist() == [1.0, 0.0, 0.0]
    with pytest.raises(ParseError, match="unknown function 'log1p'"):
        pc.kernel("def f(float(N) A) -> (B) { B(i) = log1p(A(i)) }")
    big = "0" * 5000 + "1"
    assert pc.kernel(f"def f(float(N) A) -> (B) {{ B(i) = A(i) * {big} }}")(A=np.ones(2, np.float32)).tolist() == [1, 1]
    with pytest.raises(ParseError, match="a size is a name or a positive integer"):
        pc.kernel(f"def f(float({'9' * 5000}) A) -> (B) {{ B(i) = A(i) }}")
    for text in ("\ufeffdef f(float(N) A) -> (B) { B(i) = A(i) }",
                 "def f(float(N) A) -> (B) {\r\n  B(i) = A(i) \\\r\n     + 1.0\r\n}",
                 "def f(float(N) A) -> (B) {\f B(i) = A(i) + 1.0 }"):
        assert pc.kernel(text).name == "f"


def test_cli_builds_the_def_picked_even_beside_a_broken_one(tmp_path, capsys):
    path = tmp_path / "two.tc"
    path.write_text("def good(float(N) A) -> (B) { B(i) = A(i) }\ndef bad(float(N) A) -> (B) { B(i) = A(i, 0) }\n")
    assert main(["codegen", f"{path}::good"]) == 0
    assert "void polyc_good(" in capsys.readouterr().out
    assert main(["codegen", f"{path}::bad"]) != 0


def test_a_defs_parameters_need_not_all_be_used():
    k = pc.kernel("def f(float(N) A, float(M) B, float alpha) -> (C) { C(i) = A(i) * 2 }")
    assert k(A=np.ones(3, np.float32), B=np.ones(5, np.float32), alpha=1.0).tolist() == [2.0] * 3
    with pytest.raises(ParseError, match="'B' is declared but the kernel never uses it"):     # a keyword: a typo
        pc.kernel("C[i] = A[i] * 2", A=pc.f32["N"], B=pc.f32["M"])


def test_statements_separated_by_whitespace_alone():
    """TC separates statements by whitespace: two may share a line."""
    k = pc.kernel("def f(float(N) A) -> (B, C) { B(i) = A(i) + 1  C(i) +=! A(j) * B(i) }")
    r = k(A=np.arange(3, dtype=np.float32))
    assert r["B"].tolist() == [1.0, 2.0, 3.0] and r["C"].tolist() == [3.0, 6.0, 9.0]
    k = pc.kernel("def f(float(N) A) -> (B) { B(i) = A(i) == A(i) ? 1.0 : 0.0 }")    # `==`: no new statement
    assert k(A=np.ones(2, np.float32)).tolist() == [1.0, 1.0]
