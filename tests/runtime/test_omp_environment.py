"""polyc sets a short OpenMP spin before libgomp loads, unless the user chose a wait policy (issue #16)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from polyc.runtime.loader import default_openmp_environment

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = """
import json, os, numpy as np, polyc as pc
k = pc.kernel("B[i, j] = A[i, j] * 2.0")
f = pc.compile(k, k.schedule().parallel("i"))
A = np.ones((300, 300))
assert "omp parallel" in f.source
np.testing.assert_allclose(f(A=A), 2 * A)
print(json.dumps({n: os.environ.get(n) for n in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}))
"""


def _run(extra_env):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(extra_env)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_fresh_process_running_a_parallel_kernel_gets_the_short_spin():
    assert _run({}) == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": "10000"}


@pytest.mark.parametrize("user", [{"OMP_WAIT_POLICY": "active"}, {"GOMP_SPINCOUNT": "10000"}])
def test_a_policy_the_user_set_is_left_alone(user):
    got = _run(user)
    expected = {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": None, **user}
    assert got == expected


def test_the_default_is_set_only_where_the_user_set_nothing():
    env = {}
    assert default_openmp_environment(env) == {"GOMP_SPINCOUNT": "10000"}
    assert env == {"GOMP_SPINCOUNT": "10000"}
    env = {"GOMP_SPINCOUNT": "0"}
    assert default_openmp_environment(env) == {}
    assert env == {"GOMP_SPINCOUNT": "0"}
