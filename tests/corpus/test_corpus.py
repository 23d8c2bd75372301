"""The corpus of kernels as their authors wrote them, against numpy, under three variants.

Every kernel of `tc_kernels`, `loopy_kernels`, `halide_kernels` and `tvm_kernels` is defined,
compiled and run under the source-order schedule, `schedule="auto"` and `target="cuda-emu"`.
Each call must return exactly the outputs its source names (a silently missing output fails), in
the reference's dtype and shape, with values equal to numpy's within a dtype-aware tolerance.
Kernels that fail on today's polyc are `xfail(strict=True)` with the cause (`spec.py`), so a fix
shows up as an unexpected pass.  Truly non-affine kernels must be refused with a `PolycError` that
says the subscript is not affine / data-dependent.
"""
from __future__ import annotations

import inspect
from typing import Any, Dict, List

import numpy as np
import pytest

import polyc as pc

from . import halide_kernels, loopy_kernels, tc_kernels, tvm_kernels
from .spec import VARIANTS, CorpusKernel

MODULES = (tc_kernels, loopy_kernels, halide_kernels, tvm_kernels)
KERNELS: List[CorpusKernel] = [k for m in MODULES for k in m.KERNELS]
REFUSED: List[CorpusKernel] = [k for m in MODULES for k in m.REFUSED]

#: (rtol, atol) by result dtype; integers must match exactly.
TOLERANCES = {np.dtype(np.float32): (2e-4, 2e-5), np.dtype(np.float64): (1e-9, 1e-12)}

#: Whether `pc.kernel` takes an explicit output list (TC's `-> (...)`).  When it does, Einstein
#: kernels name their outputs as their source does; until then polyc infers them.
NAMES_OUTPUTS = "outputs" in inspect.signature(pc.kernel).parameters


def build(spec: CorpusKernel) -> Any:
    """The polyc kernel of `spec`, defined as its source language states it."""
    if callable(spec.source):
        return pc.kernel(spec.source, name=spec.name)
    extra: Dict[str, Any] = {"outputs": list(spec.outputs)} if NAMES_OUTPUTS else {}
    return pc.kernel(spec.source, name=spec.name, **extra, **dict(spec.declared))


def compile_variant(kernel: Any, variant: str) -> Any:
    if variant == "source":
        return pc.compile(kernel)
    if variant == "auto":
        return pc.compile(kernel, schedule="auto")
    return pc.compile(kernel, target="cuda-emu")


def _params(kernels: List[CorpusKernel]) -> List[Any]:
    params = []
    for spec in kernels:
        for variant in VARIANTS:
            marks = []
            reason = spec.xfail_reason(variant)
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            if variant in spec.slow:
                marks.append(pytest.mark.slow)
            params.append(pytest.param(spec, variant, id=f"{spec.name}-{variant}", marks=marks))
    return params


def test_corpus_is_large_and_named_uniquely():
    names = [k.name for k in KERNELS + REFUSED]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert len(KERNELS) + len(REFUSED) >= 45
    for spec in KERNELS + REFUSED:
        assert spec.origin.split(":")[0] in {"facebookresearch/TensorComprehensions", "inducer/loopy",
                                             "halide/Halide", "apache/tvm"}, spec.origin


@pytest.mark.parametrize("spec, variant", _params(KERNELS))
def test_kernel_matches_numpy(spec: CorpusKernel, variant: str):
    inputs = spec.inputs(np.random.default_rng(20261123))
    expected = spec.reference(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()})
    assert set(expected) == set(spec.outputs), "the reference must compute every output"
    kernel = build(spec)
    got = compile_variant(kernel, variant)(**inputs)
    if not isinstance(got, dict):
        got = {} if got is None else {_single_output(kernel): got}
    assert set(got) == set(spec.outputs), f"returned {sorted(got)}, the source's outputs are {sorted(spec.outputs)}"
    for name, want in expected.items():
        want = np.asarray(want)
        result = np.asarray(got[name])
        assert result.dtype == want.dtype, (name, result.dtype, want.dtype)
        region = spec.regions.get(name)
        if region is not None:
            assert all(stop <= extent for stop, extent in zip((s.stop for s in region), result.shape)), \
                (name, result.shape, region)
            result = result[region]
        assert result.shape == want.shape, (name, result.shape, want.shape)
        if want.dtype in TOLERANCES:
            rtol, atol = spec.tol or TOLERANCES[want.dtype]
            np.testing.assert_allclose(result, want, rtol=rtol, atol=atol, err_msg=f"{spec.name} {variant} {name}")
        else:
            np.testing.assert_array_equal(result, want, err_msg=f"{spec.name} {variant} {name}")


def _single_output(kernel: Any) -> str:
    """The name of the one output a call returned bare (polyc's convention for one output)."""
    outs = [t.name for t in kernel.program.tensors if t.role in ("output", "inout")]
    return outs[0] if len(outs) == 1 else "<unnamed output>"


@pytest.mark.parametrize("spec", [
    pytest.param(s, id=s.name, marks=[pytest.mark.xfail(strict=True, reason=s.xfail)] if s.xfail else [])
    for s in REFUSED])
def test_non_affine_kernel_is_refused(spec: CorpusKernel):
    assert spec.refused
    with pytest.raises(pc.PolycError, match=spec.refused):
        build(spec)
