"""Tensor Comprehensions kernels, translated literally into polyc's Einstein notation.

Source: github.com/facebookresearch/TensorComprehensions.  TC writes `O(b, n)`; polyc writes
`O[b, n]`; everything else (index names, statement order, in-place updates, line breaks, `where`
clauses) is kept as TC's author wrote it.  TC's signature types (`float(B,M) I`) become declared
types (`I=pc.f32["B", "M"]`), its output list `-> (O, mean)` becomes `outputs`.  Template
parameters that TC substitutes textually before parsing (`${sh}`, `<kH>`) are substituted here
with the value the TC test or benchmark uses.  Two TC built-ins polyc lacks are spelled with
polyc's functions: `rsqrt(x)` as `1 / sqrt(x)` (`fmax` is accepted as written).
"""
from __future__ import annotations

import numpy as np

import polyc as pc

from .spec import CorpusKernel, REFUSAL_MESSAGE, rand

F = pc.f32


def _conv_nchw(I, W, sh=1, sw=1):
    """Valid (unpadded) cross-correlation, NCHW x MCKhKw -> NMHoWo, strides sh, sw; float64 sums."""
    N, C, H, Wd = I.shape
    M, _, KH, KW = W.shape
    HO, WO = (H - KH) // sh + 1, (Wd - KW) // sw + 1
    out = np.zeros((N, M, HO, WO))
    for kh in range(KH):
        for kw in range(KW):
            patch = I[:, :, kh:kh + sh * (HO - 1) + 1:sh, kw:kw + sw * (WO - 1) + 1:sw].astype(np.float64)
            out += np.einsum("nchw,mc->nmhw", patch, W[:, :, kh, kw].astype(np.float64))
    return out


def _fc_relu(x, w, b):
    return np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + b, 0)


KERNELS = [
    # tc/library/matmul.h, makeMatmulTc() (no transposes)
    CorpusKernel(
        "tc_matmul", "facebookresearch/TensorComprehensions: tc/library/matmul.h", "contraction",
        "O[i, j] +=! A[i, k] * B[k, j]",
        lambda r: dict(A=rand(r, 7, 5), B=rand(r, 5, 6)),
        lambda A, B: dict(O=(A @ B)), ("O",),
        declared=dict(A=F["N", "K"], B=F["K", "M"])),
    # tc/library/matmul.h, makeMatmulTc(transposeFirst=true, transposeSecond=true)
    CorpusKernel(
        "tc_matmul_tt", "facebookresearch/TensorComprehensions: tc/library/matmul.h", "contraction, transposed operands",
        "O[i, j] +=! A[k, i] * B[j, k]",
        lambda r: dict(A=rand(r, 5, 7), B=rand(r, 6, 5)),
        lambda A, B: dict(O=A.T @ B.T), ("O",),
        declared=dict(A=F["K", "N"], B=F["M", "K"])),
    # tc/benchmarks/tmm.cc
    CorpusKernel(
        "tc_tmm", "facebookresearch/TensorComprehensions: tc/benchmarks/tmm.cc", "contraction with r_ index names",
        "C[m, n] +=! A[m, r_k] * B[n, r_k]",
        lambda r: dict(A=rand(r, 6, 9), B=rand(r, 4, 9)),
        lambda A, B: dict(C=A @ B.T), ("C",),
        declared=dict(A=F["M", "K"], B=F["N", "K"])),
    # tc/library/batch_matmul.h
    CorpusKernel(
        "tc_batch_matmul", "facebookresearch/TensorComprehensions: tc/library/batch_matmul.h", "batched contraction",
        "Z[b, n, k] +=! X[b, n, mm] * Y[b, mm, k]",
        lambda r: dict(X=rand(r, 3, 4, 5), Y=rand(r, 3, 5, 6)),
        lambda X, Y: dict(Z=np.einsum("bnm,bmk->bnk", X, Y)), ("Z",),
        declared=dict(X=F["B", "N", "M"], Y=F["B", "M", "K"])),
    # python/tests/test_tc.py (test_tensordot_autotune_pybind); also test/cuda/test_tc_mapper.cc
    CorpusKernel(
        "tc_tensordot", "facebookresearch/TensorComprehensions: python/tests/test_tc.py", "5-d contraction",
        "O[n, c1, c3, h, w] +=! I0[n, c1, c2, h, w] * I1[n, c2, c3, h, w]",
        lambda r: dict(I0=rand(r, 2, 3, 4, 3, 2), I1=rand(r, 2, 4, 5, 3, 2)),
        lambda I0, I1: dict(O=np.einsum("nabhw,nbchw->nachw", I0, I1)), ("O",),
        declared=dict(I0=F["N", "C1", "C2", "H", "W"], I1=F["N", "C2", "C3", "H", "W"]),
        slow=("auto",)),  # auto scheduling alone takes ~90 s (isl)
    # docs/source/framework/pytorch_integration/writing_layers.rst (built-in functions: fmax)
    CorpusKernel(
        "tc_relu", "facebookresearch/TensorComprehensions: docs/source/framework/pytorch_integration/writing_layers.rst",
        "pointwise, CUDA built-in fmax",
        "O[b, m] = fmax(I[b, m], 0)",
        lambda r: dict(I=rand(r, 5, 7)),
        lambda I: dict(O=np.maximum(I, 0)), ("O",),
        declared=dict(I=F["B", "M"])),
    # test/cuda/test_tc_mapper.cc (tensoraddstrided): `+=` without `!` accumulates into the O it is given
    CorpusKernel(
        "tc_tensoraddstrided", "facebookresearch/TensorComprehensions: test/cuda/test_tc_mapper.cc",
        "accumulate into an existing output (+= without !)",
        "O[n, m] += I0_view[n, m] + I1_view[n, m]",
        lambda r: dict(I0_view=rand(r, 5, 6), I1_view=rand(r, 5, 6), O=rand(r, 5, 6)),
        lambda I0_view, I1_view, O: dict(O=O + I0_view + I1_view), ("O",),
        declared=dict(I0_view=F["N", "M"], I1_view=F["N", "M"])),
    # test/cuda/test_corner_cases.cc (E6): a scalar broadcast over an explicit range
    CorpusKernel(
        "tc_scalar_fill", "facebookresearch/TensorComprehensions: test/cuda/test_corner_cases.cc",
        "output range from where alone, float scalar input",
        "b[i] = a where i in 0:10",
        lambda r: dict(a=np.float32(2.5)),
        lambda a: dict(b=np.full(10, a, np.float32)), ("b",),
        declared=dict(a=pc.f32)),
    # test/test_cuda_mapper_memory_promotion.cc (Strided.Stride2)
    CorpusKernel(
        "tc_strided_transpose", "facebookresearch/TensorComprehensions: test/test_cuda_mapper_memory_promotion.cc",
        "transposed stride-2 read at offset 1",
        "O[i, j] = I[j, 2 * i + 1]",
        lambda r: dict(I=rand(r, 4, 9)),
        lambda I: dict(O=I[:, 1::2].T.copy()), ("O",),
        declared=dict(I=F["N", "M"])),
    # python/examples/min_distance.py (min_2d)
    CorpusKernel(
        "tc_min_2d", "facebookresearch/TensorComprehensions: python/examples/min_distance.py", "row minimum (min=!)",
        "V[d] min=! S[d, r_nbyd]",
        lambda r: dict(S=rand(r, 4, 6)),
        lambda S: dict(V=S.min(axis=1)), ("V",),
        declared=dict(S=F["D", "NBYD"])),
    # python/examples/min_distance.py (min_1d): a 0-d output
    CorpusKernel(
        "tc_min_1d", "facebookresearch/TensorComprehensions: python/examples/min_distance.py", "scalar (0-d) output",
        "v min=! V[r_d]",
        lambda r: dict(V=rand(r, 7)),
        lambda V: dict(v=np.float32(V.min())), ("v",),
        declared=dict(V=F["D"])),
    # python/examples/min_distance.py (argmin_2d; TC's `c ? a : b` is select; polyc's index values are int64)
    CorpusKernel(
        "tc_argmin_2d", "facebookresearch/TensorComprehensions: python/examples/min_distance.py",
        "argmin as a min over index values and sizes, multi-line statement",
        """MinIdx[d] min=!
    select(S[d, r_nbyd] == v, d * NBYD + r_nbyd, NBYD * D)""",
        lambda r: dict(S=np.array([[3, 1, 2], [5, 4, 4]], np.float32), v=np.float32(4)),
        lambda S, v: dict(MinIdx=np.array([6, 4], np.int64)), ("MinIdx",),
        declared=dict(S=F["D", "NBYD"], v=pc.f32)),
    # python/examples/min_distance.py (argmin_1d): S is declared only to name the size N
    CorpusKernel(
        "tc_argmin_1d", "facebookresearch/TensorComprehensions: python/examples/min_distance.py",
        "min over index values, a size as a value, an input used only for its size",
        "min_idx min=! select(MinIdx[r_d] < N, r_d, N)",
        lambda r: dict(S=rand(r, 6), MinIdx=np.array([6, 6, 2, 6], np.int32)),
        lambda S, MinIdx: dict(min_idx=np.int64(2)), ("min_idx",),
        declared=dict(S=F["N"], MinIdx=pc.i32["D"])),
    # python/examples/masked_conv.py (TC's `c ? a : b` is select; line breaks as the author's)
    CorpusKernel(
        "tc_masked_convolve", "facebookresearch/TensorComprehensions: python/examples/masked_conv.py",
        "convolution masked by a uint8 tensor, ReLU on the input, multi-line statement",
        """Output[b, f, h, w] +=! select((Mask[f, r_c] == 1),
    fmax(0.0, Input[b, r_c, h + r_k1, w + r_k2]) *
    Weights[f, r_c, r_k1, r_k2],
    0.0)""",
        lambda r: dict(Input=rand(r, 2, 3, 6, 5), Weights=rand(r, 4, 3, 3, 3),
                       Mask=r.integers(0, 2, size=(4, 3)).astype(np.uint8)),
        lambda Input, Weights, Mask: dict(Output=_conv_nchw(np.maximum(Input, 0), Weights * (Mask == 1)[:, :, None, None])
                                          .astype(np.float32)), ("Output",),
        declared=dict(Input=F["B", "C", "H", "W"], Weights=F["F", "C", "K", "K"], Mask=getattr(pc, "u8", pc.tensor)["F", "C"])),
    # tc/library/fcrelu.h
    CorpusKernel(
        "tc_fcrelu", "facebookresearch/TensorComprehensions: tc/library/fcrelu.h",
        "reduction then in-place bias and fmax",
        """O1[b, n] +=! I[b, m] * W1[n, m]
O1[b, n] = O1[b, n] + B1[n]
O1[b, n] = fmax(O1[b, n], 0)""",
        lambda r: dict(I=rand(r, 4, 6), W1=rand(r, 5, 6), B1=rand(r, 5)),
        lambda I, W1, B1: dict(O1=_fc_relu(I, W1, B1).astype(np.float32)), ("O1",),
        declared=dict(I=F["B", "M"], W1=F["N", "M"], B1=F["N"])),
    # tc/library/2fcrelu.h
    CorpusKernel(
        "tc_2fcrelu", "facebookresearch/TensorComprehensions: tc/library/2fcrelu.h",
        "two chained fc+relu layers, in-place updates",
        """O1[b, n] +=! I[b, m] * W1[n, m]
O1[b, n] = O1[b, n] + B1[n]
O1[b, n] = fmax(O1[b, n], 0)
O2[b, o] +=! O1[b, n] * W2[o, n]
O2[b, o] = O2[b, o] + B2[o]
O2[b, o] = fmax(O2[b, o], 0)""",
        lambda r: dict(I=rand(r, 4, 6), W1=rand(r, 5, 6), B1=rand(r, 5), W2=rand(r, 3, 5), B2=rand(r, 3)),
        lambda I, W1, B1, W2, B2: dict(
            O1=_fc_relu(I, W1, B1).astype(np.float32),
            O2=_fc_relu(_fc_relu(I, W1, B1), W2, B2).astype(np.float32)), ("O1", "O2"),
        declared=dict(I=F["B", "M"], W1=F["N", "M"], B1=F["N"], W2=F["O", "N"], B2=F["O"]), slow=("auto",)),
    # tc/library/3fcrelu.h
    CorpusKernel(
        "tc_3fcrelu", "facebookresearch/TensorComprehensions: tc/library/3fcrelu.h",
        "three chained fc+relu layers, in-place updates",
        """O1[b, n] +=! I[b, m] * W1[n, m]
O1[b, n] = O1[b, n] + B1[n]
O1[b, n] = fmax(O1[b, n], 0)
O2[b, o] +=! O1[b, n] * W2[o, n]
O2[b, o] = O2[b, o] + B2[o]
O2[b, o] = fmax(O2[b, o], 0)
O3[b, p] +=! O2[b, o] * W3[p, o]
O3[b, p] = O3[b, p] + B3[p]
O3[b, p] = fmax(O3[b, p], 0)""",
        lambda r: dict(I=rand(r, 4, 6), W1=rand(r, 5, 6), B1=rand(r, 5), W2=rand(r, 3, 5), B2=rand(r, 3),
                       W3=rand(r, 2, 3), B3=rand(r, 2)),
        lambda I, W1, B1, W2, B2, W3, B3: dict(
            O1=_fc_relu(I, W1, B1).astype(np.float32),
            O2=_fc_relu(_fc_relu(I, W1, B1), W2, B2).astype(np.float32),
            O3=_fc_relu(_fc_relu(_fc_relu(I, W1, B1), W2, B2), W3, B3).astype(np.float32)),
        ("O1", "O2", "O3"),
        declared=dict(I=F["B", "M"], W1=F["N", "M"], B1=F["N"], W2=F["O", "N"], B2=F["O"], W3=F["P", "O"],
                      B3=F["P"]), slow=("auto",)),  # auto: ~12 s scheduling + ~17 s gcc
    # docs/source/introduction.rst ("Simple 2D convolution (no stride, no padding)")
    CorpusKernel(
        "tc_conv", "facebookresearch/TensorComprehensions: docs/source/introduction.rst", "2-d convolution, r_ reductions",
        "output[b, op, h, w] +=! input[b, r_ip, h + r_kh, w + r_kw] * weight[op, r_ip, r_kh, r_kw]",
        lambda r: dict(input=rand(r, 2, 3, 7, 6), weight=rand(r, 4, 3, 3, 2)),
        lambda input, weight: dict(output=_conv_nchw(input, weight).astype(np.float32)), ("output",),
        declared=dict(input=F["B", "IP", "H", "W"], weight=F["OP", "IP", "KH", "KW"])),
    # python/tests/test_tc.py (test_conv_with_backward_2kernels, forward TC)
    CorpusKernel(
        "tc_convolution_bias", "facebookresearch/TensorComprehensions: python/tests/test_tc.py",
        "convolution, multi-line statement, in-place bias",
        """O[n, m, h, w] +=!
    I[n, r_c, h + r_kh, w + r_kw] * W1[m, r_c, r_kh, r_kw]
O[n, m, h, w]  = O[n, m, h, w] + Bias[m]""",
        lambda r: dict(I=rand(r, 2, 3, 6, 7), W1=rand(r, 4, 3, 3, 3), Bias=rand(r, 4)),
        lambda I, W1, Bias: dict(O=(_conv_nchw(I, W1) + Bias[None, :, None, None]).astype(np.float32)), ("O",),
        declared=dict(I=F["N", "C", "H", "W"], W1=F["M", "C", "KH", "KW"], Bias=F["M"])),
    # tc/library/convolution.h, makeConvolution2DTc(2, 2)
    CorpusKernel(
        "tc_convolution_strided", "facebookresearch/TensorComprehensions: tc/library/convolution.h",
        "stride-2 convolution, in-place bias",
        """O[n, m, h, w] +=! I[n, c, 2 * h + kh, 2 * w + kw] * W1[m, c, kh, kw]
O[n, m, h, w] = O[n, m, h, w] + B[m]""",
        lambda r: dict(I=rand(r, 2, 3, 9, 8), W1=rand(r, 4, 3, 3, 2), B=rand(r, 4)),
        lambda I, W1, B: dict(O=(_conv_nchw(I, W1, 2, 2) + B[None, :, None, None]).astype(np.float32)), ("O",),
        declared=dict(I=F["N", "C", "H", "W"], W1=F["M", "C", "KH", "KW"], B=F["M"])),
    # tc/library/group_convolution.h, makeGroupConvolution2DTc(1, 1)
    CorpusKernel(
        "tc_group_convolution", "facebookresearch/TensorComprehensions: tc/library/group_convolution.h",
        "grouped convolution, multi-line statement, in-place bias",
        """O[n, g, f, h, w] +=!
  I[n, g, c, 1 * h + kh, 1 * w + kw] * W1[g, f, c, kh, kw]
O[n, g, f, h, w] = O[n, g, f, h, w] + B[g, f]""",
        lambda r: dict(I=rand(r, 2, 2, 3, 6, 5), W1=rand(r, 2, 4, 3, 3, 2), B=rand(r, 2, 4)),
        lambda I, W1, B: dict(O=(np.stack([_conv_nchw(I[:, g], W1[g]) for g in range(I.shape[1])], axis=1)
                                 + B[None, :, :, None, None]).astype(np.float32)), ("O",),
        declared=dict(I=F["N", "G", "C", "H", "W"], W1=F["G", "F", "C", "KH", "KW"], B=F["G", "F"])),
    # test/cuda/test_compile_and_run.cc (Concat): a degenerate +=! with no reduction index
    CorpusKernel(
        "tc_concat", "facebookresearch/TensorComprehensions: test/cuda/test_compile_and_run.cc",
        "convolution into a named temporary, degenerate +=!",
        """tmp[n, o, h, w] +=!   I[n, r_c, h + r_kh, w + r_kw] * W1[o, r_c, r_kh, r_kw]
# this can be equivalently written with =,
# but this line tests that we correctly handle
# degenerate +=! that have no reduction dimensions
 O1[n, o, h, w] +=! tmp[n, o, h, w] + B[o]""",
        lambda r: dict(I=rand(r, 2, 3, 6, 5), W1=rand(r, 4, 3, 2, 3), B=rand(r, 4)),
        lambda I, W1, B: dict(tmp=_conv_nchw(I, W1).astype(np.float32),
                              O1=(_conv_nchw(I, W1) + B[None, :, None, None]).astype(np.float32)),
        ("tmp", "O1"),
        declared=dict(I=F["N", "C", "H", "W"], W1=F["O", "C", "KH", "KW"], B=F["O"])),
    # python/tests/test_tc.py (test_avgpool with sH = sW = 1, kH = kW = 2 substituted)
    CorpusKernel(
        "tc_avgpool", "facebookresearch/TensorComprehensions: python/tests/test_tc.py",
        "average pooling, multi-line statement with where on its own line",
        """output[b, c, h, w] +=!
    input[b, c, h * 1 + kh, w * 1 + kw] / (2 * 2)
    where kh in 0:2, kw in 0:2""",
        lambda r: dict(input=rand(r, 2, 3, 6, 5)),
        lambda input: dict(output=(_conv_nchw(input.reshape(-1, 1, *input.shape[2:]),
                                              np.full((1, 1, 2, 2), 0.25)).reshape(2, 3, 5, 4)).astype(np.float32)),
        ("output",), declared=dict(input=F["B", "C", "H", "W"])),
    # docs/source/introduction.rst ("Simple 2D max pooling"; the doc's `r_kh in 0..2` is its typo for 0:2)
    CorpusKernel(
        "tc_maxpool2x2", "facebookresearch/TensorComprehensions: docs/source/introduction.rst",
        "stride-2 max pooling, where on a continuation line",
        """output[b,c,h,w] max=! input[b,c,2*h + r_kw, 2*w + r_kh]
    where r_kw in 0:2, r_kh in 0:2""",
        lambda r: dict(input=rand(r, 2, 3, 6, 8)),
        lambda input: dict(output=input.reshape(2, 3, 3, 2, 4, 2).max(axis=(3, 5))), ("output",),
        declared=dict(input=F["B", "C", "H", "W"])),
    # docs/source/inference.rst ("Strided indexing with offsets")
    CorpusKernel(
        "tc_average_pool_2", "facebookresearch/TensorComprehensions: docs/source/inference.rst",
        "strided reads, range I/2 inferred",
        "A[i] = B[2*i] + B[2*i + 1]",
        lambda r: dict(B=rand(r, 11)),
        lambda B: dict(A=B[0:10:2] + B[1:11:2]), ("A",),
        declared=dict(B=F["I"])),
    # docs/source/inference.rst ("Strided indexing with constant stride")
    CorpusKernel(
        "tc_subsample_2", "facebookresearch/TensorComprehensions: docs/source/inference.rst",
        "strided read, range (I+1)/2 inferred",
        "A[i] = B[2*i]",
        lambda r: dict(B=rand(r, 11)),
        lambda B: dict(A=B[0::2].copy()), ("A",),
        declared=dict(B=F["I"])),
    # test/test_cuda_mapper.cc (ModulusConstantRHS)
    CorpusKernel(
        "tc_modulus_constant", "facebookresearch/TensorComprehensions: test/test_cuda_mapper.cc",
        "modulo by a constant in a subscript",
        "b[i] = a[i % 3] where i in 0:N",
        lambda r: dict(a=rand(r, 8)),
        lambda a: dict(b=a[np.arange(8) % 3]), ("b",),
        declared=dict(a=F["N"])),
    # python/tests/test_tc.py (test_moments): two reductions, in-place finalisation, a comment
    CorpusKernel(
        "tc_moments", "facebookresearch/TensorComprehensions: python/tests/test_tc.py",
        "mean and variance, in-place updates, size as a value",
        """# var = E(x^2) - mean^2.
mean[n] +=! I[n, r_k]
 var[n] +=! I[n, r_k] * I[n, r_k]
mean[n]  = mean[n] / (K)
 var[n]  =  var[n] / (K) - mean[n] * mean[n]""",
        lambda r: dict(I=rand(r, 5, 9)),
        lambda I: dict(mean=I.mean(axis=1), var=((I.astype(np.float64) ** 2).mean(axis=1)
                       - I.astype(np.float64).mean(axis=1) ** 2).astype(np.float32)),   # TC: float in, float out
        ("mean", "var"), declared=dict(I=F["N", "K"])),
    # test/cuda/test_compile_and_run.cc (SoftmaxC); docs FAQ "Can I re-use a temporary variable?"
    CorpusKernel(
        "tc_softmax_c", "facebookresearch/TensorComprehensions: test/cuda/test_compile_and_run.cc",
        "softmax, max then sum, temporaries as outputs",
        """maxVal[n] max=!     I[n, d]
expsum[n]   +=! exp(I[n, d] - maxVal[n])
     O[n, d] =  exp(I[n, d] - maxVal[n]) / expsum[n]""",
        lambda r: dict(I=rand(r, 6, 7, lo=-3, hi=3)),
        lambda I: dict(maxVal=I.max(axis=1), expsum=np.exp(I - I.max(axis=1, keepdims=True)).sum(axis=1),
                       O=np.exp(I - I.max(axis=1, keepdims=True))
                       / np.exp(I - I.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True)),
        ("O", "expsum", "maxVal"), declared=dict(I=F["N", "D"])),
    # test/cuda/test_compile_and_run.cc (SoftmaxD); docs/source/framework/pytorch_integration/frequently_asked_questions.rst
    CorpusKernel(
        "tc_softmax_d", "facebookresearch/TensorComprehensions: test/cuda/test_compile_and_run.cc",
        "softmax in four statements, every temporary an output",
        """     maxVal[n] max=!     I[n, d]
expDistance[n, d] =  exp(I[n, d] - maxVal[n])
     expSum[n]   +=! expDistance[n, d]
          O[n, d] =  expDistance[n, d] / expSum[n]""",
        lambda r: dict(I=rand(r, 6, 7, lo=-3, hi=3)),
        lambda I: dict(maxVal=I.max(axis=1), expDistance=np.exp(I - I.max(axis=1, keepdims=True)),
                       expSum=np.exp(I - I.max(axis=1, keepdims=True)).sum(axis=1),
                       O=np.exp(I - I.max(axis=1, keepdims=True))
                       / np.exp(I - I.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True)),
        ("O", "maxVal", "expDistance", "expSum"), declared=dict(I=F["N", "D"])),
    # docs/source/ml_with_tc.rst (softmax without the max shift)
    CorpusKernel(
        "tc_softmax_ml", "facebookresearch/TensorComprehensions: docs/source/ml_with_tc.rst",
        "softmax, sum of exp as an output",
        """expsum[n] +=! exp(I[n, d])
   O[n, d] =  exp(I[n, d]) / expsum[n]""",
        lambda r: dict(I=rand(r, 6, 7)),
        lambda I: dict(expsum=np.exp(I).sum(axis=1), O=np.exp(I) / np.exp(I).sum(axis=1, keepdims=True)),
        ("O", "expsum"), declared=dict(I=F["N", "D"])),
    # test/cuda/test_autotuner.cc (layernorm; TC divides by rsqrt, kept as written)
    CorpusKernel(
        "tc_layernorm", "facebookresearch/TensorComprehensions: test/cuda/test_autotuner.cc",
        "layer norm, size as a value, in-place variance, blank line",
        """    mean[t, b]    +=! I[t, b, c] / C
centered[t, b, c]  = I[t, b, c] - mean[t, b]

var[t, b]   +=! centered[t, b, c] * centered[t, b, c]
var[t, b]    =       var[t, b] / C
  O[t, b, c] =  centered[t, b, c] / (1 / sqrt(var[t, b]))""",
        lambda r: dict(I=rand(r, 3, 4, 8)),
        lambda I: dict(mean=I.mean(axis=2), centered=I - I.mean(axis=2, keepdims=True),
                       var=((I - I.mean(axis=2, keepdims=True)) ** 2).mean(axis=2),
                       O=(I - I.mean(axis=2, keepdims=True))
                       * np.sqrt(((I - I.mean(axis=2, keepdims=True)) ** 2).mean(axis=2, keepdims=True))),
        ("O", "mean", "centered", "var"), declared=dict(I=F["T", "B", "C"])),
    # tc/library/batchnorm.h (spatialBatchNorm, running statistics as outputs)
    CorpusKernel(
        "tc_batchnorm", "facebookresearch/TensorComprehensions: tc/library/batchnorm.h",
        "batch norm with running statistics, float scalars, multi-line statement",
        """mean[c] +=! I[nn, c, hh, ww]
mean[c]  = mean[c] / (N * H * W)
rMeanOut[c] = (1 - momentum) * rMeanIn[c] + momentum * mean[c]
centered[n, c, h, w] = I[n, c, h, w] - rMeanOut[c]
variance[n, c, h, w] = centered[n, c, h, w] * centered[n, c, h, w]
expectedVariance[c] +=! (variance[n, c, h, w] + eps) / (N * H * W)
rVarOut[c] = 1 / sqrt(
  (1 - momentum) * rVarIn[c] + momentum * expectedVariance[c])
O[n, c, h, w] = centered[n, c, h, w] * rVarOut[c]
normalizedOut[n, c, h, w] = O[n, c, h, w]""",
        lambda r: dict(I=rand(r, 2, 3, 4, 5), rMeanIn=rand(r, 3), rVarIn=rand(r, 3, lo=0.5, hi=1.5),
                       momentum=np.float32(0.1), eps=np.float32(1e-5)),
        lambda I, rMeanIn, rVarIn, momentum, eps: _batchnorm(I, rMeanIn, rVarIn, momentum, eps),
        ("O", "rMeanOut", "rVarOut", "mean", "centered", "variance", "expectedVariance", "normalizedOut"),
        declared=dict(I=F["N", "C", "H", "W"], rMeanIn=F["C"], rVarIn=F["C"], momentum=pc.f32, eps=pc.f32)),
]


def _batchnorm(I, rMeanIn, rVarIn, momentum, eps):
    """TC's spatialBatchNorm as written (it centres with the *running* mean)."""
    I64 = I.astype(np.float64)
    count = I.shape[0] * I.shape[2] * I.shape[3]
    mean = I64.sum(axis=(0, 2, 3)) / count
    rMeanOut = (1 - momentum) * rMeanIn + momentum * mean
    centered = I64 - rMeanOut[None, :, None, None]
    variance = centered * centered
    expectedVariance = ((variance + eps) / count).sum(axis=(0, 2, 3))
    rVarOut = 1 / np.sqrt((1 - momentum) * rVarIn + momentum * expectedVariance)
    O = centered * rVarOut[None, :, None, None]
    out = dict(O=O, rMeanOut=rMeanOut, rVarOut=rVarOut, mean=mean, centered=centered, variance=variance,
               expectedVariance=expectedVariance, normalizedOut=O)
    return {k: v.astype(np.float32) for k, v in out.items()}


#: Truly non-affine TC kernels (indices read from data): polyc must refuse them, saying why.
REFUSED = [
    # tc/library/lut.h
    CorpusKernel(
        "tc_lut", "facebookresearch/TensorComprehensions: tc/library/lut.h", "gather through an int32 index tensor",
        "O[i, j] +=! LUT[I[i, k], j]",
        lambda r: dict(LUT=rand(r, 5, 3), I=r.integers(0, 5, size=(4, 2)).astype(np.int32)),
        lambda LUT, I: dict(O=LUT[I].sum(axis=1)), ("O",),
        declared=dict(LUT=F["E", "D"], I=pc.i32["B", "L"]), refused=REFUSAL_MESSAGE),
    # tc/library/2lut.h
    CorpusKernel(
        "tc_2lut", "facebookresearch/TensorComprehensions: tc/library/2lut.h", "two gathers",
        """O1[i, j] +=! LUT1[I1[i, k], j]
O2[i, j] +=! LUT2[I2[i, k], j]""",
        lambda r: dict(), lambda: dict(), ("O1", "O2"),
        declared=dict(LUT1=F["E1", "D"], I1=pc.i32["B", "L1"], LUT2=F["E2", "D"], I2=pc.i32["B", "L2"]),
        refused=REFUSAL_MESSAGE),
    # test/test_cuda_mapper.cc (NonAffineBoundLHSInBinOp)
    CorpusKernel(
        "tc_shifted_lut", "facebookresearch/TensorComprehensions: test/test_cuda_mapper.cc",
        "gather at a data-dependent index plus a constant",
        "O[i, j] +=! LUT[I[i, k] + 1, j]",
        lambda r: dict(), lambda: dict(), ("O",),
        declared=dict(LUT=F["E", "D"], I=pc.i32["B", "L"]), refused=REFUSAL_MESSAGE),
    # test/test_cuda_mapper.cc (NonAffineBoundRHSInBinOp)
    CorpusKernel(
        "tc_shifted_lut_mixed", "facebookresearch/TensorComprehensions: test/test_cuda_mapper.cc",
        "subscript with affine and data-dependent parts",
        "O[i, j] +=! LUT[1 + j + I[i, k], j]",
        lambda r: dict(), lambda: dict(), ("O",),
        declared=dict(LUT=F["E", "D"], I=pc.i32["B", "L"]), refused=REFUSAL_MESSAGE),
    # python/examples/min_distance.py (mindis): lookups at int32(Codes(n, r_m))
    CorpusKernel(
        "tc_mindis", "facebookresearch/TensorComprehensions: python/examples/min_distance.py",
        "product-quantisation distances through uint8 codes, then min and argmin",
        """S[n] +=! L[r_m, int32(Codes[n, r_m])]
v  min=! S[r_n]
min_idx  min=! select(S[r_n] == v, r_n, N)""",
        lambda r: dict(), lambda: dict(), ("S", "v", "min_idx"),
        declared=dict(L=F["M", 256]), refused=REFUSAL_MESSAGE),
    # docs/source/inference.rst ("lut" made safe by clamping the data-dependent index)
    CorpusKernel(
        "tc_lut_clamped", "facebookresearch/TensorComprehensions: docs/source/inference.rst",
        "gather with a clamped data-dependent index",
        "A[i] = B[max(min(C[i], J-1), 0)]",
        lambda r: dict(), lambda: dict(), ("A",),
        declared=dict(B=F["J"], C=F["I"]), refused=REFUSAL_MESSAGE),
]

