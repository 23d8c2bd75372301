"""Halide app pipelines, translated literally into polyc's Einstein notation or affine loops.

Source: github.com/halide/Halide, `apps/`.  A Halide `Func` definition `f(x, y) = e` becomes the
Einstein statement `f[x, y] = e` with Halide's argument order kept (x first, so arrays are indexed
`[x, y, c]`), line breaks kept where the author broke a statement, `1.0f` written `1.0`.  Helper
functions of the generator (`sum3x3`, `downsample`, `repeat_edge`) are expanded at their call
sites as C++ inlines them; Halide built-ins polyc lacks are written out (`lerp(a, b, w)` as
`a + (b - a) * w`, `clamp(v, lo, hi)` as `min(max(v, lo), hi)`, `mux(c, {...})` as a `select` chain,
variadic `max` as nested `max`).  Halide's `/` on integers is floor division: `//` here.  Update
definitions over an `RDom` become loops in Halide's default order (pure variables innermost).
A Halide output is defined wherever the pipeline's reads stay inside the input, so outputs are
compared on that region (`regions`), in the output's own coordinates.
"""
from __future__ import annotations

import numpy as np

import polyc as pc

from .spec import CorpusKernel, REFUSAL_MESSAGE, rand


def _harris(input):
    i = input.astype(np.float64)
    gray = 0.299 * i[:, :, 0] + 0.587 * i[:, :, 1] + 0.114 * i[:, :, 2]
    g = lambda dx, dy: gray[1 + dx:gray.shape[0] - 1 + dx, 1 + dy:gray.shape[1] - 1 + dy]  # noqa: E731
    Iy = (-g(-1, -1) + g(-1, 1) - 2 * g(0, -1) + 2 * g(0, 1) - g(1, -1) + g(1, 1)) / 12
    Ix = (-g(-1, -1) + g(1, -1) - 2 * g(-1, 0) + 2 * g(1, 0) - g(-1, 1) + g(1, 1)) / 12

    def sum3x3(f):
        X, Y = f.shape
        return sum(f[1 + dx:X - 1 + dx, 1 + dy:Y - 1 + dy] for dx in (-1, 0, 1) for dy in (-1, 0, 1))

    Sxx, Syy, Sxy = sum3x3(Ix * Ix), sum3x3(Iy * Iy), sum3x3(Ix * Iy)
    det = Sxx * Syy - Sxy * Sxy
    trace = Sxx + Syy
    return dict(output=(det - 0.04 * trace * trace).astype(np.float32))


def _unsharp(input, sigma):
    i = input.astype(np.float64)
    kernel = np.exp(-np.arange(4.0) ** 2 / (2 * sigma * sigma)) / (np.sqrt(2 * 3.14159265358979310000) * sigma)
    padded = np.pad(i, ((3, 3), (3, 3), (0, 0)), mode="edge")
    gray = 0.299 * padded[:, :, 0] + 0.587 * padded[:, :, 1] + 0.114 * padded[:, :, 2]
    W, H = input.shape[:2]
    blur_y = kernel[0] * gray[:, 3:H + 3] + sum(kernel[k] * (gray[:, 3 - k:H + 3 - k] + gray[:, 3 + k:H + 3 + k])
                                                  for k in (1, 2, 3))
    blur_x = kernel[0] * blur_y[3:W + 3] + sum(kernel[k] * (blur_y[3 - k:W + 3 - k] + blur_y[3 + k:W + 3 + k])
                                                 for k in (1, 2, 3))
    g = gray[3:W + 3, 3:H + 3]
    sharpen = 2 * g - blur_x
    ratio = sharpen / g
    return dict(output=(ratio[:, :, None] * i).astype(np.float32))


def _five_tap(a, axis):
    n = a.shape[axis]
    s = lambda lo: np.take(a, np.arange(lo, n - 4 + lo), axis=axis)  # noqa: E731
    return s(0) + s(1) * 4 + s(2) * 6 + s(3) * 4 + s(4)


def _bilateral_blur(histogram):
    h = histogram.astype(np.float64)
    blurz = _five_tap(h, 2)
    blurx = _five_tap(blurz, 0)
    blury = _five_tap(blurx, 1)
    return dict(blury=blury.astype(np.float32))


def _downsample(f):
    f = f.astype(np.float64)
    H = f.shape[1]
    ys = np.arange(1, (H - 3) // 2 + 1)
    downy = (f[:, 2 * ys - 1] + 3.0 * (f[:, 2 * ys] + f[:, 2 * ys + 1]) + f[:, 2 * ys + 2]) / 8.0  # y = 1 .. ; all x
    W = f.shape[0]
    xs = np.arange(1, (W - 3) // 2 + 1)
    downx = (downy[2 * xs - 1] + 3.0 * (downy[2 * xs] + downy[2 * xs + 1]) + downy[2 * xs + 2]) / 8.0
    return dict(downx=downx.astype(np.float32))


def _upsample(f):
    f = f.astype(np.float64)
    W, H = f.shape[:2]
    xs = np.arange(1, 2 * W - 2)
    wx = (((xs % 2) * 2 + 1) / 4.0)[:, None, None]
    upx = f[(xs + 1) // 2] + (f[(xs - 1) // 2] - f[(xs + 1) // 2]) * wx          # x = 1 .. 2W-3, all y
    ys = np.arange(1, 2 * H - 2)
    wy = (((ys % 2) * 2 + 1) / 4.0)[None, :, None]
    upy = upx[:, (ys + 1) // 2] + (upx[:, (ys - 1) // 2] - upx[:, (ys + 1) // 2]) * wy
    return dict(upy=upy.astype(np.float32))


def _hot_pixel(input):
    i = input.astype(np.int64)
    W, H = i.shape
    c = i[2:W - 2, 2:H - 2]
    a = np.maximum.reduce([i[0:W - 4, 2:H - 2], i[4:W, 2:H - 2], i[2:W - 2, 0:H - 4], i[2:W - 2, 4:H]])
    return dict(denoised=np.minimum(np.maximum(c, 0), a).astype(np.uint16))


def _conv_layer(input, filter, bias):
    CI, W2, H2, N = input.shape
    out = np.zeros((filter.shape[0], W2 - 2, H2 - 2, N)) + bias[:, None, None, None]
    for ry in range(3):
        for rz in range(3):
            out += np.einsum("cx,xwhn->cwhn", filter[:, ry, rz, :].astype(np.float64),
                             input[:, ry:ry + W2 - 2, rz:rz + H2 - 2, :].astype(np.float64))
    return dict(relu=np.maximum(0, out).astype(np.float32))


def iir_blur(input: pc.f32["W", "H", "C"], alpha: float, blur1: pc.f32["W", "H", "C"],
             blury_T: pc.f32["H", "W", "C"], blur2: pc.f32["H", "W", "C"], output: pc.f32["W", "H", "C"]):
    """apps/iir_blur: blur_cols_transpose(input, height), then again on its transpose; pure var x innermost."""
    # blur_cols_transpose(input, height, alpha)
    for c in range(C):
        for x in range(W):
            blur1[x, 0, c] = input[x, 0, c]
    for c in range(C):
        for ry in range(1, H):
            for x in range(W):
                blur1[x, ry, c] = (1 - alpha) * blur1[x, ry - 1, c] + alpha * input[x, ry, c]
    for c in range(C):
        for ry in range(1, H):
            for x in range(W):
                blur1[x, H - ry - 1, c] = (1 - alpha) * blur1[x, H - ry - 1 + 1, c] + alpha * blur1[x, H - ry - 1, c]
    for c in range(C):
        for y in range(W):
            for x in range(H):
                blury_T[x, y, c] = blur1[y, x, c]
    # blur_cols_transpose(blury_T, width, alpha)
    for c in range(C):
        for x in range(H):
            blur2[x, 0, c] = blury_T[x, 0, c]
    for c in range(C):
        for ry in range(1, W):
            for x in range(H):
                blur2[x, ry, c] = (1 - alpha) * blur2[x, ry - 1, c] + alpha * blury_T[x, ry, c]
    for c in range(C):
        for ry in range(1, W):
            for x in range(H):
                blur2[x, W - ry - 1, c] = (1 - alpha) * blur2[x, W - ry - 1 + 1, c] + alpha * blur2[x, W - ry - 1, c]
    for c in range(C):
        for y in range(H):
            for x in range(W):
                output[x, y, c] = blur2[y, x, c]


def _iir_cols(a, alpha):
    """Causal then anti-causal first-order IIR down axis 1, float32 arithmetic as the kernel does."""
    b = a.copy()
    one = np.float32(1) - alpha
    for r in range(1, a.shape[1]):
        b[:, r] = one * b[:, r - 1] + alpha * a[:, r]
    for r in range(1, a.shape[1]):
        f = a.shape[1] - r - 1
        b[:, f] = one * b[:, f + 1] + alpha * b[:, f]
    return b


def _iir_blur(input, alpha, blur1, blury_T, blur2, output):
    alpha = np.float32(alpha)
    b1 = _iir_cols(input, alpha)
    bt = np.ascontiguousarray(b1.transpose(1, 0, 2))
    b2 = _iir_cols(bt, alpha)
    return dict(blur1=b1, blury_T=bt, blur2=b2, output=np.ascontiguousarray(b2.transpose(1, 0, 2)))


#: Halide's uint16 buffers: declared `pc.u16[...]` once polyc has the type, shape-only until then.
U16 = getattr(pc, "u16", pc.tensor)

KERNELS = [
    # apps/harris/harris_generator.cpp (sum3x3 expanded)
    CorpusKernel(
        "halide_harris", "halide/Halide: apps/harris/harris_generator.cpp",
        "chained stencils with negative offsets, multi-line statements",
        """gray[x, y] = (0.299 * input[x, y, 0] +
              0.587 * input[x, y, 1] +
              0.114 * input[x, y, 2])
Iy[x, y] = gray[x - 1, y - 1] * (-1.0 / 12) + gray[x - 1, y + 1] * (1.0 / 12) +
           gray[x, y - 1] * (-2.0 / 12) + gray[x, y + 1] * (2.0 / 12) +
           gray[x + 1, y - 1] * (-1.0 / 12) + gray[x + 1, y + 1] * (1.0 / 12)
Ix[x, y] = gray[x - 1, y - 1] * (-1.0 / 12) + gray[x + 1, y - 1] * (1.0 / 12) +
           gray[x - 1, y] * (-2.0 / 12) + gray[x + 1, y] * (2.0 / 12) +
           gray[x - 1, y + 1] * (-1.0 / 12) + gray[x + 1, y + 1] * (1.0 / 12)
Ixx[x, y] = Ix[x, y] * Ix[x, y]
Iyy[x, y] = Iy[x, y] * Iy[x, y]
Ixy[x, y] = Ix[x, y] * Iy[x, y]
Sxx[x, y] = Ixx[x - 1, y - 1] + Ixx[x - 1, y] + Ixx[x - 1, y + 1] +
           Ixx[x, y - 1] + Ixx[x, y] + Ixx[x, y + 1] +
           Ixx[x + 1, y - 1] + Ixx[x + 1, y] + Ixx[x + 1, y + 1]
Syy[x, y] = Iyy[x - 1, y - 1] + Iyy[x - 1, y] + Iyy[x - 1, y + 1] +
           Iyy[x, y - 1] + Iyy[x, y] + Iyy[x, y + 1] +
           Iyy[x + 1, y - 1] + Iyy[x + 1, y] + Iyy[x + 1, y + 1]
Sxy[x, y] = Ixy[x - 1, y - 1] + Ixy[x - 1, y] + Ixy[x - 1, y + 1] +
           Ixy[x, y - 1] + Ixy[x, y] + Ixy[x, y + 1] +
           Ixy[x + 1, y - 1] + Ixy[x + 1, y] + Ixy[x + 1, y + 1]
det[x, y] = Sxx[x, y] * Syy[x, y] - Sxy[x, y] * Sxy[x, y]
trace[x, y] = Sxx[x, y] + Syy[x, y]
output[x, y] = det[x, y] - 0.04 * trace[x, y] * trace[x, y]""",
        lambda r: dict(input=rand(r, 11, 9, 3, lo=0, hi=1)),
        _harris, ("output",), regions=dict(output=(slice(2, 9), slice(2, 7)))),
    # apps/unsharp/unsharp_generator.cpp (repeat_edge expanded as a clamp of the coordinates)
    CorpusKernel(
        "halide_unsharp", "halide/Halide: apps/unsharp/unsharp_generator.cpp",
        "Gaussian taps from an index value, clamped (repeat_edge) reads, separable blur",
        """kernel[x] = exp(-x * x / (2 * sigma * sigma)) / (sqrt(2 * kPi) * sigma)
gray[x, y] = (0.299 * input[min(max(x, 0), W - 1), min(max(y, 0), H - 1), 0] +
              0.587 * input[min(max(x, 0), W - 1), min(max(y, 0), H - 1), 1] +
              0.114 * input[min(max(x, 0), W - 1), min(max(y, 0), H - 1), 2])
blur_y[x, y] = (kernel[0] * gray[x, y] +
                kernel[1] * (gray[x, y - 1] +
                             gray[x, y + 1]) +
                kernel[2] * (gray[x, y - 2] +
                             gray[x, y + 2]) +
                kernel[3] * (gray[x, y - 3] +
                             gray[x, y + 3]))
blur_x[x, y] = (kernel[0] * blur_y[x, y] +
                kernel[1] * (blur_y[x - 1, y] +
                             blur_y[x + 1, y]) +
                kernel[2] * (blur_y[x - 2, y] +
                             blur_y[x + 2, y]) +
                kernel[3] * (blur_y[x - 3, y] +
                             blur_y[x + 3, y]))
sharpen[x, y] = 2 * gray[x, y] - blur_x[x, y]
ratio[x, y] = sharpen[x, y] / gray[x, y]
output[x, y, c] = ratio[x, y] * input[x, y, c]""",
        lambda r: dict(input=rand(r, 10, 8, 3, lo=0.2, hi=1), sigma=np.float32(1.5), kPi=np.float32(3.14159265358979310000)),
        lambda input, sigma, kPi: _unsharp(input, sigma), ("output",),
        declared=dict(input=pc.f32["W", "H", 3], sigma=pc.f32, kPi=pc.f32)),
    # apps/blur/halide_blur_generator.cpp (uint16 input and output; integer / is floor division)
    CorpusKernel(
        "halide_blur", "halide/Halide: apps/blur/halide_blur_generator.cpp", "separable 3x3 box blur on uint16",
        """blur_x[x, y] = (input[x, y] + input[x + 1, y] + input[x + 2, y]) // 3
blur_y[x, y] = (blur_x[x, y] + blur_x[x, y + 1] + blur_x[x, y + 2]) // 3""",
        lambda r: dict(input=r.integers(0, 60000, size=(12, 10)).astype(np.uint16)),
        lambda input: dict(blur_y=_blur_u16(input).astype(np.uint16)),
        ("blur_y",), declared=dict(input=U16["W", "H"])),
    # apps/bilateral_grid/bilateral_grid_generator.cpp (the grid blur; the histogram is the input)
    CorpusKernel(
        "halide_bilateral_grid_blur", "halide/Halide: apps/bilateral_grid/bilateral_grid_generator.cpp",
        "three chained 5-tap stencils with negative offsets, multi-line statements",
        """blurz[x, y, z, c] = (histogram[x, y, z - 2, c] +
                     histogram[x, y, z - 1, c] * 4 +
                     histogram[x, y, z, c] * 6 +
                     histogram[x, y, z + 1, c] * 4 +
                     histogram[x, y, z + 2, c])
blurx[x, y, z, c] = (blurz[x - 2, y, z, c] +
                     blurz[x - 1, y, z, c] * 4 +
                     blurz[x, y, z, c] * 6 +
                     blurz[x + 1, y, z, c] * 4 +
                     blurz[x + 2, y, z, c])
blury[x, y, z, c] = (blurx[x, y - 2, z, c] +
                     blurx[x, y - 1, z, c] * 4 +
                     blurx[x, y, z, c] * 6 +
                     blurx[x, y + 1, z, c] * 4 +
                     blurx[x, y + 2, z, c])""",
        lambda r: dict(histogram=rand(r, 8, 9, 7, 2, lo=0, hi=1)),
        _bilateral_blur, ("blury",), regions=dict(blury=(slice(2, 6), slice(2, 7), slice(2, 5), slice(0, 2)))),
    # apps/local_laplacian/local_laplacian_generator.cpp (downsample; Halide's `_` is the third dimension c)
    CorpusKernel(
        "halide_local_laplacian_downsample", "halide/Halide: apps/local_laplacian/local_laplacian_generator.cpp",
        "stride-2 reads at offsets -1..2 through an intermediate",
        """downy[x, y, c] = (f[x, 2 * y - 1, c] + 3.0 * (f[x, 2 * y, c] + f[x, 2 * y + 1, c]) + f[x, 2 * y + 2, c]) / 8.0
downx[x, y, c] = (downy[2 * x - 1, y, c] + 3.0 * (downy[2 * x, y, c] + downy[2 * x + 1, y, c]) + downy[2 * x + 2, y, c]) / 8.0""",
        lambda r: dict(f=rand(r, 12, 12, 2)),
        _downsample, ("downx",), regions=dict(downx=(slice(1, 5), slice(1, 5), slice(0, 2)))),
    # apps/local_laplacian/local_laplacian_generator.cpp (upsample; lerp written out)
    CorpusKernel(
        "halide_local_laplacian_upsample", "halide/Halide: apps/local_laplacian/local_laplacian_generator.cpp",
        "bilinear upsampling: (x + 1) // 2 and x % 2 as a value",
        """upx[x, y, c] = f[(x + 1) // 2, y, c] + (f[(x - 1) // 2, y, c] - f[(x + 1) // 2, y, c]) * (((x % 2) * 2 + 1) / 4.0)
upy[x, y, c] = upx[x, (y + 1) // 2, c] + (upx[x, (y - 1) // 2, c] - upx[x, (y + 1) // 2, c]) * (((y % 2) * 2 + 1) / 4.0)""",
        lambda r: dict(f=rand(r, 5, 6, 2)),
        _upsample, ("upy",), regions=dict(upy=(slice(1, 8), slice(1, 10), slice(0, 2))),
        ),
    # apps/camera_pipe/camera_pipe_generator.cpp (hot_pixel_suppression on the uint16 raw input)
    CorpusKernel(
        "halide_hot_pixel_suppression", "halide/Halide: apps/camera_pipe/camera_pipe_generator.cpp",
        "clamp by the max of four neighbours at distance 2, uint16",
        "denoised[x, y] = min(max(input[x, y], 0), max(max(max(input[x - 2, y], input[x + 2, y]), input[x, y - 2]), input[x, y + 2]))",
        lambda r: dict(input=r.integers(0, 1024, size=(9, 8)).astype(np.uint16)),
        lambda input: _hot_pixel(input), ("denoised",), regions=dict(denoised=(slice(2, 7), slice(2, 6))),
        declared=dict(input=U16["W", "H"])),
    # apps/camera_pipe/camera_pipe_generator.cpp (deinterleave; mux over 4 channels as a select chain)
    CorpusKernel(
        "halide_deinterleave", "halide/Halide: apps/camera_pipe/camera_pipe_generator.cpp",
        "Bayer deinterleave: stride-2 reads chosen by channel",
        """deinterleaved[x, y, c] = select(c == 0, raw[2 * x, 2 * y],
                         select(c == 1, raw[2 * x + 1, 2 * y],
                         select(c == 2, raw[2 * x, 2 * y + 1],
                                        raw[2 * x + 1, 2 * y + 1]))) where c in 0:4""",
        lambda r: dict(raw=r.integers(0, 1024, size=(10, 8)).astype(np.uint16)),
        lambda raw: dict(deinterleaved=np.stack([raw[0::2, 0::2], raw[1::2, 0::2], raw[0::2, 1::2], raw[1::2, 1::2]],
                                                axis=2)), ("deinterleaved",),
        declared=dict(raw=U16["W", "H"])),
    # apps/camera_pipe/camera_pipe_generator.cpp (interleave_x of two uint16 planes)
    CorpusKernel(
        "halide_interleave_x", "halide/Halide: apps/camera_pipe/camera_pipe_generator.cpp",
        "interleave: select on x % 2, reads at x // 2",
        "out[x, y] = select((x % 2) == 0, a[x // 2, y], b[x // 2, y]) where x in 0:2*W, y in 0:H",
        lambda r: dict(a=r.integers(0, 1024, size=(5, 4)).astype(np.uint16),
                       b=r.integers(0, 1024, size=(5, 4)).astype(np.uint16)),
        lambda a, b: dict(out=np.stack([a, b], axis=1).reshape(10, 4)), ("out",),
        declared=dict(a=U16["W", "H"], b=U16["W", "H"])),
    # apps/conv_layer/conv_layer_generator.cpp (pure definition then an update over RDom r(0, CI, 0, 3, 0, 3))
    CorpusKernel(
        "halide_conv_layer", "halide/Halide: apps/conv_layer/conv_layer_generator.cpp",
        "bias initialisation then += update over a 3-d RDom, ReLU",
        """conv[c, x, y, n] = bias[c]
conv[c, x, y, n] += filter[c, r_y, r_z, r_x] * input[r_x, x + r_y, y + r_z, n] where r_x in 0:CI, r_y in 0:3, r_z in 0:3
relu[c, x, y, n] = max(0, conv[c, x, y, n])""",
        lambda r: dict(input=rand(r, 3, 7, 6, 2), filter=rand(r, 4, 3, 3, 3), bias=rand(r, 4)),
        _conv_layer, ("relu",),
        declared=dict(input=pc.f32["CI", "W + 2", "H + 2", "N"], filter=pc.f32["CO", 3, 3, "CI"], bias=pc.f32["CO"],
                      relu=pc.f32["CO", "W", "H", "N"])),
    # apps/iir_blur/iir_blur_generator.cpp (blur_cols_transpose twice, as loops)
    CorpusKernel(
        "halide_iir_blur", "halide/Halide: apps/iir_blur/iir_blur_generator.cpp",
        "first-order recursive filter down and up the columns, transposes (loops)",
        iir_blur,
        lambda r: dict(input=rand(r, 7, 6, 2), alpha=0.3, blur1=np.zeros((7, 6, 2), np.float32),
                       blury_T=np.zeros((6, 7, 2), np.float32), blur2=np.zeros((6, 7, 2), np.float32),
                       output=np.zeros((7, 6, 2), np.float32)),
        _iir_blur, ("blur1", "blury_T", "blur2", "output")),
]


def _blur_u16(input):
    # Halide computes in the pixel type: uint16 sums wrap before the division, as numpy's do.
    i = input.astype(np.uint16)
    blur_x = (i[:-2, :] + i[1:-1, :] + i[2:, :]) // 3
    return (blur_x[:, :-2] + blur_x[:, 1:-1] + blur_x[:, 2:]) // 3


REFUSED = [
    # apps/bilateral_grid/bilateral_grid_generator.cpp (the histogram: a scatter to a data-dependent z;
    # the GeneratorParam s_sigma substituted with its default 8, so s_sigma / 2 is 4)
    CorpusKernel(
        "halide_bilateral_grid_histogram", "halide/Halide: apps/bilateral_grid/bilateral_grid_generator.cpp",
        "scatter into the grid at a data-dependent z",
        """histogram[x, y, z, c] = 0.0
histogram[x, y, floor(input[x * 8 + r_x - 4, y * 8 + r_y - 4] * (1.0 / r_sigma) + 0.5), c] += select(c == 0, input[x * 8 + r_x - 4, y * 8 + r_y - 4], 1.0)""",
        lambda r: dict(), lambda: dict(), ("histogram",), refused=REFUSAL_MESSAGE),
    # apps/bilateral_grid/bilateral_grid_generator.cpp (slicing: trilinear reads at a data-dependent zi;
    # s_sigma = 8; only the first of the eight corner reads)
    CorpusKernel(
        "halide_bilateral_grid_slice", "halide/Halide: apps/bilateral_grid/bilateral_grid_generator.cpp",
        "grid lookup at a data-dependent z",
        "interpolated[x, y, c] = blury[x // 8, y // 8, floor(input[x, y] * (1.0 / r_sigma)), c]",
        lambda r: dict(), lambda: dict(), ("interpolated",), refused=REFUSAL_MESSAGE),
]
