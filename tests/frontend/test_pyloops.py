"""Tests of the affine-Python front end (`polyc.frontend.pyloops`) and its reference runner.

Kernels are defined at module level as users write them; their sizes (`N`, `M`) are undefined
names on purpose: the front end reads the source and never evaluates the body.
"""
# ruff: noqa: F821
# flake8: noqa: F821
from __future__ import annotations

import inspect
import itertools
import math

import numpy as np
import pytest

import polyc.ir as pc
from polyc.errors import ArgumentError, ParseError
from polyc.ir import (Access, Affine, Binary, Call, Cast, Const, Constraint, IndexExpr, Program,
                      ScalarRef, Select, Unary)
from polyc.frontend.pyloops import program_from_function
from polyc.frontend.reference import run_reference


# --------------------------------------------------------------------------------------------
# kernels


def seidel_2d(A: pc.f64["N", "N"], T: int):
    for t in range(T):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = (A[i-1, j-1] + A[i-1, j] + A[i-1, j+1] + A[i, j-1] + A[i, j]
                           + A[i, j+1] + A[i+1, j-1] + A[i+1, j] + A[i+1, j+1]) / 9.0


def triangular(A: pc.f64["N", "N"], B: pc.f64["N", "N"]):
    for i in range(N):
        for j in range(i + 1, N):
            B[i, j] = A[j, i]


def banded(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range(N):
        for j in range(max(0, i - 2), min(N, i + 3)):
            B[i] += A[j]


def min_lower(B: pc.f64["N"]):
    for i in range(min(2, N), N):
        B[i] = 1.0


def strided(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range(1, N, 2):
        B[i] = A[i - 1]
    for i in range(N - 1, -1, -2):
        B[i] = 2.0 * B[i]


def guarded(A: pc.f64["N", "N"]):
    for i in range(N):
        for j in range(N):
            if i > 0 and j < N - 1:
                A[i, j] = 1.0
            elif i % 2 == 0:
                A[i, j] = 2.0
            else:
                A[i, j] = 3.0


def matvec(A: pc.f32["N", "M"], x: pc.f32["M"], y: pc.f32["N"], alpha: float):
    for i in range(N):
        s = 0.0
        for k in range(M):
            s += A[i, k] * x[k]
        y[i] = alpha * s


def expressions(A: pc.f64["N"], B: pc.f64["N"], alpha: float, n: int):
    for i in range(N):
        B[i] = (math.sqrt(abs(A[i])) + np.exp(-A[i]) + max(A[i], 0.5, alpha) + A[i] ** 2
                + float(N) + 1.0 / N + (A[i] if A[i] > 0.0 and i % 2 == 0 else -A[i]) + i / n)
        B[i] -= A[i]
        B[i] *= 2.0
        B[i] /= 4.0


def durbin(r: pc.f64["N"], y: pc.f64["N"], z: pc.f64["N"]):
    y[0] = -r[0]
    beta = 1.0
    alpha = -r[0]
    for k in range(1, N):
        beta = (1 - alpha * alpha) * beta
        sum_ = 0.0
        for i in range(k):
            sum_ += r[k - i - 1] * y[i]
        alpha = -(r[k] + sum_) / beta
        for i in range(k):
            z[i] = y[i] + alpha * y[k - i - 1]
        for i in range(k):
            y[i] = z[i]
        y[k] = alpha


def ludcmp(A: pc.f64["N", "N"], b: pc.f64["N"], x: pc.f64["N"], y: pc.f64["N"]):
    for i in range(N):
        for j in range(i):
            w = A[i, j]
            for k in range(j):
                w -= A[i, k] * A[k, j]
            A[i, j] = w / A[j, j]
        for j in range(i, N):
            w = A[i, j]
            for k in range(i):
                w -= A[i, k] * A[k, j]
            A[i, j] = w
    for i in range(N):
        w = b[i]
        for j in range(i):
            w -= A[i, j] * y[j]
        y[i] = w
    for i in range(N - 1, -1, -1):
        w = y[i]
        for j in range(i + 1, N):
            w -= A[i, j] * x[j]
        x[i] = w / A[i, i]


def recursive_filter(x: pc.f64["N", "M"], y: pc.f64["N", "M"], a: float):
    for i in range(N):
        ym1 = 0.0
        ym2 = 0.0
        for j in range(M):
            y[i, j] = x[i, j] + a * ym1 - 0.25 * ym2
            ym2 = ym1
            ym1 = y[i, j]
    for i in range(N):
        ym1 = 0.0
        for j in range(M - 1, -1, -1):
            y[i, j] = y[i, j] + a * ym1
            ym1 = y[i, j]


def carried_scalar(A: pc.f64["N"], B: pc.f64["N"]):
    for i in range(N):
        if i > 0:
            B[i] = last
        last = A[i] * 2.0
        A[i] = last + 1.0
    B[0] = last


def nussinov(seq: pc.f64["N"], table: pc.f64["N", "N"]):
    for i in range(N - 1, -1, -1):
        for j in range(i + 1, N):
            if j - 1 >= 0:
                table[i, j] = max(table[i, j], table[i, j - 1])
            if i + 1 < N:
                table[i, j] = max(table[i, j], table[i + 1, j])
            if j - 1 >= 0 and i + 1 < N:
                if i < j - 1:
                    table[i, j] = max(table[i, j],
                                      table[i + 1, j - 1] + (1.0 if seq[i] + seq[j] == 3.0 else 0.0))
                else:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1])
            for k in range(i + 1, j):
                table[i, j] = max(table[i, j], table[k + 1, j] + table[i, k])


def gemm(C: pc.f64["NI", "NJ"], A: pc.f64["NI", "NK"], B: pc.f64["NK", "NJ"], alpha: float,
         beta: float):
    for i in range(NI):
        for j in range(NJ):
            C[i, j] *= beta
        for k in range(NK):
            for j in range(NJ):
                C[i, j] += alpha * A[i, k] * B[k, j]


# --------------------------------------------------------------------------------------------
# helpers


def line_of(fn, snippet: str) -> int:
    """The real file line of the first source line of `fn` containing `snippet`."""
    lines, start = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if line.strip().startswith(snippet):
            return start + k
    for k, line in enumerate(lines):
        if snippet in line:
            return start + k
    raise AssertionError(f"{snippet!r} not in {fn.__name__}")


def conj(stmt, k: int = 0):
    return {str(c) for c in stmt.domain[k]}


def holds(c: Constraint, env) -> bool:
    v = c.expr.evaluate(env)
    return v >= 0 if c.kind == "ge" else v == 0 if c.kind == "eq" else v % c.modulus == 0


def evaluate(e, env, arrays, scalars):
    """A direct evaluator of polyc.ir expressions (numpy float semantics)."""
    ev = lambda x: evaluate(x, env, arrays, scalars)
    if isinstance(e, Const):
        return e.value
    if isinstance(e, IndexExpr):
        return e.value.evaluate(env)
    if isinstance(e, ScalarRef):
        return scalars[e.name]
    if isinstance(e, Access):
        return arrays[e.tensor][tuple(a.evaluate(env) for a in e.indices)]
    if isinstance(e, Unary):
        return -ev(e.operand) if e.op == "-" else not ev(e.operand)
    if isinstance(e, Binary):
        a, b = ev(e.lhs), ev(e.rhs)
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                "%": lambda: a % b, "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b,
                ">=": lambda: a >= b, "==": lambda: a == b, "!=": lambda: a != b,
                "and": lambda: a and b, "or": lambda: a or b}[e.op]()
    if isinstance(e, Select):
        return ev(e.if_true) if ev(e.cond) else ev(e.if_false)
    if isinstance(e, Cast):
        return e.dtype.numpy.type(ev(e.operand))
    if isinstance(e, Call):
        args = [ev(a) for a in e.args]
        return {"max": np.maximum, "min": np.minimum, "pymax": max, "pymin": min, "pow": pow, "abs": abs, "sqrt": np.sqrt, "exp": np.exp,
                "log": np.log, "tanh": np.tanh}[e.fn](*args)
    raise TypeError(e)


def interpret(program: Program, sizes, scalars, arrays) -> None:
    """Runs a Program's statement instances in its 2d+1 order (brute-force domain enumeration)."""
    env_sizes = dict(sizes)
    extent = max(sizes.values()) + 2
    temps = {}
    for t in program.tensors:
        if t.role == "temp":
            shape = tuple(d.evaluate(env_sizes) for d in t.shape)
            temps[t.name] = np.full(shape, np.nan, dtype=t.dtype.numpy)
    store = {**arrays, **temps}
    instances = []
    for s in program.statements:
        for point in itertools.product(range(-2, extent), repeat=len(s.iterators)):
            env = {**env_sizes, **dict(zip(s.iterators, point))}
            if any(all(holds(c, env) for c in conj_) for conj_ in s.domain):
                key = [s.order[0]]
                for it, c, p in zip(s.iterators, s.order[1:], point):
                    key += [-p if it in s.descending else p, c]
                instances.append((tuple(key), s, env))
    instances.sort(key=lambda x: x[0])
    for _, s, env in instances:
        value = evaluate(s.value, env, store, scalars)
        index = tuple(a.evaluate(env) for a in s.target.indices)
        target = store[s.target.tensor]
        if s.update == "+":
            value = target[index] + value
        elif s.update == "*":
            value = target[index] * value
        target[index] = value


# --------------------------------------------------------------------------------------------
# the IR produced


def test_seidel_ir():
    p = program_from_function(seidel_2d)
    assert p.frontend == "python" and p.name == "seidel_2d"
    assert p.sizes == ("N", "T") and p.scalars == ()
    (a,) = p.tensors
    assert (a.name, a.dtype, a.role, a.declared) == ("A", pc.f64, "inout", True)
    assert a.shape == (Affine.var("N"), Affine.var("N"))
    (s,) = p.statements
    assert s.name == "S0" and s.iterators == ("t", "i", "j") and s.order == (0, 0, 0, 0)
    assert len(s.domain) == 1
    assert conj(s) == {"t >= 0", "T - t - 1 >= 0", "i - 1 >= 0", "N - i - 2 >= 0",
                       "j - 1 >= 0", "N - j - 2 >= 0"}
    assert s.target == Access("A", (Affine.var("i"), Affine.var("j")))
    assert s.update is None and s.reduction == () and s.descending == ()
    reads = {str(r) for r in s.reads()}
    assert reads == {f"A[{i}, {j}]" for i in ("i - 1", "i", "i + 1") for j in ("j - 1", "j", "j + 1")}
    assert isinstance(s.value, Binary) and s.value.op == "/" and s.value.rhs == Const(9.0)
    assert s.location.line == line_of(seidel_2d, "A[i, j] = (")
    assert s.location.column == 17 and s.location.filename == __file__
    assert s.text.startswith("A[i, j] = (A[i-1, j-1]") and "A[i+1, j+1]) / 9.0" in s.text


def test_triangular_loop():
    p = program_from_function(triangular)
    (s,) = p.statements
    assert conj(s) == {"i >= 0", "N - i - 1 >= 0", "-i + j - 1 >= 0", "N - j - 1 >= 0"}
    assert [t.role for t in p.tensors] == ["input", "output"]


def test_min_max_bounds():
    s = program_from_function(banded).statements[0]
    assert len(s.domain) == 1            # max lower / min upper bounds are conjunctions
    assert conj(s) == {"i >= 0", "N - i - 1 >= 0", "j >= 0", "-i + j + 2 >= 0",
                       "N - j - 1 >= 0", "i - j + 2 >= 0"}
    assert s.update == "+" and s.reduction == ("j",)
    t = program_from_function(min_lower).statements[0]
    assert {frozenset(map(str, c)) for c in t.domain} == {     # v >= min(a, b): a disjunction
        frozenset({"i - 2 >= 0", "N - i - 1 >= 0"}), frozenset({"-N + i >= 0", "N - i - 1 >= 0"})}


def test_steps():
    p = program_from_function(strided)
    up, down = p.statements
    assert Constraint("mod", Affine.var("i") - 1, 2) in up.domain[0]
    assert conj(up) >= {"i - 1 >= 0", "N - i - 1 >= 0"} and up.descending == ()
    assert conj(down) == {"N - i - 1 >= 0", "i >= 0", "(N - i - 1) mod 2 = 0"}
    assert down.descending == ("i",) and down.order == (1, 0)
    for n in (5, 6):
        a, b, b_ir = np.arange(n, dtype=float), np.ones(n), np.ones(n)
        run_reference(strided, p, A=a, B=b)
        interpret(p, {"N": n}, {}, {"A": a, "B": b_ir})
        np.testing.assert_array_equal(b, b_ir)


def test_if_elif_else_guards():
    s1, s2, s3 = program_from_function(guarded).statements
    loops = {"i >= 0", "N - i - 1 >= 0", "j >= 0", "N - j - 1 >= 0"}
    assert [s.order for s in (s1, s2, s3)] == [(0, 0, 0), (0, 0, 1), (0, 0, 2)]
    assert len(s1.domain) == 1 and conj(s1) == loops | {"i - 1 >= 0", "N - j - 2 >= 0"}
    # not (i > 0 and j < N - 1) is a disjunction; the elif adds a congruence.
    assert {frozenset(map(str, c)) for c in s2.domain} == {
        frozenset(loops | {"-i >= 0", "(i) mod 2 = 0"}),
        frozenset(loops | {"-N + j + 1 >= 0", "(i) mod 2 = 0"})}
    assert {frozenset(map(str, c)) for c in s3.domain} == {
        frozenset(loops | {"-i >= 0", "(i - 1) mod 2 = 0"}),
        frozenset(loops | {"-N + j + 1 >= 0", "(i - 1) mod 2 = 0"})}
    a_ref, a_ir = np.zeros((5, 5)), np.zeros((5, 5))
    run_reference(guarded, A=a_ref)
    interpret(program_from_function(guarded), {"N": 5}, {}, {"A": a_ir})
    np.testing.assert_array_equal(a_ref, a_ir)


def test_local_scalar_is_expanded_over_its_loop():
    p = program_from_function(matvec)
    assert p.sizes == ("N", "M") and [(s.name, s.dtype) for s in p.scalars] == [("alpha", pc.f64)]
    temp = p.tensor("s")
    assert (temp.role, temp.dtype, temp.shape) == ("temp", pc.f32, (Affine.var("N"),))
    init, acc, out = p.statements
    assert init.target == Access("s", (Affine.var("i"),)) and init.order == (0, 0)
    assert acc.target == init.target and acc.update == "+" and acc.reduction == ("k",)
    assert out.value == Binary("*", ScalarRef("alpha"), Access("s", (Affine.var("i"),)))
    assert [t.role for t in p.tensors] == ["input", "input", "output", "temp"]


def test_local_versions_ludcmp_and_durbin():
    p = program_from_function(ludcmp)
    temps = {t.name: t.shape for t in p.tensors if t.role == "temp"}
    assert temps == {"w": (Affine.var("N"), Affine.var("N") - 1),
                     "w_1": (Affine.var("N"), Affine.var("N")),
                     "w_2": (Affine.var("N"),), "w_3": (Affine.var("N"),)}
    assert [str(s.target) for s in p.statements if s.target.tensor.startswith("w")] == [
        "w[i, j]", "w[i, j]", "w_1[i, j]", "w_1[i, j]", "w_2[i]", "w_2[i]", "w_3[i]", "w_3[i]"]
    d = program_from_function(durbin)
    temps = {t.name: t.shape for t in d.tensors if t.role == "temp"}
    # alpha and beta carry values across k: one cell each; sum_ is fresh in every k.
    assert temps == {"alpha": (), "beta": (), "sum_": (Affine.var("N"),)}


@pytest.mark.parametrize("kernel, sizes, scalars", [
    (durbin, {"N": 6}, {}),
    (ludcmp, {"N": 5}, {}),
    (recursive_filter, {"N": 3, "M": 5}, {"a": 0.5}),
    (carried_scalar, {"N": 5}, {}),
    (nussinov, {"N": 6}, {}),
    (gemm, {"NI": 3, "NJ": 4, "NK": 2}, {"alpha": 1.5, "beta": 0.5}),
    (expressions, {"N": 4, "n": 3}, {"alpha": 0.25}),
])
def test_ir_runs_like_the_python_kernel(kernel, sizes, scalars):
    """Executing the produced IR in its 2d+1 order gives exactly what the function computes."""
    p = program_from_function(kernel)
    rng = np.random.default_rng(0)
    arrays = {}
    for t in p.tensors:
        if t.role != "temp":
            shape = tuple(d.evaluate(sizes) for d in t.shape)
            arrays[t.name] = (rng.integers(0, 3, shape) + rng.random(shape) + 0.5).astype(t.dtype.numpy)
    if kernel is ludcmp:
        arrays["A"] += 10 * np.eye(sizes["N"])
    ref = {k: v.copy() for k, v in arrays.items()}
    given = {k: v for k, v in sizes.items() if k in p.sizes and k in inspect.signature(kernel).parameters}
    run_reference(kernel, p, **ref, **scalars, **given)
    interpret(p, sizes, scalars, arrays)
    for name in arrays:
        np.testing.assert_allclose(arrays[name], ref[name], rtol=1e-12, err_msg=name)


def test_expressions_lowering():
    p = program_from_function(expressions)
    assert p.sizes == ("N", "n")
    first = p.statements[0].value
    calls = {e.fn for e in first.walk() if isinstance(e, Call)}
    assert calls == {"sqrt", "abs", "exp", "pymax", "pow"}   # the builtin max keeps Python's meaning
    assert Cast(pc.f64, IndexExpr(Affine.var("N"))) in set(first.walk())
    assert Binary("/", Cast(pc.f64, IndexExpr(Affine.var("i"))), IndexExpr(Affine.var("n"))) in set(first.walk())
    assert any(isinstance(e, Select) for e in first.walk())
    sub, mul, div = p.statements[1:]
    assert sub.update == "+" and sub.value == Unary("-", Access("A", (Affine.var("i"),)))
    assert mul.update == "*" and mul.value == Const(2.0)
    assert div.update is None and div.value == Binary("/", Access("B", (Affine.var("i"),)), Const(4.0))


# --------------------------------------------------------------------------------------------
# refusals: message and real line number


def bad_product(A: pc.f64["N"]):
    for i in range(N):
        for j in range(N):
            A[i * j] = 1.0


def bad_indirect(A: pc.f64["N"], idx: pc.i64["N"]):
    for i in range(N):
        A[idx[i]] = 1.0


def bad_bound(A: pc.f64["N"]):
    for i in range(N):
        for j in range(i * i):
            A[j] = 1.0


def bad_while(A: pc.f64["N"]):
    i = 0
    while i < N:
        A[i] = 1.0


def bad_call(A: pc.f64["N"]):
    for i in range(N):
        A[i] = print(A[i])


def bad_break(A: pc.f64["N"]):
    for i in range(N):
        A[i] = 1.0
        break


def bad_continue(A: pc.f64["N"]):
    for i in range(N):
        continue


def bad_return(A: pc.f64["N"]):
    for i in range(N):
        A[i] = 1.0
    return A


def bad_nested(A: pc.f64["N"]):
    def helper(x):
        return x
    A[0] = 1.0


def bad_param_assign(A: pc.f64["N"], alpha: float):
    alpha = 2.0
    A[0] = alpha


def bad_size_assign(A: pc.f64["N"]):
    N = 3
    A[0] = 1.0


def bad_undefined(A: pc.f64["N"]):
    for i in range(N):
        A[i] = undefined_thing * 2.0


def bad_iteration(A: pc.f64["N"]):
    for i in [0, 1, 2]:
        A[i] = 1.0


def bad_unpack(A: pc.f64["N"]):
    a, b = 1.0, 2.0
    A[0] = a


def bad_data_if(A: pc.f64["N"]):
    for i in range(N):
        if A[i] > 0.0:
            A[i] = 0.0


def bad_local_subscript(A: pc.f64["N"]):
    k = 1
    k = 2
    A[k] = 1.0


def bad_read_first(A: pc.f64["N"]):
    for i in range(N):
        s += A[i]
    A[0] = s


def bad_annotation(A: pc.f64["N"], B):
    A[0] = 1.0


def bad_outside_loop(A: pc.f64["N"]):
    for i in range(N):
        A[i] = 1.0
    A[i] = 2.0


def bad_rank(A: pc.f64["N", "N"]):
    for i in range(N):
        A[i] = 1.0


@pytest.mark.parametrize("kernel, snippet, message", [
    (bad_product, "A[i * j]", "multiplies two variables"),
    (bad_indirect, "A[idx[i]]", "indirect indexing"),
    (bad_bound, "range(i * i)", "a loop bound must be affine"),
    (bad_while, "while i < N", "`while` loops are not supported"),
    (bad_call, "print(A[i])", "call to `print` is not supported"),
    (bad_break, "break", "`break` is not supported"),
    (bad_continue, "continue", "`continue` is not supported"),
    (bad_return, "return A", "`return` is only allowed as a bare `return`"),
    (bad_nested, "def helper", "nested functions are not supported"),
    (bad_param_assign, "alpha = 2.0", "cannot assign to parameter `alpha`"),
    (bad_size_assign, "N = 3", "cannot assign to size `N`"),
    (bad_undefined, "undefined_thing", "undefined name `undefined_thing`"),
    (bad_iteration, "[0, 1, 2]", "must iterate over `range(stop)`"),
    (bad_unpack, "a, b = 1.0", "tuple unpacking is not supported"),
    (bad_data_if, "if A[i] > 0.0", "data-dependent control flow is not supported"),
    (bad_local_subscript, "A[k] = 1.0", "`k` is a kernel-local scalar"),
    (bad_read_first, "s += A[i]", "local variable `s` is read before it is assigned"),
    (bad_annotation, "def bad_annotation", "parameter `B` needs a type annotation"),
    (bad_outside_loop, "A[i] = 2.0", "loop variable `i` is used outside its loop"),
    (bad_rank, "A[i] = 1.0", "has rank 2 but is indexed with 1 subscript"),
])
def test_refusals(kernel, snippet, message):
    with pytest.raises(ParseError) as info:
        program_from_function(kernel)
    err = info.value
    assert message in err.reason
    assert err.location.filename == __file__
    assert err.line == line_of(kernel, snippet)
    assert err.location.text.strip().startswith(snippet.split()[0]) or snippet in err.location.text


def test_refusal_column_points_at_the_node():
    with pytest.raises(ParseError) as info:
        program_from_function(bad_product)
    loc = info.value.location
    assert loc.text[loc.column - 1:].startswith("i * j")
    assert "^" in str(info.value)


# --------------------------------------------------------------------------------------------
# the reference


def test_run_reference_matches_numpy():
    rng = np.random.default_rng(1)
    c, a, b = rng.random((3, 4)), rng.random((3, 2)), rng.random((2, 4))
    expected = 0.5 * c + 1.5 * a @ b
    run_reference(gemm, program_from_function(gemm), C=c, A=a, B=b, alpha=1.5, beta=0.5)
    np.testing.assert_allclose(c, expected, rtol=1e-12)


def test_run_reference_seidel_in_place():
    a = np.arange(36, dtype=np.float64).reshape(6, 6) % 7
    expected = a.copy()
    for _ in range(2):
        for i in range(1, 5):
            for j in range(1, 5):
                expected[i, j] = expected[i - 1:i + 2, j - 1:j + 2].sum() / 9.0
    assert run_reference(seidel_2d, None, A=a, T=2) is None
    np.testing.assert_allclose(a, expected)


def test_run_reference_checks_arguments():
    p = program_from_function(gemm)
    good = dict(C=np.zeros((3, 4)), A=np.zeros((3, 2)), B=np.zeros((2, 4)), alpha=1.0, beta=1.0)
    with pytest.raises(ArgumentError, match=r"size NK is 2 from A\.shape\[1\] but B\.shape\[0\] is 5 \(B has shape \(5, 4\)\)"):
        run_reference(gemm, p, **{**good, "B": np.zeros((5, 4))})
    with pytest.raises(ArgumentError, match="dtype float64"):
        run_reference(gemm, p, **{**good, "C": np.zeros((3, 4), dtype=np.float32)})
    with pytest.raises(ArgumentError, match="size T .* pass it as T=<int>"):
        run_reference(seidel_2d, None, A=np.zeros((4, 4)))
    with pytest.raises(ArgumentError, match="missing scalar argument beta"):
        run_reference(gemm, p, **{k: v for k, v in good.items() if k != "beta"})

