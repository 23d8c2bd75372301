"""Every OpenMP parallel loop has a work threshold, checked in C before the pragma: below it the same
loop runs serially in an `else` branch, so tiny loops never enter libgomp (an `if()` clause would)."""
import re

import numpy as np
import pytest

import polyc as pc
from polyc.codegen.c_omp import PARALLEL_MIN_WORK


def _parallel_pragmas(src: str):
    return [line.strip() for line in src.splitlines() if "omp parallel" in line]


def _block(lines, start):
    """The lines of the brace block opening at lines[start] (`{`), and the index after it."""
    assert lines[start].strip() == "{", lines[start]
    depth, i = 0, start
    while True:
        depth += lines[i].count("{") - lines[i].count("}")
        i += 1
        if depth == 0:
            return [x.strip() for x in lines[start + 1:i - 1]], i


def _guarded(src: str):
    """(condition, parallel branch, serial branch) of every `if (cond) { #pragma omp parallel for ... }
    else { ... }` in `src`; asserts that every `omp parallel for` sits in such a branch."""
    lines = src.splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.strip().startswith("#pragma omp parallel for"):
            guard = lines[i - 2].strip()
            m = re.fullmatch(r"if \((.*)\)", guard)
            assert m and lines[i - 1].strip() == "{", (guard, line)
            parallel, after = _block(lines, i - 1)
            assert lines[after].strip() == "else", lines[after]
            serial, _ = _block(lines, after + 1)
            out.append((m.group(1), parallel, serial))
    return out


def _condition(cond: str) -> str:
    """A guard condition as Python (sizes are names; pc_max is max)."""
    text = cond.replace("&&", " and ").replace("(double)", "").replace("pc_max", "max")
    text = text.replace("pc_parallel_min_work", repr(float(PARALLEL_MIN_WORK)))   # the library's default
    return re.sub(r"\bn_(\w+)", r"\1", text)


def _serial_pragma(parallel_pragma: str):
    """The pragma the serial copy of a loop under `parallel_pragma` must carry (None: none)."""
    if " simd" not in parallel_pragma:
        return None
    reductions = re.findall(r"reduction\([^)]*\)", parallel_pragma)
    return ("#pragma omp simd " + " ".join(reductions)).rstrip()


@pytest.mark.parametrize("text", ["C[i, j] +=! A[i, k] * B[k, j]", "y[i] +=! A[i, j] * x[j]",
                                  "B[i, j] = A[i, j] * 2.0", "s +=! A[i, j]"])
def test_every_parallel_loop_of_auto_is_guarded_with_a_serial_copy(text):
    src = pc.codegen(pc.kernel(text), "auto")
    guarded = _guarded(src)
    assert guarded
    for _, parallel, serial in guarded:
        pragma, *loop = parallel
        assert " if(" not in pragma                       # no OpenMP if(): libgomp is never entered
        expected = _serial_pragma(pragma)
        if expected is None:
            assert serial == loop                         # the same loop, no pragma
        else:
            assert serial == [expected] + loop            # the same loop, still SIMD


def test_a_parallel_simd_loop_keeps_simd_in_its_serial_copy():
    k = pc.kernel("B[i] = A[i] * 2.0")
    src = pc.codegen(k, k.schedule().parallel("i").vectorize("i"))
    [(_, parallel, serial)] = _guarded(src)
    assert parallel[0].startswith("#pragma omp parallel for simd")
    assert serial[0] == "#pragma omp simd"
    assert serial[1:] == parallel[1:]


def test_a_user_parallel_mark_gets_the_threshold_too():
    k = pc.kernel("B[i, j] = A[i, j] * 2.0")
    src = pc.codegen(k, k.schedule().parallel("i"))
    [(guard, _, _)] = _guarded(src)
    cond = _condition(guard)
    assert eval(cond, {"I": 1, "J": 10 ** 6, "max": max}) is False      # one iteration: sequential
    assert eval(cond, {"I": 4, "J": 8, "max": max}) is False            # 32 elements: sequential
    assert eval(cond, {"I": 2048, "J": 2048, "max": max}) is True       # big: parallel
    assert eval(cond, {"I": 2, "J": PARALLEL_MIN_WORK, "max": max}) is True


def test_the_threshold_counts_inner_loop_work():
    k = pc.kernel("y[i] +=! A[i, j] * x[j]")
    src = pc.codegen(k, k.schedule().parallel("i"))
    reduction_loop = _guarded(src)[-1][0]
    cond = _condition(reduction_loop)
    assert eval(cond, {"I": 64, "J": 4096, "max": max}) is True
    assert eval(cond, {"I": 64, "J": 4, "max": max}) is False


def test_tiled_gemm_at_small_sizes_runs_correctly_with_thresholds():
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="gemm")
    f = pc.compile(k, "auto")
    rng = np.random.default_rng(0)
    for n in (1, 3, 40):
        A, B = rng.uniform(size=(n, n)), rng.uniform(size=(n, n))
        np.testing.assert_allclose(f(A=A, B=B), A @ B, rtol=1e-12)


@pytest.mark.parametrize("n", [1, 5, 3000])
def test_both_branches_compute_the_same_results(n):
    """n=1 and 5 take the serial copies, 3000 the parallel loops (with the accumulator reduction)."""
    k = pc.kernel("y[i] +=! A[i, j] * x[j]", name="gemv")
    f = pc.compile(k, k.schedule().parallel("i"))
    s = pc.kernel("s +=! A[i]", name="total")
    g = pc.compile(s, "auto")
    assert "omp parallel for" in g.source and "reduction(+:pc_acc)" in g.source
    rng = np.random.default_rng(n)
    A, x = rng.uniform(size=(n, 7)), rng.uniform(size=7)
    np.testing.assert_allclose(f(A=A, x=x), A @ x, rtol=1e-12)
    v = rng.uniform(size=n * 7)
    np.testing.assert_allclose(g(A=v), v.sum(), rtol=1e-10)


def test_packed_contractions_fall_back_to_one_thread_for_little_work():
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="gemm")
    src = pc.codegen(k, "auto")
    assert "_packed" in src
    assert re.search(r"omp parallel num_threads\(\w+\) if\(\w+ > 1\)", src)
    assert "threads = 1;" in src
    from polyc.codegen.c_packed import PACKED_MIN_FLOPS
    assert f"< {float(PACKED_MIN_FLOPS)!r}) pc_threads = 1;" in src


def test_check_kernel_runs_parallel_loops_in_parallel_at_test_sizes():
    # a library's threshold is a global the runtime sets: 0 inside parallel_threshold(0), which
    # check_kernel uses, so a 5x6 test runs the OpenMP branch a real size runs
    import ctypes

    from polyc.codegen.c_omp import MIN_WORK_SYMBOL
    from polyc.runtime import loader
    k = pc.kernel("B[i, j] = A[i, j] * 2.0", name="omp_threshold_probe")
    f = pc.compile(k, k.schedule().parallel("i"))
    f(A=np.ones((5, 6)))
    libs = [lib for lib in loader._libraries.values() if hasattr(lib, MIN_WORK_SYMBOL)]
    value = lambda: {ctypes.c_double.in_dll(lib, MIN_WORK_SYMBOL).value for lib in libs}   # noqa: E731
    assert libs and value() == {float(PARALLEL_MIN_WORK)}
    with loader.parallel_threshold(0):
        assert value() == {0.0}
        np.testing.assert_array_equal(f(A=np.ones((5, 6))), 2.0)
    assert value() == {float(PARALLEL_MIN_WORK)}
