"""Property: every schedule the primitives accept computes what the kernel computes as written.

Hypothesis draws the seed of a random primitive sequence (`polyc.testing.fuzz`); each step is
either refused as illegal or kept, and the final schedule is compiled, run and compared with the
reference (and round-tripped through JSON).  The default run covers a few small kernels (<60 s);
the whole kernel library, PolyBench included, runs under `-m slow`.
"""
# ruff: noqa: F821
# flake8: noqa: F821
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyc as pc
from polyc.testing.fuzz import FuzzSummary, fuzz_schedules, random_call

matmul = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")
softmax_rows = pc.kernel("""
    m[i] max=! X[i, j]
    e[i, j] = exp(X[i, j] - m[i])
    s[i] +=! e[i, j]
    Y[i, j] = e[i, j] / s[i]
""", name="softmax_rows")


@pc.kernel
def seidel(A: pc.f64["N", "N"]):
    for i in range(1, N - 1):
        for j in range(1, N - 1):
            A[i, j] = (A[i - 1, j] + A[i, j - 1] + A[i, j] + A[i + 1, j] + A[i, j + 1]) * 0.2


@pc.kernel
def jacobi_1d(A: pc.f64["N"], B: pc.f64["N"], T: int):
    for t in range(T):
        for i in range(1, N - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, N - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])


SMALL = [(matmul, {"I": 5, "K": 6, "J": 7}), (softmax_rows, {"I": 5, "J": 6}), (seidel, {"N": 7}),
         (jacobi_1d, {"N": 9, "T": 3})]


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(0, len(SMALL) - 1), seed=st.integers(0, 2**20))
def test_accepted_schedules_match_reference(which, seed):
    kernel, sizes = SMALL[which]
    summary = fuzz_schedules(kernel, n=2, seed=seed, sizes=sizes, max_steps=4)
    assert summary.mismatches == 0
    assert summary.tried == summary.legal + summary.illegal + summary.invalid + summary.budget


def test_fuzzing_reaches_both_outcomes():
    """Over the default kernels the fuzzer must see legal and illegal steps (it is not vacuous)."""
    summary = FuzzSummary("seidel+matmul")
    summary += fuzz_schedules(seidel, n=8, seed=7, sizes={"N": 7})
    summary += fuzz_schedules(matmul, n=8, seed=7, sizes={"I": 4, "K": 5, "J": 6})
    assert summary.legal > 0 and summary.illegal > 0 and summary.schedules > 0
    print(summary)


def test_random_calls_name_existing_loops():
    import random
    rng = random.Random(0)
    s = matmul.schedule()
    for _ in range(50):
        name, args, kwargs = random_call(s, rng)
        loops = [a for a in args if isinstance(a, str) and not a.startswith("S")] + \
            (list(kwargs) if name == "tile" else [])
        assert all(l in s.loop_names for l in loops), (name, args, kwargs)


@pytest.mark.slow
def test_fuzz_whole_library():
    import kernels
    total = FuzzSummary("library")
    lines = []
    for lk in kernels.all_kernels():
        presets = lk.sizes.get("MINI") or lk.sizes.get("small") or next(iter(lk.sizes.values()))
        inputs = lk.make_inputs(presets, lk.dtypes[0], np.random.default_rng(0))
        rtol, atol = lk.tol(lk.dtypes[0])
        summary = fuzz_schedules(lk.kernel, n=8, seed=1, inputs=inputs, reference=lk.reference,
                                 rtol=rtol, atol=atol, raise_on_mismatch=False)
        lines.append(str(summary))
        total += summary
    print("\n".join(lines) + f"\nTOTAL {total}")
    assert total.mismatches == 0, "\n".join(total.failures)


def test_fuzzing_on_cuda_emu_draws_gpu_mappings_and_runs_them():
    """The CUDA mapping is fuzzed as the C schedules are: a thread loop that started at
    `c ? 0 : e + threadIdx.x` (since fixed) gave 6 mismatches in 30 schedules of X[i // 2]."""
    from polyc.testing.fuzz import GPU_PRIMITIVES, random_call
    up = pc.kernel("Y[i] = X[i // 2]", name="up")
    rng = random.Random(0)
    drawn = {random_call(up.schedule(), rng, GPU_PRIMITIVES)[0] for _ in range(20)}
    assert drawn == {"map_to_blocks", "map_to_threads"}
    summary = fuzz_schedules(up, n=12, seed=5, target="cuda-emu")
    assert summary.schedules >= 8 and summary.mismatches == 0


def test_fuzzing_on_c_draws_pack():
    summary = fuzz_schedules(matmul, n=6, seed=3, sizes={"I": 5, "K": 7, "J": 9},
                             primitives={"pack": 1, "tile": 1})
    assert summary.legal >= 3 and summary.mismatches == 0
