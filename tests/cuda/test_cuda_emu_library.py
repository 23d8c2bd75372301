"""Every library kernel, mapped automatically, run through "cuda-emu" matches its reference.

The emulator runs the generated kernels' semantics on the CPU (blocks and threads as loops, run
backwards; per-thread regions separated at barriers), so mapping bugs show up without a GPU.
"""
from __future__ import annotations

import pytest

import kernels
import polyc as pc

from .conftest import assert_matches, copies, library_inputs

LIBRARY = kernels.all_kernels()


@pytest.mark.parametrize("lk", LIBRARY, ids=[k.name for k in LIBRARY])
def test_library_kernel_on_emulator(lk):
    f = pc.compile(lk.kernel, target="cuda-emu")
    for dtype in lk.dtypes:
        inputs = library_inputs(lk, dtype)
        expected = lk.expected(inputs)
        got = f(**copies(inputs))
        assert_matches(got, expected, lk.tol(dtype), f"{lk.name} ({dtype}) on cuda-emu")
