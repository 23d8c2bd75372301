"""Kernels travel to worker processes pickled (as their program, or their function by reference);
compiled kernels, schedules and programs refuse with a typed error that says what to send."""
from __future__ import annotations

import copy
import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

import polyc as pc
from kernels.nn import softmax

from tests.program.loop_accumulators import column_sum_of_squares

matmul = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="pickled_matmul")


def _run(kernel, arrays):
    return pc.compile(kernel)(**arrays)


def test_kernels_round_trip():
    again = pickle.loads(pickle.dumps(matmul))
    assert again.name == "pickled_matmul"
    a, b = np.ones((2, 3)), np.ones((3, 4))
    np.testing.assert_array_equal(again(A=a, B=b), a @ b)
    assert pickle.loads(pickle.dumps(column_sum_of_squares)) is column_sum_of_squares   # by reference
    renamed = pc.kernel(column_sum_of_squares.function, name="renamed")
    assert pickle.loads(pickle.dumps(renamed)).name == "renamed"


def test_kernels_go_to_worker_processes():
    x = np.random.default_rng(0).standard_normal((5, 3))
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        got = pool.submit(_run, column_sum_of_squares, {"X": x, "c": np.zeros(3)}).result(timeout=120)
        np.testing.assert_allclose(got, (x * x).sum(0))
        y = np.ascontiguousarray(x.T)
        np.testing.assert_allclose(pool.submit(_run, matmul, {"A": x, "B": y}).result(timeout=120), x @ y)


def test_what_cannot_be_pickled_says_what_to_send():
    with pytest.raises(pc.NotPicklableError, match="send the kernel"):
        pickle.dumps(pc.compile(matmul))
    with pytest.raises(TypeError, match=r"send schedule.to_json\(\)"):
        pickle.dumps(matmul.schedule())

    @pc.program
    def probabilities(X: pc.f64["M", "N"]):
        return softmax.kernel(X=X)
    with pytest.raises(pc.NotPicklableError, match="operator program 'probabilities'"):
        pickle.dumps(probabilities)
    s = matmul.schedule()
    assert copy.deepcopy(s) is s and copy.copy(s) is s      # immutable
