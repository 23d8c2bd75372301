"""Intermediates (temps) are reused between calls of one compiled kernel in one thread: results
stay right when data and sizes change, and threads calling concurrently never share them."""
import threading

import numpy as np

import polyc as pc

SOFTMAX = pc.kernel("""
    m[i] max=! X[i, j]
    e[i, j] = exp(X[i, j] - m[i])
    s[i] +=! e[i, j]
    Y[i, j] = e[i, j] / s[i]
""", name="softmax_scratch")


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_temps_are_reused_and_results_stay_right():
    f = pc.compile(SOFTMAX)
    rng = np.random.default_rng(0)
    for shape in [(7, 5), (7, 5), (3, 9), (7, 5)]:
        x = rng.standard_normal(shape)
        np.testing.assert_allclose(f(X=x), _softmax(x), rtol=1e-12)
    temps = f._scratch.temps
    assert {k[0] for k in temps} == {"m", "e", "s"} and len(temps) == 3   # the latest shape's only
    before = {k: id(v) for k, v in temps.items()}
    f(X=rng.standard_normal((7, 5)))
    assert {k: id(v) for k, v in f._scratch.temps.items()} == before      # the same buffers again


def test_threads_do_not_share_temps():
    f = pc.compile(SOFTMAX)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((64, 33)) for _ in range(4)]
    errors = []

    def work(x):
        for _ in range(30):
            if not np.allclose(f(X=x), _softmax(x), rtol=1e-12):
                errors.append("wrong")

    threads = [threading.Thread(target=work, args=(x,)) for x in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
