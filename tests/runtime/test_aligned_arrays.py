"""Arrays polyc allocates start on a cache line (`polyc.runtime.aligned`): kernel outputs on the
first and on repeated calls, zero-filled outputs, programs' outputs; small arrays come from numpy."""
from __future__ import annotations

import numpy as np

import polyc as pc
from kernels import programs as P
from polyc.runtime.aligned import ALIGN_FROM, ALIGNMENT, aligned_empty


def _aligned(a: np.ndarray) -> bool:
    return a.ctypes.data % ALIGNMENT == 0


def test_aligned_empty_is_aligned_shaped_and_zeroed_on_request():
    for shape in ((1000, 3), (4096,), (7, 11, 13)):
        a = aligned_empty(shape, np.float32, zero=True)
        assert a.shape == shape and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable
        assert not a.any()
        if a.nbytes >= ALIGN_FROM:
            assert _aligned(a)
    small = aligned_empty((3,), np.float64)
    assert small.shape == (3,) and small.flags.owndata
    big = aligned_empty((ALIGN_FROM // 8 + 1,), np.float64)
    assert _aligned(big) and big.flags.writeable


def test_kernel_outputs_are_cache_line_aligned_on_every_call_path():
    f = pc.compile(pc.kernel("Y[i, j] = X[i, j] * 2.0"))
    x = np.ones((1000, 70), np.float32)                # 280 KB: past ALIGN_FROM
    first, again = f(X=x), f(X=x)                     # the checked call, then the ready call
    assert _aligned(first) and _aligned(again)
    np.testing.assert_array_equal(again, 2 * x)
    # an output the kernel does not write everywhere is zero-filled, aligned or not
    g = pc.compile(pc.kernel("Y[i] = X[i] where i in 1:N", X=pc.f32["N"], Y=pc.f32["N"]))
    y = g(X=np.ones(100_000, np.float32))
    assert _aligned(y) and y[0] == 0 and y[1:].all()


def test_program_outputs_are_aligned():
    prog = P.attention(blocks=False)
    out = prog(**P.inputs(prog, dict(S=2048, D=32)))
    assert out.nbytes >= ALIGN_FROM and _aligned(out)
