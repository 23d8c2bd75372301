"""Item 1: a tensor updated in place after its reduction (TC's idiom) is an output, never lost."""
import numpy as np
import pytest

import polyc as pc

from .tc_helpers import check_all

rng = np.random.default_rng(0)


def test_update_after_reduction_is_returned():
    k = pc.kernel("O[i] +=! A[i, j]\nO[i] = O[i] * 2.0")
    assert k.program.tensor("O").role == "output"
    a = rng.random((5, 4))
    check_all(k, dict(A=a), a.sum(1) * 2.0)


def test_fully_connected_relu_keeps_output():
    k = pc.kernel("O[b, n] +=! I[b, m] * W[n, m]\nO[b, n] = O[b, n] + B[n]\nO[b, n] = fmax(O[b, n], 0.0)")
    i, w, b = rng.standard_normal((3, 6)), rng.standard_normal((4, 6)), rng.standard_normal(4)
    check_all(k, dict(I=i, W=w, B=b), np.maximum(i @ w.T + b, 0.0))


def test_read_after_last_write_is_intermediate():
    k = pc.kernel("T[i] = A[i] + 1.0\nO[i] = T[i] * 3.0")
    assert k.program.tensor("T").role == "temp"
    a = rng.random(6)
    check_all(k, dict(A=a), (a + 1.0) * 3.0)


def test_explicit_outputs_return_both():
    k = pc.kernel("T[i] = A[i] + 1.0\nO[i] = T[i] * 3.0", outputs=["T", "O"])
    a = rng.random(6)
    check_all(k, dict(A=a), dict(T=a + 1.0, O=(a + 1.0) * 3.0))


def test_explicit_outputs_make_others_intermediate():
    k = pc.kernel("M[i] +=! A[i, j]\nV[i] +=! A[i, j] * A[i, j]", outputs=["V"])
    assert k.program.tensor("M").role == "temp"
    a = rng.random((3, 5))
    check_all(k, dict(A=a), (a * a).sum(1))


def test_outputs_naming_unwritten_tensor_is_refused():
    with pytest.raises(pc.ParseError, match="no statement of the kernel writes"):
        pc.kernel("O[i] = A[i]", outputs=["A"])
    with pytest.raises(pc.ParseError, match="list of tensor names"):
        pc.kernel("O[i] = A[i]", outputs="O")
