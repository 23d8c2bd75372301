"""Every identifier in generated C, CUDA and emulation C is polyc's: no user name is printed bare.

The sources are tokenised (comments, strings and preprocessor lines dropped); each identifier must be
a C/CUDA keyword or a library name polyc calls (an explicit list), one of polyc's own (`pc_...`, the
exported `polyc_<kernel>...`), or a user name mangled by kind (`t_A`, `d_A`, `n_M`, `s_alpha`,
`i_k`, or the `tu_`/`nu_`... spellings of non-ASCII names).
"""
from __future__ import annotations

import re
from typing import Iterable, Set

import numpy as np
import pytest

import polyc as pc
from polyc.codegen.names import ascii_spelling, mangle

#: Identifiers generated code may use that are not names: C and CUDA keywords and types, and the
#: library functions and macros polyc calls.
EXTERNAL = set("""
    auto break case char const continue default do double else enum extern float for goto if inline int
    long register restrict return short signed sizeof static struct switch typedef union unsigned void
    volatile while int32_t int64_t uint32_t uint64_t uint8_t uint16_t size_t
    INFINITY NAN INT32_MIN INT32_MAX INT64_MIN INT64_MAX UINT8_MAX UINT16_MAX
    exp expf log logf sqrt sqrtf tanh tanhf fabs fabsf floor floorf ceil ceilf sin sinf cos cosf
    fmax fmaxf fmin fminf pow powf fmod fmodf llabs copysign copysignf
    memcpy memset free aligned_alloc omp_get_max_threads omp_get_thread_num
    __attribute__ vector_size aligned
    __global__ __device__ __forceinline__ __shared__ __align__ __restrict__ __launch_bounds__ __syncthreads
    blockIdx threadIdx gridDim blockDim float4 double2 int4 longlong2 uintptr_t __shfl_down_sync
""".split())

_OURS = re.compile(r"(pc_|polyc_)\w*\Z")
_MANGLED = re.compile(r"[tdnsi]u?_\w+\Z")


def identifiers(source: str) -> Set[str]:
    """The identifiers of C/CUDA `source` outside comments, strings, preprocessor lines and member
    accesses (`blockIdx.x`), and not inside number literals (`0.5f`)."""
    text = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    text = re.sub(r'"[^"\n]*"', " ", text)
    return set(re.findall(r"(?<![\w.])[A-Za-z_]\w*", text))


def foreign(source: str) -> Set[str]:
    """Identifiers of `source` that are neither external, nor polyc's own, nor mangled user names."""
    return {x for x in identifiers(source) if x not in EXTERNAL and not _OURS.match(x) and not _MANGLED.match(x)}


def user_names(kernel: pc.Kernel) -> Iterable[str]:
    p = kernel.program
    yield from (t.name for t in p.tensors)
    yield from (s.name for s in p.scalars)
    yield from p.sizes
    yield from (i for st in p.statements for i in st.iterators)


def hostile_kernel() -> pc.Kernel:
    """Tensors `for`, `X_data`, `NAN`, scalars `main`, `sqrtf`, indices `i`, `j`, `k`."""
    return pc.kernel("C[i, j] +=! main * for[i, k] * X_data[k, j]\n"
                     "D[i, j] = exp(for[i, j]) - max(sqrtf, for[i, j]) + NAN[i, j]", name="hostile")


def _arrays():
    rng = np.random.default_rng(0)
    return {"for": rng.random((6, 4)), "X_data": rng.random((4, 4)), "NAN": rng.random((6, 4)),
            "main": 2.0, "sqrtf": 0.5}


def _check(source: str, kernel: pc.Kernel) -> None:
    assert not foreign(source), f"identifiers not from polyc's mangling: {sorted(foreign(source))}"
    ids = identifiers(source)
    for name in user_names(kernel):
        if name not in EXTERNAL:          # `for` is a keyword the code legitimately uses as one
            assert name not in ids, f"user name {name!r} printed bare"


@pytest.mark.parametrize("schedule", ["source", "auto", "packed", "parallel"])
def test_generated_c_uses_only_mangled_names(schedule):
    k = hostile_kernel()
    s = {"source": lambda: None, "auto": lambda: "auto",
         "packed": lambda: k.schedule().pack(1),
         "parallel": lambda: k.schedule().parallel("i")}[schedule]()
    f = pc.compile(k, s)
    out = f(**_arrays())
    a = _arrays()
    np.testing.assert_allclose(out["C"], a["for"] @ a["X_data"] * 2.0)
    np.testing.assert_allclose(out["D"], np.exp(a["for"]) - np.maximum(0.5, a["for"]) + a["NAN"])
    if schedule == "packed":
        assert "_packed(" in f.source          # the packed-contraction helper was emitted
    _check(f.source, k)


def test_specialised_c_uses_only_mangled_names():
    k = hostile_kernel()
    f = pc.compile(k, specialise=True)
    f(**_arrays())
    assert "pc_given_n_" in f.source
    _check(f.source, k)


def test_cuda_and_emulation_sources_use_only_mangled_names():
    k = hostile_kernel()
    _check(pc.codegen(k, target="cuda"), k)
    _check(pc.codegen(k, "auto", target="cuda"), k)
    f = pc.compile(k, target="cuda-emu")
    f(**_arrays())
    _check(f.generated.source, k)
    _check(f.generated.emulation_source, k)


def test_mangling_is_injective_and_readable():
    names = ["A", "A_", "A__", "_A", "X", "X_data", "α", "αβ", "a_3b1_", "u_A", "polyc_r", "pc_r", "int"]
    kinds = ["t", "d", "n", "s", "i"]
    spelled = {(kind, n): mangle(kind, n) for kind in kinds for n in names}
    assert len(set(spelled.values())) == len(spelled)
    assert mangle("t", "X") == "t_X" and mangle("d", "X") == "d_X" and mangle("n", "M") == "n_M"
    assert all(v.isascii() and v.isidentifier() and not v.startswith("pc_") for v in spelled.values())
    assert ascii_spelling("α_1") == "_3b1___1"      # α, then `_` doubled, then 1


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.sampled_from("tdnsi"), st.text(min_size=1, max_size=8), st.sampled_from("tdnsi"),
       st.text(min_size=1, max_size=8))
def test_mangling_never_collides(kind_a, a, kind_b, b):
    ma, mb = mangle(kind_a, a), mangle(kind_b, b)
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ma) and not ma.startswith(("pc_", "polyc_"))
    assert (ma == mb) == ((kind_a, a) == (kind_b, b))
