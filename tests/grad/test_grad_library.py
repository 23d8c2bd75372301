"""`pc.grad` on every differentiable kernel of the library, checked by finite differences.

Refused library kernels (each raises `GradError` with its reason, checked below):
- PolyBench kernels that update arrays in place and read them back (gemver, gesummv, symm, trmm,
  doitgen, deriche, durbin, ludcmp, trisolv, fdtd-2d): a recurrence or an overwrite of a
  value the gradient needs; nussinov: its data are integers (PolyBench's int and char), which have
  no gradient; 2mm/3mm: their intermediates are arrays passed in and updated in place.
- kernels with no read-only input (correlation, covariance, cholesky, lu, gramschmidt, adi, the
  stencils, floyd-warshall): every array is updated in place, so there is nothing to differentiate
  with respect to (pc.grad differentiates with respect to inputs).
Every one of them with float data differentiates with `checkpoint="store"` (with respect to the
values passed in, `test_every_float_polybench_kernel_differentiates_with_store` below, slow group).
"""
from __future__ import annotations

import numpy as np
import pytest

import polyc as pc
from kernels import all_kernels, by_name
from polyc.testing import check_grad

CORE = [k.name for k in all_kernels("core")]
POLYBENCH_OK = ["gemm", "syr2k", "syrk", "atax", "bicg", "mvt"]
POLYBENCH_REFUSED = {"gemver": "recurrence", "gesummv": "recurrence", "symm": "recurrence", "trmm": "recurrence",
                     "doitgen": "overwrites A", "deriche": "recurrence", "nussinov": "integer type",
                     "durbin": "recurrence", "ludcmp": "recurrence", "trisolv": "recurrence",
                     "2mm": "updates in place", "3mm": "updates in place", "fdtd-2d": "overwrites hz"}


def _of_and_wrt(lk):
    prog = lk.kernel.program
    written = [t.name for t in prog.tensors if t.role in ("output", "inout")]
    return written[-1], [t.name for t in prog.tensors if t.role == "input"]


@pytest.mark.parametrize("name", CORE)
@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_core_kernel_gradients_match_finite_differences(name, dtype):
    lk = by_name(name)
    of, wrt = _of_and_wrt(lk)
    inputs = lk.make_inputs(lk.sizes["small"], dtype, np.random.default_rng(3))
    result = check_grad(lk.kernel, of, wrt, inputs, directions=3, seed=1)
    assert result.worst <= result.rtol


@pytest.mark.parametrize("name", POLYBENCH_OK)
def test_polybench_loop_kernel_gradients_match_finite_differences(name):
    lk = by_name(name)
    of, wrt = _of_and_wrt(lk)
    inputs = lk.make_inputs(lk.sizes["MINI"], "f64", np.random.default_rng(3))
    check_grad(lk.kernel, of, wrt, inputs, directions=2)


@pytest.mark.parametrize("name", sorted(POLYBENCH_REFUSED))
def test_polybench_kernels_that_overwrite_values_are_refused_with_the_reason(name):
    lk = by_name(name)
    of, wrt = _of_and_wrt(lk)
    with pytest.raises(pc.GradError, match=POLYBENCH_REFUSED[name]) as err:
        pc.grad(lk.kernel, of=of, wrt=wrt)
    assert "line" in str(err.value) or "in place" in str(err.value) or "no gradient" in str(err.value)


INTEGER_POLYBENCH = ("nussinov", "floyd-warshall")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(k.name for k in all_kernels("polybench") if k.name not in INTEGER_POLYBENCH))
def test_every_float_polybench_kernel_differentiates_with_store(name):
    """`checkpoint="store"`: gradients with respect to every array whose values the kernel reads
    (inputs and arrays updated in place), of its first output, against finite differences."""
    from polyc.grad.expansion import expand
    lk = by_name(name)
    prog = lk.kernel.program
    of = next(t.name for t in prog.tensors if t.role in ("output", "inout"))
    wrt = [t.name for t in expand(prog).program.tensors if t.role == "input" and t.dtype.is_float]
    dtype = "f32" if name == "deriche" else "f64"       # deriche is defined in float32 only
    check_grad(lk.kernel, of, wrt, lk.make_inputs(lk.sizes["MINI"], dtype, np.random.default_rng(3)),
               directions=2, checkpoint="store")


def test_check_grad_catches_a_wrong_gradient(monkeypatch):
    cube = pc.kernel("Y[i] = X[i] * X[i] * X[i]")
    x = np.random.default_rng(0).uniform(0.5, 1.5, 7)
    check_grad(cube, "Y", "X", X=x)
    # Hand check_grad the gradient of another function: it must notice.
    real_grad = pc.grad
    monkeypatch.setattr(pc, "grad", lambda kernel, of, wrt: real_grad(cube, of, wrt))
    with pytest.raises(AssertionError, match="finite differences"):
        check_grad(pc.kernel("Y[i] = X[i] * X[i] * X[i] + X[i]"), "Y", "X", X=x)
