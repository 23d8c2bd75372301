"""The core kernel library (`kernels.all_kernels(suite="core")`) against its numpy references.

Every kernel is compiled once (`pc.compile`, source-order schedule) and checked in float32 and
float64 at three size sets: every size 1 (degenerate loops), the kernel's "primes" preset (odd,
unequal extents that catch swapped or mis-strided dimensions) and its "small" preset.  Tolerances
are the library's (`kernels.TOLERANCES`, or a kernel's own override).
"""
import numpy as np
import pytest

import polyc as pc
from kernels import TOLERANCES, all_kernels

CORE = {k.name: k for k in all_kernels(suite="core")}
EXPECTED = {"matmul", "matvec", "batched_matmul", "transpose", "outer", "trace", "contract3",
            "bias_relu", "conv2d", "avgpool2d", "softmax", "layernorm"}
PRESETS = ("small", "primes", "typical", "bench")
SIZE_SETS = ("ones", "primes", "small")

_compiled = {}


def compiled(name):
    """One CompiledKernel per kernel for the whole module: it specialises per dtype itself."""
    if name not in _compiled:
        _compiled[name] = pc.compile(CORE[name].kernel)
    return _compiled[name]


def sizes_for(lk, which):
    if which == "ones":
        return {k: 1 for k in lk.sizes["small"]}
    return lk.sizes[which]


def as_dict(result):
    return result if isinstance(result, dict) else {"": result}


def test_library_has_every_core_kernel():
    assert EXPECTED <= set(CORE), sorted(EXPECTED - set(CORE))
    assert all(k.suite == "core" for k in CORE.values())


@pytest.mark.parametrize("name", sorted(CORE))
def test_presets_name_the_kernels_sizes(name):
    lk = CORE[name]
    sizes = set(lk.kernel.program.sizes)
    for preset in PRESETS:
        assert set(lk.sizes[preset]) == sizes, (preset, sorted(lk.sizes[preset]), sorted(sizes))
    for dtype in lk.dtypes:
        assert dtype in TOLERANCES
        rtol, atol = lk.tol(dtype)
        assert 0 < rtol < 1e-2 and 0 <= atol < 1e-2


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name", sorted(CORE))
def test_matches_reference(name, dtype):
    lk = CORE[name]
    assert dtype in lk.dtypes
    f = compiled(name)
    rtol, atol = lk.tol(dtype)
    for which in SIZE_SETS:
        sizes = sizes_for(lk, which)
        inputs = lk.make_inputs(sizes, dtype, np.random.default_rng(1234))
        before = {k: v.copy() for k, v in inputs.items() if isinstance(v, np.ndarray)}
        got, want = as_dict(f(**inputs)), as_dict(lk.expected(inputs))
        assert set(got) == set(want), (which, sorted(got), sorted(want))
        for out, expected in want.items():
            result = got[out]
            assert result.dtype == np.dtype({"f32": np.float32, "f64": np.float64}[dtype]), (which, out, result.dtype)
            assert result.shape == np.shape(expected), (which, out, result.shape, np.shape(expected))
            np.testing.assert_allclose(result, expected, rtol=rtol, atol=atol,
                                       err_msg=f"{name} {dtype} {which} {sizes} output {out or 'result'}")
        for k, v in before.items():  # inputs are read-only for every core kernel
            np.testing.assert_array_equal(inputs[k], v, err_msg=f"{name} modified its input {k}")
