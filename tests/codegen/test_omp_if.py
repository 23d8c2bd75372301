"""Every OpenMP parallel loop carries an `if()` work threshold, so tiny loops never wake the pool."""
import re

import numpy as np
import pytest

import polyc as pc
from polyc.codegen.c_omp import PARALLEL_MIN_WORK


def _parallel_pragmas(src: str):
    return [line.strip() for line in src.splitlines() if "omp parallel" in line]


def _condition(pragma: str) -> str:
    """The if() condition of a pragma, as Python (sizes are names; pc_max is max)."""
    m = re.search(r" if\((.*)\)$", pragma)
    assert m, pragma
    text = m.group(1).replace("&&", " and ").replace("(double)", "").replace("pc_max", "max")
    return re.sub(r"\bn_(\w+)", r"\1", text)


@pytest.mark.parametrize("text", ["C[i, j] +=! A[i, k] * B[k, j]", "y[i] +=! A[i, j] * x[j]",
                                  "B[i, j] = A[i, j] * 2.0", "s +=! A[i, j]"])
def test_every_parallel_loop_of_auto_has_an_if_clause(text):
    src = pc.codegen(pc.kernel(text), "auto")
    pragmas = _parallel_pragmas(src)
    assert pragmas
    assert all(" if(" in p for p in pragmas), pragmas


def test_a_user_parallel_mark_gets_the_threshold_too():
    k = pc.kernel("B[i, j] = A[i, j] * 2.0")
    src = pc.codegen(k, k.schedule().parallel("i"))
    [pragma] = _parallel_pragmas(src)
    cond = _condition(pragma)
    assert eval(cond, {"I": 1, "J": 10 ** 6, "max": max}) is False      # one iteration: sequential
    assert eval(cond, {"I": 4, "J": 8, "max": max}) is False            # 32 elements: sequential
    assert eval(cond, {"I": 2048, "J": 2048, "max": max}) is True       # big: parallel
    assert eval(cond, {"I": 2, "J": PARALLEL_MIN_WORK, "max": max}) is True


def test_the_threshold_counts_inner_loop_work():
    k = pc.kernel("y[i] +=! A[i, j] * x[j]")
    src = pc.codegen(k, k.schedule().parallel("i"))
    reduction_loop = [p for p in _parallel_pragmas(src)][-1]
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


def test_packed_contractions_fall_back_to_one_thread_for_little_work():
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="gemm")
    src = pc.codegen(k, "auto")
    assert "_packed" in src
    assert re.search(r"omp parallel num_threads\(\w+\) if\(\w+ > 1\)", src)
    assert "threads = 1;" in src
