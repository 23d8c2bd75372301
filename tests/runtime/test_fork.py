"""A forked child (os.fork, multiprocessing's "fork" start method) can use polyc: libgomp's pool
does not survive the fork, so the child runs serially, and a lock another thread held at the fork
comes back unlocked.  Each scenario runs in its own process, under a timeout (a hang fails)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")

_PARALLEL_THEN_FORK = textwrap.dedent("""
    import os, numpy as np, polyc as pc
    f = pc.compile(pc.kernel("B[i] = A[i] * 2.0 + 1.0", name="fork_parallel"), "auto")
    A = np.arange(2_000_000.0)                  # above the parallel threshold: a team runs
    assert (f(A=A) == 2 * A + 1).all()
    pid = os.fork()
    if pid == 0:
        ok = (f(A=A + 1) == 2 * (A + 1) + 1).all()
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status))
""")

_LOCK_HELD_AT_FORK = textwrap.dedent("""
    import os, threading, time, numpy as np, polyc as pc
    from polyc.runtime import ckernel
    f = pc.compile(pc.kernel("B[i] = A[i] * 2.0", name="fork_lock"))
    real = ckernel.compile_c
    def slow(*args, **kwargs):
        time.sleep(1.0)
        return real(*args, **kwargs)
    ckernel.compile_c = slow
    t = threading.Thread(target=lambda: f(A=np.ones(3, np.float32)))   # a float32 variant: compiling
    t.start()
    time.sleep(0.3)
    assert f._lock.locked()
    pid = os.fork()
    if pid == 0:
        ckernel.compile_c = real
        ok = (f(A=np.ones(4, np.float64)) == 2).all()      # another variant: the lock again
        os._exit(0 if ok else 3)
    t.join()
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status))
""")


@pytest.mark.parametrize("script", [_PARALLEL_THEN_FORK, _LOCK_HELD_AT_FORK], ids=["after-openmp", "lock-held"])
def test_a_forked_child_runs_kernels(script, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="2", POLYC_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("child 0"), out.stdout + out.stderr[-2000:]
