"""Every PolyBench kernel, compiled by polyc (source order, C), agrees with its Python reference."""
import numpy as np
import pytest

import polyc as pc
from kernels import all_kernels

POLYBENCH = {k.name: k for k in all_kernels(suite="polybench")}
_COMPILED = {}


def compiled(lk):
    if lk.name not in _COMPILED:
        _COMPILED[lk.name] = pc.compile(lk.kernel)
    return _COMPILED[lk.name]


def check(lk, preset):
    dtype = lk.dtypes[0]  # PolyBench's own data type: int32 for floyd-warshall, float for deriche
    inputs = lk.make_inputs(lk.sizes[preset], dtype, np.random.default_rng(0))
    expected = lk.expected(inputs)
    got_inputs = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    compiled(lk)(**got_inputs)
    rtol, atol = lk.tol(dtype)
    if isinstance(expected, dict):
        for name, want in expected.items():
            assert got_inputs[name].dtype == inputs[name].dtype
            np.testing.assert_allclose(got_inputs[name], want, rtol=rtol, atol=atol, err_msg=f"{lk.name}: {name}")
    else:
        written = [n for n, v in got_inputs.items() if isinstance(v, np.ndarray) and
                   lk.kernel.program.tensor(n).role in ("output", "inout")]
        assert len(written) == 1, written
        np.testing.assert_allclose(got_inputs[written[0]], expected, rtol=rtol, atol=atol, err_msg=lk.name)


def test_all_thirty_are_registered():
    assert len(POLYBENCH) == 30


@pytest.mark.parametrize("name", sorted(POLYBENCH))
def test_mini(name):
    check(POLYBENCH[name], "MINI")


@pytest.mark.parametrize("name", sorted(POLYBENCH))
def test_small(name):
    check(POLYBENCH[name], "SMALL")
