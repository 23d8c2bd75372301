"""A legal schedule that GCC 12 miscompiled at -O3 (found by the schedule fuzzer) now runs right."""
import numpy as np

import polyc as pc
from polyc.runtime.compiler import GCC_WORKAROUND_FLAGS, _is_gcc, command_flags, resolve_compiler


@pc.kernel
def anticausal(x: pc.f64["W", "H"], y: pc.f64["W", "H"], a: float, b: float, c: float):
    for c1 in range(2, H):  # noqa: F821 - sizes are in scope in loop kernels
        for c0 in range(W):  # noqa: F821
            y[c0, H - c1 - 1] = a * x[c0, H - c1] + b * y[c0, H - c1] + c * y[c0, H - c1 + 1]  # noqa: F821


def test_workaround_flags_are_used_with_gcc():
    flags = command_flags(["-O3"], True, resolve_compiler())
    assert all(f in flags for f in GCC_WORKAROUND_FLAGS) == _is_gcc(resolve_compiler())


def test_outer_recurrence_over_inner_simd_loop_is_correct():
    s = anticausal.schedule().vectorize("c0")
    rng = np.random.default_rng(0)
    x, y = rng.random((29, 37)), rng.random((29, 37))
    want = y.copy()
    anticausal.reference(x=x, y=want, a=0.3, b=0.5, c=-0.2)
    got = y.copy()
    pc.compile(anticausal, s)(x=x, y=got, a=0.3, b=0.5, c=-0.2)
    np.testing.assert_allclose(got, want, rtol=1e-12)
