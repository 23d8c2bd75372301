"""executor="ray": candidates measured by Ray actors on a local Ray instance, records kept centrally."""
from __future__ import annotations

import pytest

import polyc as pc
from polyc.tune import Records

ray = pytest.importorskip("ray", reason="Ray is optional: pip install 'polyc[ray]'")

MM = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="tune_ray_mm")


@pytest.mark.slow
def test_tune_on_a_local_ray_instance(db):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        result = pc.tune(MM, {"I": 40, "J": 36, "K": 32}, dtype="f64", seconds=300, trials=3, rounds=2,
                         min_sample_s=0.0, executor="ray", threads=1, progress=False, batch=2)
    finally:
        ray.shutdown()
    assert result.table()[0]["ok"]
    assert len(Records(db).rows()) >= 3
