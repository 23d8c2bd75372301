"""Kernels whose tensors, indices and scalars carry hostile names compute the right numbers.

Hostile: C keywords (`int`, `for`), macros and libm names (`NAN`, `sqrtf`, `exp`), `main`, OpenMP
and CUDA names, polyc's own internal names (`polyc_r`, `polyc_kk`, `pc_min`), a tensor `X` beside a
tensor `X_data`, uppercase indices beside the sizes derived from lowercase ones, isl keywords and
isl's own dimension names (`mod`, `infty`, `t0`, `i0`), and non-ASCII names (`α`).  Each kernel runs
on targets "c" and "cuda-emu", in source order and under `schedule="auto"`, against numpy.
"""
from __future__ import annotations

from typing import Dict, NamedTuple

import numpy as np
import pytest

import polyc as pc


class Names(NamedTuple):
    """One kernel's names: `C[i, j] +=! s * A[i, k] * B[k, j]` and `D[i, j] = A[i, j] - s`."""

    C: str
    A: str
    B: str
    i: str
    j: str
    k: str
    s: str
    D: str


GROUPS: Dict[str, Names] = {
    "c-keywords": Names("int", "for", "double", "while", "return", "static", "restrict", "void"),
    "macros-libm-main": Names("NAN", "sqrtf", "exp", "main", "omp", "INFINITY", "fmax", "M_PI"),
    "polyc-internals": Names("pc_kk", "pc_min", "polyc_min", "polyc_r", "polyc_q", "polyc_kk", "pc_r", "polyc_given_N"),
    "data-pointer-pairs": Names("X", "X_data", "d_X", "t_i", "i_t", "n_K", "t_X", "s_X"),
    "uppercase-indices": Names("C", "A", "B", "I", "J", "K", "alpha", "D"),
    "isl-keywords": Names("rat", "exists", "floor", "mod", "min", "infty", "t0", "MOD"),
    "isl-internal-looking": Names("S0", "u1", "e0", "i0", "o0", "t1", "_s1", "q"),
    "cuda-names": Names("threadIdx", "blockIdx", "float4", "dim3", "__syncthreads", "_x", "size_t", "gridDim"),
}

SIZES = (72, 76, 74)   # rows of A, columns of B, the reduced extent: above 16 and past L1 (131 KB), so "auto" packs


def contraction(n: Names) -> pc.Kernel:
    return pc.kernel(f"{n.C}[{n.i}, {n.j}] +=! {n.s} * {n.A}[{n.i}, {n.k}] * {n.B}[{n.k}, {n.j}]",
                     name="hostile_mm")


def pointwise(n: Names) -> pc.Kernel:
    return pc.kernel(f"{n.D}[{n.i}, {n.j}] = {n.A}[{n.i}, {n.j}] - {n.s}", name="hostile_pw")


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    m, n, k = SIZES
    return rng.random((m, k)), rng.random((k, n)), 1.5


COMBOS = [("c", None), ("c", "auto"), ("cuda-emu", None), ("cuda-emu", "auto")]

#: The combination each group runs in the default test run (the others are `slow`): where the names
#: used to break (packing under "auto" for polyc's internals, gcc for keywords, ...), and overall
#: every combination several times.
DEFAULT = {
    "contraction": {"c-keywords": 0, "macros-libm-main": 2, "polyc-internals": 1, "data-pointer-pairs": 0,
                    "uppercase-indices": 1, "isl-keywords": 3, "isl-internal-looking": 1, "cuda-names": 2},
    "pointwise": {"c-keywords": 3, "macros-libm-main": 0, "polyc-internals": 2, "data-pointer-pairs": 3,
                  "uppercase-indices": 0, "isl-keywords": 1, "isl-internal-looking": 2, "cuda-names": 1},
}


def matrix(kernel: str):
    """Every (group, target, schedule), `slow` but for each group's default combination."""
    out = []
    for group in GROUPS:
        for c, (target, schedule) in enumerate(COMBOS):
            marks = () if DEFAULT[kernel][group] == c else (pytest.mark.slow,)
            label = f"{group}-{target}-{schedule or 'source'}"
            out.append(pytest.param(group, target, schedule, id=label, marks=marks))
    return out


@pytest.mark.parametrize("group, target, schedule", matrix("contraction"))
def test_hostile_names_in_a_contraction(group, target, schedule):
    n = GROUPS[group]
    a, b, s = inputs()
    f = pc.compile(contraction(n), schedule=schedule, target=target)
    got = f(**{n.A: a, n.B: b, n.s: s})
    np.testing.assert_allclose(got, a @ b * s, rtol=1e-12)
    if (target, schedule) == ("c", "auto"):
        assert "_packed(" in f.source       # the packed-contraction emitter saw these names too


@pytest.mark.parametrize("group, target, schedule", matrix("pointwise"))
def test_hostile_names_in_a_pointwise_kernel(group, target, schedule):
    n = GROUPS[group]
    a = np.random.default_rng(1).random((4, 6))
    f = pc.compile(pointwise(n), schedule=schedule, target=target)
    np.testing.assert_allclose(f(**{n.A: a, n.s: 0.25}), a - 0.25, rtol=1e-12)


def test_uppercase_indices_get_their_own_size_names():
    """Index `I` beside the size derived from index `i`: sizes are renamed (`I_size`), never shared."""
    mm = pc.kernel("C[I, J] +=! A[I, K] * B[K, J]")
    assert not set(mm.program.sizes) & {"I", "J", "K"}
    a, b, _ = inputs()
    np.testing.assert_allclose(pc.compile(mm)(A=a, B=b), a @ b, rtol=1e-12)
    np.testing.assert_allclose(mm.reference(A=a, B=b), a @ b, rtol=1e-12)
    np.testing.assert_allclose(pc.compile(mm, schedule="auto")(A=a, B=b), a @ b, rtol=1e-12)


def test_an_index_and_its_uppercase_twin_in_one_statement():
    k = pc.kernel("C[j, J] = X[j, J] + 1.0")
    x = np.random.default_rng(2).random((4, 5))
    np.testing.assert_allclose(pc.compile(k)(X=x), x + 1.0)
    np.testing.assert_allclose(k.reference(X=x), x + 1.0)


# -- non-ASCII names: affine-Python kernels (Python identifiers may be any Unicode letters) ----------

def _unicode_kernel():
    @pc.kernel
    def scale_α(Aα: pc.f64["Nα", "Mβ"], Bβ: pc.f64["Nα", "Mβ"], σ: float):
        for iα in range(Nα):          # noqa: F821  (sizes named in annotations are in scope)
            for jβ in range(Mβ):      # noqa: F821
                Bβ[iα, jβ] = Aα[iα, jβ] * σ + Aα[iα, 0]
    return scale_α


@pytest.mark.parametrize("schedule", [None, "auto"], ids=["source", "auto"])
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_unicode_names(target, schedule):
    k = _unicode_kernel()
    a = np.random.default_rng(3).random((6, 4))
    b = np.zeros_like(a)
    pc.compile(k, schedule=schedule, target=target)(Aα=a, Bβ=b, σ=2.0)
    np.testing.assert_allclose(b, a * 2.0 + a[:, :1], rtol=1e-12)
