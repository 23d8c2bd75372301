"""At a call's sizes, a loop with one iteration (a batch of 1, or its tile loop) is not made
parallel: the mark goes to a loop that has iterations to share."""
import numpy as np

import polyc as pc
from polyc.schedule.state import LoopKind

K = pc.kernel("Y[n, i, j] = X[n, i, j] * 2.0 + 1.0", name="batch_scale")


def _parallel_loops(schedule):
    return [d.name for d in schedule.dims if d.name is not None and LoopKind.PARALLEL in d.kinds]


def test_batch_of_one_parallelises_an_inner_loop():
    f = pc.compile(K, schedule="auto")
    x = np.random.default_rng(0).standard_normal((1, 512, 512))
    np.testing.assert_allclose(f(X=x), x * 2 + 1)
    _, one = f.schedule_for({"N": 1, "I": 512, "J": 512})
    marked = _parallel_loops(one)
    assert marked and not any(name.startswith("n") for name in marked), marked
    _, many = f.schedule_for({"N": 64, "I": 512, "J": 512})
    assert any(name.startswith("n") for name in _parallel_loops(many))
