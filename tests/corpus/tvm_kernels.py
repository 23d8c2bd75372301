"""TVM operator inventory (TOPI), translated literally into polyc's Einstein notation or loops.

Source: github.com/apache/tvm.  A `te.compute(shape, lambda i, j: e)` stage becomes the statement
`T[i, j] = e`, a `te.sum(e, axis=[r])` a `+=!` over `r`, `te.max` a `max=!`; stage names are TVM's.
TVM knows every shape when it builds a stage, so parameters that TOPI folds into constants
(strides, dilations, kernel sizes, groups, channel multipliers, static LSTM sizes) are constants
here, and a stage's shape becomes a `where` range with TVM's own extent formula
(`(H - KH) // 2 + 1`).  `indexdiv`/`indexmod` are `//`/`%`; `rsqrt(x)` is `1 / sqrt(x)`,
`sigmoid(x)` is `1 / (1 + exp(-x))`.  IR-builder and `te.scan` operators become affine loops.
Padding is 0 unless the kernel is about padding.
"""
from __future__ import annotations

import numpy as np

import polyc as pc

from .spec import CorpusKernel, REFUSAL_MESSAGE, rand

F = pc.f32


def _conv(x, w, stride=1, dil=1):
    """NCHW x OIHW valid cross-correlation with stride and dilation, float64 sums."""
    N, C, H, W = x.shape
    O, _, KH, KW = w.shape
    HO, WO = (H - (KH - 1) * dil - 1) // stride + 1, (W - (KW - 1) * dil - 1) // stride + 1
    out = np.zeros((N, O, HO, WO))
    for ry in range(KH):
        for rx in range(KW):
            patch = x[:, :, ry * dil:ry * dil + stride * (HO - 1) + 1:stride,
                      rx * dil:rx * dil + stride * (WO - 1) + 1:stride].astype(np.float64)
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, ry, rx].astype(np.float64))
    return out


def _pool(x, k, s, op):
    N, C, H, W = x.shape
    HO, WO = (H - k) // s + 1, (W - k) // s + 1
    win = np.stack([x[:, :, a:a + s * (HO - 1) + 1:s, b:b + s * (WO - 1) + 1:s] for a in range(k) for b in range(k)])
    return op(win.astype(np.float64), axis=0)


def _softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def cumsum(data_buf: pc.f32[20], out_buf: pc.f32[20]):
    """python/tvm/topi/scan.py scanop's IR for cumsum over axis 1 of a (4, 5) tensor, inclusive."""
    for fused in range(4 * 1):
        i = fused // 1
        j = fused % 1
        base_idx = i * 5 * 1 + j
        out_buf[base_idx] = data_buf[base_idx]
        for _k in range(0, 5 - 1):
            k = _k + 1
            cur_idx = base_idx + k * 1
            prev_idx = base_idx + (k - 1) * 1
            out_buf[cur_idx] = out_buf[prev_idx] + data_buf[cur_idx]


def lstm(Xs: pc.f32[3, 2, 4], Wi: pc.f32[12, 4], Wh: pc.f32[12, 3], Xi2h: pc.f32[6, 12],
         h_state: pc.f32[4, 2, 3], c_state: pc.f32[4, 2, 3], s_h2h: pc.f32[4, 2, 4, 3],
         gates: pc.f32[4, 2, 4, 3], i_gate: pc.f32[4, 2, 3], f_gate: pc.f32[4, 2, 3],
         g_gate: pc.f32[4, 2, 3], o_gate: pc.f32[4, 2, 3], next_c: pc.f32[4, 2, 3],
         next_h: pc.f32[4, 2, 3]):
    """python/tvm/topi/nn/lstm.py: seq_len 3, batch_size 2, in_dim 4, hidden_dim 3, layout IFGO,
    no biases, peepholes or projection; the te.scan over t = 1..seq_len as a loop."""
    for tb in range(3 * 2):
        for ij in range(4 * 3):
            Xi2h[tb, ij] = 0.0
            for ki in range(4):
                Xi2h[tb, ij] += Xs[tb // 2, tb % 2, ki] * Wi[ij, ki]
    for b in range(2):
        for i in range(3):
            h_state[0, b, i] = 0.0
            c_state[0, b, i] = 0.0
    for t in range(1, 3 + 1):
        for b in range(2):
            for i in range(4):
                for j in range(3):
                    s_h2h[t, b, i, j] = 0.0
                    for kh in range(3):
                        s_h2h[t, b, i, j] += h_state[t - 1, b, kh] * Wh[i * 3 + j, kh]
        for b in range(2):
            for i in range(4):
                for j in range(3):
                    gates[t, b, i, j] = Xi2h[(t - 1) * 2 + b, i * 3 + j] + s_h2h[t, b, i, j]
        for b in range(2):
            for j in range(3):
                i_gate[t, b, j] = 1 / (1 + np.exp(-gates[t, b, 0, j]))
                f_gate[t, b, j] = 1 / (1 + np.exp(-gates[t, b, 1, j]))
                g_gate[t, b, j] = np.tanh(gates[t, b, 2, j])
                next_c[t, b, j] = f_gate[t, b, j] * c_state[t - 1, b, j] + i_gate[t, b, j] * g_gate[t, b, j]
                o_gate[t, b, j] = 1 / (1 + np.exp(-gates[t, b, 3, j]))
                next_h[t, b, j] = o_gate[t, b, j] * np.tanh(next_c[t, b, j])
                h_state[t, b, j] = next_h[t, b, j]
                c_state[t, b, j] = next_c[t, b, j]


_LSTM_SHAPES = dict(Xi2h=(6, 12), h_state=(4, 2, 3), c_state=(4, 2, 3), s_h2h=(4, 2, 4, 3), gates=(4, 2, 4, 3),
                    i_gate=(4, 2, 3), f_gate=(4, 2, 3), g_gate=(4, 2, 3), o_gate=(4, 2, 3), next_c=(4, 2, 3),
                    next_h=(4, 2, 3))


def _lstm_ref(Xs, Wi, Wh, **outs):
    r = {k: np.zeros(v) for k, v in _LSTM_SHAPES.items()}
    r["Xi2h"] = Xs.reshape(6, 4).astype(np.float64) @ Wi.T
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    for t in range(1, 4):
        r["s_h2h"][t] = (r["h_state"][t - 1] @ Wh.T).reshape(2, 4, 3)
        r["gates"][t] = r["Xi2h"][(t - 1) * 2:(t - 1) * 2 + 2].reshape(2, 4, 3) + r["s_h2h"][t]
        r["i_gate"][t], r["f_gate"][t] = sig(r["gates"][t, :, 0]), sig(r["gates"][t, :, 1])
        r["g_gate"][t], r["o_gate"][t] = np.tanh(r["gates"][t, :, 2]), sig(r["gates"][t, :, 3])
        r["next_c"][t] = r["f_gate"][t] * r["c_state"][t - 1] + r["i_gate"][t] * r["g_gate"][t]
        r["next_h"][t] = r["o_gate"][t] * np.tanh(r["next_c"][t])
        r["h_state"][t], r["c_state"][t] = r["next_h"][t], r["next_c"][t]
    return {k: v.astype(np.float32) for k, v in r.items()}


KERNELS = [
    # include/tvm/topi/nn/pooling.h (pool_impl_nd, kMaxPool: kernel 3x3, stride 2, dilation 1, NCHW)
    CorpusKernel(
        "tvm_max_pool2d", "apache/tvm: include/tvm/topi/nn/pooling.h", "strided max pooling, output extent with //",
        """pool_max[n, c, oh, ow] max=! temp[n, c, oh * 2 + rv0 * 1, ow * 2 + rv1 * 1] where rv0 in 0:3, rv1 in 0:3, oh in 0:(H - (3 - 1) * 1 - 1) // 2 + 1, ow in 0:(W - (3 - 1) * 1 - 1) // 2 + 1""",
        lambda r: dict(temp=rand(r, 2, 3, 9, 8)),
        lambda temp: dict(pool_max=_pool(temp, 3, 2, np.max).astype(np.float32)), ("pool_max",),
        declared=dict(temp=F["N", "C", "H", "W"])),
    # include/tvm/topi/nn/pooling.h (pool_impl_nd, kAvgPool, count_include_pad: kernel 2x2, stride 2)
    CorpusKernel(
        "tvm_avg_pool2d", "apache/tvm: include/tvm/topi/nn/pooling.h", "strided window sum then divide by the window size",
        """pool_sum[n, c, oh, ow] +=! temp[n, c, oh * 2 + rv0 * 1, ow * 2 + rv1 * 1] where rv0 in 0:2, rv1 in 0:2, oh in 0:(H - (2 - 1) * 1 - 1) // 2 + 1, ow in 0:(W - (2 - 1) * 1 - 1) // 2 + 1
pool_avg[n, c, oh, ow] = pool_sum[n, c, oh, ow] / (2 * 2)""",
        lambda r: dict(temp=rand(r, 2, 3, 8, 7)),
        lambda temp: dict(pool_avg=_pool(temp, 2, 2, np.mean).astype(np.float32)), ("pool_avg",),
        declared=dict(temp=F["N", "C", "H", "W"])),
    # python/tvm/topi/nn/conv2d.py (conv(): groups 1, stride 1, dilation 2, NCHW; extent simplified by TVM)
    CorpusKernel(
        "tvm_conv2d_nchw_dilated", "apache/tvm: python/tvm/topi/nn/conv2d.py", "dilated convolution (dilation 2)",
        "conv2d_nchw[nn, ff, yy, xx] +=! pad_temp[nn, rc, yy * 1 + ry * 2, xx * 1 + rx * 2] * filt[ff, rc, ry, rx] "
        "where yy in 0:H - (KH - 1) * 2, xx in 0:W - (KW - 1) * 2",
        lambda r: dict(pad_temp=rand(r, 2, 3, 9, 8), filt=rand(r, 4, 3, 3, 2)),
        lambda pad_temp, filt: dict(conv2d_nchw=_conv(pad_temp, filt, 1, 2).astype(np.float32)), ("conv2d_nchw",),
        declared=dict(pad_temp=F["N", "C", "H", "W"], filt=F["F", "C", "KH", "KW"])),
    # python/tvm/topi/nn/conv2d.py (conv(): groups 2, num_filter 4, in_channel 6, stride 1, dilation 1)
    CorpusKernel(
        "tvm_group_conv2d_nchw", "apache/tvm: python/tvm/topi/nn/conv2d.py", "grouped convolution: ff // 2 * 3 + rc",
        "group_conv2d_nchw[nn, ff, yy, xx] +=! pad_temp[nn, ff // (4 // 2) * (6 // 2) + rc, yy * 1 + ry * 1, xx * 1 + rx * 1] "
        "* filt[ff, rc, ry, rx] where rc in 0:6 // 2",
        lambda r: dict(pad_temp=rand(r, 2, 6, 7, 6), filt=rand(r, 4, 3, 3, 2)),
        lambda pad_temp, filt: dict(group_conv2d_nchw=np.concatenate(
            [_conv(pad_temp[:, 3 * g:3 * g + 3], filt[2 * g:2 * g + 2]) for g in range(2)], axis=1).astype(np.float32)),
        ("group_conv2d_nchw",),
        declared=dict(pad_temp=F["N", 6, "H", "W"], filt=F[4, 3, "KH", "KW"])),
    # python/tvm/topi/nn/depthwise_conv2d.py (depthwise_conv2d_nchw: channel_multiplier 2, stride 1, dilation 1)
    CorpusKernel(
        "tvm_depthwise_conv2d_nchw", "apache/tvm: python/tvm/topi/nn/depthwise_conv2d.py",
        "depthwise convolution: c // multiplier, c % multiplier",
        "DepthwiseConv2d[b, c, i, j] +=! PaddedInput[b, c // 2, i * 1 + di * 1, j * 1 + dj * 1] "
        "* Filter[c // 2, c % 2, di, dj] where c in 0:IC * 2",
        lambda r: dict(PaddedInput=rand(r, 2, 3, 7, 6), Filter=rand(r, 3, 2, 3, 3)),
        lambda PaddedInput, Filter: dict(DepthwiseConv2d=np.concatenate(
            [_conv(PaddedInput[:, c:c + 1], Filter[c][:, None]) for c in range(3)], axis=1).astype(np.float32)),
        ("DepthwiseConv2d",),
        declared=dict(PaddedInput=F["B", "IC", "H", "W"], Filter=F["IC", 2, "KH", "KW"])),
    # python/tvm/topi/nn/upsampling.py (nearest_neighbor, scale 2, asymmetric coordinates: floor(h / 2))
    CorpusKernel(
        "tvm_upsampling_nearest", "apache/tvm: python/tvm/topi/nn/upsampling.py", "nearest upsampling: h // 2",
        "resize[n, c, h, w] = data[n, c, h // 2, w // 2] where h in 0:H * 2, w in 0:W * 2",
        lambda r: dict(data=rand(r, 2, 3, 4, 5)),
        lambda data: dict(resize=data.repeat(2, axis=2).repeat(2, axis=3)), ("resize",),
        declared=dict(data=F["N", "C", "H", "W"])),
    # include/tvm/topi/nn/dilate.h (strides (1, 2): zeros between columns)
    CorpusKernel(
        "tvm_dilate", "apache/tvm: include/tvm/topi/nn/dilate.h", "dilation: select on w % 2 == 0, read at w // 2",
        "DilatedInput[h, w] = select(w % 2 == 0, x[h, w // 2], 0.0) where w in 0:(W - 1) * 2 + 1",
        lambda r: dict(x=rand(r, 4, 5)),
        lambda x: dict(DilatedInput=_dilate_cols(x)), ("DilatedInput",),
        declared=dict(x=F["H", "W"])),
    # python/tvm/topi/nn/pad.py (pad: pad_before (0, 0, 1, 1), pad_after (0, 0, 1, 1), pad_value 0)
    CorpusKernel(
        "tvm_pad", "apache/tvm: python/tvm/topi/nn/pad.py", "padding: guarded read data[h - 1] under select",
        "PadInput[n, c, h, w] = select(h >= 1 and h < 1 + H and w >= 1 and w < 1 + W, data[n, c, h - 1, w - 1], 0.0) "
        "where h in 0:H + 2, w in 0:W + 2",
        lambda r: dict(data=rand(r, 2, 3, 4, 5)),
        lambda data: dict(PadInput=np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))), ("PadInput",),
        declared=dict(data=F["N", "C", "H", "W"])),
    # include/tvm/topi/transform.h (flip / reverse along axis 1)
    CorpusKernel(
        "tvm_flip", "apache/tvm: include/tvm/topi/transform.h", "reversed read x[i, W - j - 1]",
        "T_reverse[i, j] = x[i, W - j - 1]",
        lambda r: dict(x=rand(r, 4, 7)),
        lambda x: dict(T_reverse=x[:, ::-1].copy()), ("T_reverse",),
        declared=dict(x=F["H", "W"])),
    # python/tvm/topi/nn/dense.py (dense with bias: te.sum(data[i, k] * weight[j, k]), then + bias[j])
    CorpusKernel(
        "tvm_dense_bias", "apache/tvm: python/tvm/topi/nn/dense.py", "dense layer then bias add stage",
        """T_matmul_NT[i, j] +=! data[i, k] * weight[j, k]
T_add[i, j] = T_matmul_NT[i, j] + bias[j]""",
        lambda r: dict(data=rand(r, 5, 7), weight=rand(r, 6, 7), bias=rand(r, 6)),
        lambda data, weight, bias: dict(T_add=data @ weight.T + bias), ("T_add",),
        declared=dict(data=F["B", "K"], weight=F["N", "K"], bias=F["N"])),
    # python/tvm/topi/nn/softmax.py (softmax_common, axis -1, use_fast_exp False)
    CorpusKernel(
        "tvm_softmax", "apache/tvm: python/tvm/topi/nn/softmax.py", "softmax: max, exp, sum, normalise stages",
        """T_softmax_maxelem[i] max=! x[i, k1]
T_softmax_exp[i, j] = exp(x[i, j] - T_softmax_maxelem[i])
T_softmax_expsum[i] +=! T_softmax_exp[i, k2]
T_softmax_norm[i, j] = T_softmax_exp[i, j] / T_softmax_expsum[i]""",
        lambda r: dict(x=rand(r, 5, 8, lo=-4, hi=4)),
        lambda x: dict(T_softmax_norm=_softmax(x).astype(np.float32)), ("T_softmax_norm",),
        declared=dict(x=F["N", "K"])),
    # python/tvm/topi/nn/softmax.py (log_softmax, axis -1)
    CorpusKernel(
        "tvm_log_softmax", "apache/tvm: python/tvm/topi/nn/softmax.py", "log softmax",
        """T_softmax_maxelem[i] max=! x[i, k]
T_softmax_expsum[i] +=! exp(x[i, k] - T_softmax_maxelem[i])
T_log_softmax[i, j] = x[i, j] - T_softmax_maxelem[i] - log(T_softmax_expsum[i])""",
        lambda r: dict(x=rand(r, 5, 8, lo=-4, hi=4)),
        lambda x: dict(T_log_softmax=np.log(_softmax(x)).astype(np.float32)), ("T_log_softmax",),
        declared=dict(x=F["N", "K"])),
    # include/tvm/topi/nn/layer_norm.h (axis -1, with gamma and beta)
    CorpusKernel(
        "tvm_layer_norm", "apache/tvm: include/tvm/topi/nn/layer_norm.h", "layer norm: sum, mean, variance sum, normalise",
        """T_sum[b] +=! data[b, k]
T_mean[b] = T_sum[b] / K
T_var_sum[b] +=! (data[b, k] - T_mean[b]) * (data[b, k] - T_mean[b])
T_layer_norm[b, k] = (data[b, k] - T_mean[b]) * (1 / sqrt(T_var_sum[b] / K + epsilon)) * gamma[k] + beta[k]""",
        lambda r: dict(data=rand(r, 4, 9), gamma=rand(r, 9), beta=rand(r, 9), epsilon=np.float32(1e-5)),
        lambda data, gamma, beta, epsilon: dict(T_layer_norm=(
            (data - data.mean(axis=1, keepdims=True)) / np.sqrt(data.astype(np.float64).var(axis=1, keepdims=True)
                                                                + epsilon) * gamma + beta).astype(np.float32)),
        ("T_layer_norm",), declared=dict(data=F["B", "K"], gamma=F["K"], beta=F["K"], epsilon=pc.f32)),
    # python/tvm/topi/nn/batch_norm.py (training=True, axis 1: batch statistics and updated moving statistics)
    CorpusKernel(
        "tvm_batch_norm_training", "apache/tvm: python/tvm/topi/nn/batch_norm.py",
        "batch norm with batch statistics and moving-average outputs",
        """T_sum[c] +=! data[n, c, h, w]
data_mean[c] = T_sum[c] / (N * H * W)
T_var_sum[c] +=! (data[n, c, h, w] - data_mean[c]) * (data[n, c, h, w] - data_mean[c])
data_var[c] = T_var_sum[c] / (N * H * W)
out[n, c, h, w] = (data[n, c, h, w] - data_mean[c]) / sqrt(data_var[c] + epsilon) * gamma[c] + beta[c]
moving_mean_out[c] = (1 - momentum) * moving_mean[c] + momentum * data_mean[c]
moving_var_out[c] = (1 - momentum) * moving_var[c] + momentum * data_var[c]""",
        lambda r: dict(data=rand(r, 2, 3, 4, 5), gamma=rand(r, 3), beta=rand(r, 3), moving_mean=rand(r, 3),
                       moving_var=rand(r, 3, lo=0.5, hi=1.5), epsilon=np.float32(1e-5), momentum=np.float32(0.1)),
        lambda data, gamma, beta, moving_mean, moving_var, epsilon, momentum: _batch_norm(
            data, gamma, beta, moving_mean, moving_var, epsilon, momentum),
        ("out", "moving_mean_out", "moving_var_out"),
        declared=dict(data=F["N", "C", "H", "W"], gamma=F["C"], beta=F["C"], moving_mean=F["C"], moving_var=F["C"],
                      epsilon=pc.f32, momentum=pc.f32)),
    # python/tvm/topi/scan.py (cumsum: scanop's IR builder, axis 1 of a (4, 5) tensor, flat buffers)
    CorpusKernel(
        "tvm_cumsum", "apache/tvm: python/tvm/topi/scan.py", "scan over flat buffers with // and % of a fused loop",
        cumsum,
        lambda r: dict(data_buf=rand(r, 20), out_buf=np.zeros(20, np.float32)),
        lambda data_buf, out_buf: dict(out_buf=np.cumsum(data_buf.reshape(4, 5), axis=1, dtype=np.float64)
                                       .reshape(20).astype(np.float32)), ("out_buf",)),
    # python/tvm/topi/nn/lstm.py (te.scan LSTM, as loops)
    CorpusKernel(
        "tvm_lstm", "apache/tvm: python/tvm/topi/nn/lstm.py", "LSTM cell over a sequence: scan with gates",
        lstm,
        lambda r: dict(Xs=rand(r, 3, 2, 4), Wi=rand(r, 12, 4), Wh=rand(r, 12, 3),
                       **{k: np.zeros(v, np.float32) for k, v in _LSTM_SHAPES.items()}),
        _lstm_ref, tuple(_LSTM_SHAPES), ),
]


def _dilate_cols(x):
    out = np.zeros((x.shape[0], 2 * x.shape[1] - 1), np.float32)
    out[:, 0::2] = x
    return out


def _batch_norm(data, gamma, beta, moving_mean, moving_var, epsilon, momentum):
    d = data.astype(np.float64)
    mean = d.mean(axis=(0, 2, 3))
    var = ((d - mean[None, :, None, None]) ** 2).mean(axis=(0, 2, 3))
    out = (d - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + epsilon) * gamma[None, :, None, None] \
        + beta[None, :, None, None]
    return dict(out=out.astype(np.float32),
                moving_mean_out=((1 - momentum) * moving_mean + momentum * mean).astype(np.float32),
                moving_var_out=((1 - momentum) * moving_var + momentum * var).astype(np.float32))


REFUSED = [
    # include/tvm/topi/transform.h (take along axis 0: a gather through an index tensor)
    CorpusKernel(
        "tvm_take", "apache/tvm: include/tvm/topi/transform.h", "take (gather rows by index)",
        "T_take[i, j] = a[indices[i], j]",
        lambda r: dict(), lambda: dict(), ("T_take",),
        declared=dict(a=F["N", "M"], indices=pc.i32["K"]), refused=REFUSAL_MESSAGE),
    # include/tvm/topi/transform.h (gather_nd with a 2-row index tensor)
    CorpusKernel(
        "tvm_gather_nd", "apache/tvm: include/tvm/topi/transform.h", "gather_nd (2-d coordinates from data)",
        "T_gather_nd[k] = data[indices[0, k], indices[1, k]]",
        lambda r: dict(), lambda: dict(), ("T_gather_nd",),
        declared=dict(data=F["N", "M"], indices=pc.i32[2, "K"]), refused=REFUSAL_MESSAGE),
]

