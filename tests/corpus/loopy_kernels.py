"""loopy kernels from its tests and docs, translated literally into polyc's Einstein notation.

Source: github.com/inducer/loopy.  A loopy kernel is an isl domain plus instructions; the domain
becomes `where` ranges (`{[i,j]: 0<=i<n and 0<=j<=i}` -> `where i in 0:N, j in 0:i+1`), loopy's
`sum(j, e)` becomes `+=!` over `j`, `x**2` becomes `pow(x, 2)`, `if(c, a, b)` becomes
`select(c, a, b)` and `rsqrt(x)` becomes `1 / sqrt(x)`.  A substitution rule (`f(ii) := ...`) is
expanded at its uses as loopy does.  `<>` temporaries are not outputs.  Arrays whose dtype and
shape loopy is given (`lp.GlobalArg(..., shape=...)`, `add_and_infer_dtypes`) are declared.
"""
from __future__ import annotations

import numpy as np

import polyc as pc

from .spec import CorpusKernel, REFUSAL_MESSAGE, rand

def uniform_l(a: pc.f32["A"], n: int, m: int):
    """test/test_loopy.py (test_unknown_arg_shape): {[i,j]: 0<=i<n and 0<=j<m}, sequential; loopy's
    int32 `i/256` (i >= 0) is written `//`."""
    for i in range(n):
        gid = i // 256
        start = gid * 256
        for j in range(m):
            a[start + j] = a[start + j] + j


def _uniform_l(a, n, m):
    out = a.copy()
    for g in range(n // 256):
        out[g * 256:g * 256 + m] += np.float32(256) * np.arange(m, dtype=np.float32)
    return dict(a=out)


KERNELS = [
    # test/test_scan.py (test_sequential_scan, stride=2): domain {[i,j]: 0<=i<n and 0<=j<=2*i}
    CorpusKernel(
        "loopy_sequential_scan", "inducer/loopy: test/test_scan.py", "index used only as a value, triangular range",
        "a[i] +=! pow(j, 2) where i in 0:N, j in 0:2*i+1",
        lambda r: dict(a=np.zeros(7, np.int64)),
        lambda a: dict(a=np.array([sum(j * j for j in range(2 * i + 1)) for i in range(7)], np.int64)), ("a",)),
    # test/test_scan.py (test_local_parallel_scan): [n] -> {[i,j]: 0<=i<n and 0<=j<=i}, out[i] = sum(j, a[j]**2)
    CorpusKernel(
        "loopy_scan_triangular", "inducer/loopy: test/test_scan.py", "prefix sum of squares over a triangular range",
        "out[i] +=! pow(a[j], 2) where i in 0:N, j in 0:i+1",
        lambda r: dict(a=np.arange(9, dtype=np.int64)),
        lambda a: dict(out=np.cumsum(a ** 2)), ("out",),
        ),
    # test/test_scan.py (test_local_parallel_scan_with_nonzero_lower_bounds)
    CorpusKernel(
        "loopy_scan_nonzero_lower", "inducer/loopy: test/test_scan.py", "scan with shifted output subscript i-1",
        "out[i-1] +=! pow(a[j], 2) where i in 1:N+1, j in 0:i",
        lambda r: dict(a=np.arange(1, 17, dtype=np.int64)),
        lambda a: dict(out=np.cumsum(a ** 2)), ("out",),
        ),
    # test/test_scan.py (test_nested_scan, n fixed to 10): <>tmp[i] = sum(k, 1); out[i] = sum(j, tmp[j])
    CorpusKernel(
        "loopy_scan_of_scan", "inducer/loopy: test/test_scan.py", "reduction index used in no subscript, scan of a temporary",
        """tmp[i] +=! 1 where i in 0:N, k in 0:i+1
out[i] +=! tmp[j] where i in 0:N, j in 0:i+1""",
        lambda r: dict(out=np.zeros(10, np.int64)),
        lambda out: dict(out=np.cumsum(np.arange(1, 11)).astype(np.int64)), ("out",)),
    # test/test_loopy.py (test_save_of_local_array): <>t[2*j] = j; t[2*j+1] = j; out[i] = t[2*i], 0<=i,j<8
    CorpusKernel(
        "loopy_strided_temporary", "inducer/loopy: test/test_loopy.py", "strided writes of an index value, constant ranges",
        """t[2*j] = j where j in 0:8
t[2*j+1] = j where j in 0:8
out[i] = t[2*i] where i in 0:8""",
        lambda r: dict(),
        lambda: dict(out=np.arange(8, dtype=np.int64)), ("out",)),
    # test/test_apps.py (test_fd_1d): {[i]: 0<=i<n}, result[i] = u[i+1]-u[i]
    CorpusKernel(
        "loopy_fd_1d", "inducer/loopy: test/test_apps.py", "forward difference over an explicit range",
        "result[i] = u[i+1]-u[i] where i in 0:N",
        lambda r: dict(u=rand(r, 12)),
        lambda u: dict(result=np.diff(u)), ("result",)),
    # test/test_apps.py (test_stencil): a_offset(ii, jj) := a[ii+1, jj+1], 0<=i,j<256, a and z of (n+2, n+2)
    CorpusKernel(
        "loopy_stencil", "inducer/loopy: test/test_apps.py", "5-point stencil through an offset substitution",
        """z[i,j] = -2*a[i+1, j+1] + a[i+1, j-1+1] + a[i+1, j+1+1] + a[i-1+1, j+1] + a[i+1+1, j+1]
    where i in 0:256, j in 0:256""",
        lambda r: dict(a=rand(r, 258, 258)),
        lambda a: dict(z=(-2 * a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1])),
        ("z",), declared=dict(a=pc.f32[258, 258], z=pc.f32[258, 258]),
        regions=dict(z=(slice(0, 256), slice(0, 256)))),
    # test/test_apps.py (test_fd_demo): result[i+1,j+1] = ..., {[i,j]: 0<=i,j<n}
    CorpusKernel(
        "loopy_fd_demo", "inducer/loopy: test/test_apps.py", "stencil writing an offset region result[i+1, j+1]",
        "result[i+1,j+1] = pow(u[i + 1, j + 1], 2) + -1 + (-4)*u[i + 1, j + 1]"
        "                 + u[i + 1 + 1, j + 1] + u[i + 1 + -1, j + 1]"
        "                 + u[i + 1, j + 1 + 1] + u[i + 1, j + 1 + -1] where i in 0:N, j in 0:N",
        lambda r: dict(u=rand(r, 10, 10)),
        lambda u: dict(result=(u[1:-1, 1:-1] ** 2 - 1 - 4 * u[1:-1, 1:-1] + u[2:, 1:-1] + u[:-2, 1:-1]
                               + u[1:-1, 2:] + u[1:-1, :-2])),
        ("result",), regions=dict(result=(slice(1, 9), slice(1, 9)))),
    # doc/tutorial.rst (get_op_map example "stats_knl"): a, b float32; g, h float64
    CorpusKernel(
        "loopy_stats_knl", "inducer/loopy: doc/tutorial.rst", "two statements over one domain, mixed f32/f64",
        """c[i, j, k] = a[i,j,k]*b[i,j,k]/3.0+a[i,j,k] where i in 0:N, k in 0:M, j in 0:L
e[i, k] = g[i,k]*(2+h[i,k+1]) where i in 0:N, k in 0:M""",
        lambda r: dict(a=rand(r, 3, 4, 5), b=rand(r, 3, 4, 5), g=rand(r, 3, 5, dtype=np.float64),
                       h=rand(r, 3, 6, dtype=np.float64)),
        lambda a, b, g, h: dict(c=(a * b / np.float32(3.0) + a).astype(np.float32), e=g * (2 + h[:, 1:])),
        ("c", "e"),
        declared=dict(a=pc.f32["N", "L", "M"], b=pc.f32["N", "L", "M"], g=pc.f64["N", "M"],
                      h=pc.f64["N", "M + 1"])),
    # test/test_loopy.py (test_ilp_loop_bound): out[i,k] = sum(j, a[i,j]*b[j,k])
    CorpusKernel(
        "loopy_matmul", "inducer/loopy: test/test_loopy.py", "contraction",
        "out[i,k] +=! a[i,j]*b[j,k]",
        lambda r: dict(a=rand(r, 5, 4), b=rand(r, 4, 6)),
        lambda a, b: dict(out=a @ b), ("out",)),
    # test/test_loopy.py (test_shape_mismatch_check): c[i] = sum(j, a[i,j]*b[j])
    CorpusKernel(
        "loopy_matvec", "inducer/loopy: test/test_loopy.py", "matrix-vector product",
        "c[i] +=! a[i,j]*b[j]",
        lambda r: dict(a=rand(r, 7, 5), b=rand(r, 5)),
        lambda a, b: dict(c=a @ b), ("c",)),
    # test/test_loop_fusion.py (test_loop_fusion_on_reduction_inames): {[i, j0, j1, j2]: 0<=i, j0, j1, j2<10}
    CorpusKernel(
        "loopy_nested_sums", "inducer/loopy: test/test_loop_fusion.py", "two double reductions sharing a reduction index",
        """y0[i] +=! 2*A[i, j0, j1] where i in 0:10, j0 in 0:10, j1 in 0:10
y1[i] +=! 3*A[i, j0, j2] where i in 0:10, j0 in 0:10, j2 in 0:10""",
        lambda r: dict(A=rand(r, 10, 10, 10, dtype=np.float64)),
        lambda A: dict(y0=2 * A.sum(axis=(1, 2)), y1=3 * A.sum(axis=(1, 2))), ("y0", "y1"),
        declared=dict(A=pc.f64[10, 10, 10])),
    # test/test_loop_fusion.py (test_redn_loop_fusion_with_non_candidates_loops_in_nest)
    CorpusKernel(
        "loopy_sums_of_indices", "inducer/loopy: test/test_loop_fusion.py", "sums of index values only",
        """out1[i, d] +=! 2 * j1*i where i in 0:10, d in 0:10, j1 in 0:10
out2[i] +=! 2 * j2 where i in 0:10, j2 in 0:10""",
        lambda r: dict(),
        lambda: dict(out1=np.repeat((2 * np.arange(10) * 45)[:, None], 10, axis=1).astype(np.int64),
                     out2=np.full(10, 90, np.int64)), ("out1", "out2")),
    # test/test_nbody.py: axdist(k) := x[i,k]-x[j,k]; invdist := rsqrt(sum(k, axdist(k)**2));
    # pot[i] = sum(j, if(i != j, invdist, 0)), {[i,j,k]: 0<=i,j<N and 0<=k<3}
    CorpusKernel(
        "loopy_nbody", "inducer/loopy: test/test_nbody.py", "pairwise potential, guarded select on i != j",
        """dist2[i, j] +=! pow(x[i,k]-x[j,k], 2) where k in 0:3
pot[i] +=! select(i != j, 1 / sqrt(dist2[i, j]), 0)""",
        lambda r: dict(x=rand(r, 9, 3)),
        lambda x: dict(pot=_nbody(x)), ("pot",),
        declared=dict(x=pc.f32["N", 3])),
    # test/test_statistics.py (test_strided_footprint): [n] -> {[i]: 0<=i<n}, z[i] = x[3*i]
    CorpusKernel(
        "loopy_strided_read", "inducer/loopy: test/test_statistics.py", "stride-3 read over an explicit range",
        "z[i] = x[3*i] where i in 0:N",
        lambda r: dict(x=rand(r, 13)),
        lambda x: dict(z=x[0::3].copy()), ("z",)),
    # test/test_statistics.py (test_gather_access_footprint_2): {[i]: 0<=i<n}, c[2*i] = a[i]
    CorpusKernel(
        "loopy_strided_write", "inducer/loopy: test/test_statistics.py", "stride-2 write",
        "c[2*i] = a[i]",
        lambda r: dict(a=rand(r, 6)),
        lambda a: dict(c=a.copy()), ("c",), regions=dict(c=(slice(0, 11, 2),))),
    # test/test_loopy.py (test_unknown_arg_shape): local integers from i // 256 in subscripts (loops)
    CorpusKernel(
        "loopy_uniform_l", "inducer/loopy: test/test_loopy.py", "block start i // 256 * 256 in subscripts, int parameters",
        uniform_l,
        lambda r: dict(a=rand(r, 260), n=512, m=3),
        _uniform_l, ("a",)),
]


def _nbody(x):
    d2 = ((x[:, None, :].astype(np.float64) - x[None, :, :]) ** 2).sum(axis=2)
    np.fill_diagonal(d2, 1.0)
    inv = 1 / np.sqrt(d2)
    np.fill_diagonal(inv, 0.0)
    return inv.sum(axis=1).astype(np.float32)


REFUSED = [
    # test/test_loopy.py (test_modulo_indexing): b[i] = sum(j, a[(i+j)%n]); modulo by a size is not
    # quasi-affine (isl takes remainders by constants only)
    CorpusKernel(
        "loopy_modulo_by_size", "inducer/loopy: test/test_loopy.py", "modulo by a size parameter in a subscript",
        "b[i] +=! a[(i+j)%N] where j in 0:5",
        lambda r: dict(), lambda: dict(), ("b",),
        declared=dict(a=pc.f32["N"]), refused=REFUSAL_MESSAGE),
    # examples/sparse.py (spmv over CSR): indices read from data
    CorpusKernel(
        "loopy_spmv", "inducer/loopy: examples/sparse.py", "CSR sparse matrix-vector product (indirection)",
        "y[i] +=! values[rowstarts[i] + j] * x[colindices[rowstarts[i] + j]] where j in 0:rowstarts[i+1] - rowstarts[i]",
        lambda r: dict(), lambda: dict(), ("y",),
        refused=REFUSAL_MESSAGE),
]
