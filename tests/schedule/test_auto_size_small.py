"""`schedule="auto"` at small size classes keeps away from what only pays at large ones (issue #16,
"every size"; measured with `benchmarks/auto_vs_source.py`): register blocking across a strided
innermost loop whose lines already stay in L1, and packing a contraction whose arrays fit in L1.
Decisions are asserted, never times."""
import dataclasses
import importlib
import warnings

import numpy as np
import pytest

import polyc as pc
from polyc.schedule.auto import auto_schedule
from polyc.schedule.auto_size import (CACHE_LINE_BYTES, jam_pays_across_strides, pack_pays,
                                      working_set_bytes)
from polyc.schedule.packing import contraction_form
from polyc.target import Target

from test_auto_size import _proven  # noqa: E402 - this folder is on sys.path under pytest


def _lib(module, name):
    for k in importlib.import_module(module).KERNELS:
        if k.name == name:
            return k
    raise KeyError(name)


def _jammed(sched):
    """Whether some loop of `sched` is a fully unrolled register lane (the jam's signature)."""
    return any(d.name is not None and d.unroll.is_full for d in sched.dims)


def _checked(lk, preset):
    """`schedule="auto"` called at `preset`, checked against the source-order C; the schedule its
    size class got."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = pc.compile(lk.kernel, schedule="auto")
    inputs = lk.make_inputs(lk.sizes[preset], lk.dtypes[0])
    got = f(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()})
    expected = pc.compile(lk.kernel)(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()})
    if not isinstance(expected, dict):
        got, expected = {"_": got}, {"_": expected}
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], *lk.tol(lk.dtypes[0]), err_msg=name)
    return f.schedule_for(dict(lk.sizes[preset]))[1]


# -- register blocking across strided accesses -----------------------------------------------------

def test_jam_pays_only_when_the_strided_lines_of_a_pass_fill_l1():
    l1 = 32 * 1024
    assert jam_pays_across_strides(0, 8, l1)           # SIMD lanes: always
    assert jam_pays_across_strides(2, None, l1)        # sizes unknown: as large as it gets
    assert not jam_pays_across_strides(2, 80, l1)      # 80 rows x 2 arrays = 10 KB of lines
    assert jam_pays_across_strides(2, l1 // (2 * CACHE_LINE_BYTES), l1)


@pytest.mark.parametrize("preset", ["SMALL", "MEDIUM"])
def test_syr2k_is_not_register_blocked_where_its_strided_rows_stay_in_l1(preset):
    """syr2k's `A[j, k]`, `B[j, k]` move a row per step of the innermost `j`: the jam of `k` into it
    only saves lines, and at N <= 240 one pass of `j` touches less than L1 (0.72x of the source
    order jammed at SMALL, 1.0x not)."""
    lk = _lib("kernels.polybench.blas", "syr2k")
    sched = _checked(lk, preset)
    _proven(lk.kernel, sched)
    assert not _jammed(sched), sched


def test_syr2k_large_keeps_its_register_blocking():
    """Tiles of 256 rows touch 32 KB of lines per pass of `j`: past a 32 KiB L1 the jam saves them
    (the premise is this L1, so the test is the same on machines with a larger one)."""
    lk = _lib("kernels.polybench.blas", "syr2k")
    target = dataclasses.replace(Target.host(), l1=32 * 1024)
    sched = auto_schedule(lk.kernel, target, sizes=lk.sizes["LARGE"])
    _proven(lk.kernel, sched)
    assert _jammed(sched), sched
    assert _jammed(auto_schedule(lk.kernel, target)), "without sizes the schedule serves every size"


def test_simd_contractions_keep_register_blocking_at_small_sizes():
    lk = _lib("kernels.polybench.blas", "gemm")  # unit stride along j: the jam feeds SIMD lanes
    sched = auto_schedule(lk.kernel, sizes=lk.sizes["SMALL"], pack=False)
    assert _jammed(sched), sched


# -- packing ------------------------------------------------------------------------------------

def _packed(sched):
    return [p.contraction.statement for p in sched.packing]


@pytest.mark.parametrize("name, preset", [("gemm", "MINI"), ("3mm", "MINI"), ("syrk", "MINI")])
def test_contractions_that_fit_in_l1_are_not_packed(name, preset):
    module = "kernels.polybench.linear_algebra" if name == "3mm" else "kernels.polybench.blas"
    lk = _lib(module, name)
    program = lk.kernel.program
    sched = _checked(lk, preset)
    _proven(lk.kernel, sched)
    assert not _packed(sched), sched
    assert any(working_set_bytes(program, [st.name], lk.sizes[preset]) <= Target.host().l1
               for st in program.statements)


def test_matmul_packs_past_l1_and_with_undeclared_dtypes():
    """The core matmul declares no dtype: its working set counts 8 bytes an element, so a 512^3
    call is never taken for one that fits."""
    lk = _lib("kernels.linalg", "matmul")
    assert not _packed(auto_schedule(lk.kernel, sizes=lk.sizes["primes"]))   # 7 x 13 x 5
    assert _packed(auto_schedule(lk.kernel, sizes=lk.sizes["typical"]))      # 512^3
    assert _packed(auto_schedule(lk.kernel)), "without sizes the schedule serves every size"
    gemm = _lib("kernels.polybench.blas", "gemm")
    assert _packed(auto_schedule(gemm.kernel, sizes=gemm.sizes["SMALL"]))    # 83 KB of operands


def test_convolution_windows_pack_at_any_size():
    """Several reduction loops (channels x window) become one long unit-stride reduction only when
    packed: that pays even when everything fits in L1 (conv2d primes: 2.7x packed, 1.7x not)."""
    lk = _lib("kernels.nn", "conv2d")
    program = lk.kernel.program
    forms = [f for f in (contraction_form(program, st.name) for st in program.statements) if not isinstance(f, str)]
    assert forms and all(len(f.k) > 1 for f in forms)
    tiny = dict(lk.sizes["primes"])
    assert all(pack_pays(program, f, tiny, Target.host()) for f in forms)
    sched = _checked(lk, "primes")
    _proven(lk.kernel, sched)
    assert _packed(sched), sched
