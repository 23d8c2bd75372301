"""The PolyBench loop kernels, run as written at MINI size, against independent formulations.

Each oracle below is written from the kernel's mathematical definition, not from its loop nest:
vectorised numpy (matrix products, `np.linalg`, slicing per time step), a wavefront order for
seidel-2d, a vectorised Thomas algorithm for adi, scalar-carried recursive filters for deriche, and
a diagonal-by-diagonal dynamic programme for nussinov.  Every array a kernel writes is checked.
"""
import numpy as np
import pytest

from kernels import all_kernels
from kernels.polybench._common import PRESETS, run_as_written

NAMES = sorted("""
    2mm 3mm adi atax bicg cholesky correlation covariance deriche doitgen durbin fdtd-2d
    floyd-warshall gemm gemver gesummv gramschmidt heat-3d jacobi-1d jacobi-2d lu ludcmp mvt
    nussinov seidel-2d symm syr2k syrk trisolv trmm""".split())

KERNELS = {k.name: k for k in all_kernels("polybench")}
RTOL, ATOL = 1e-10, 1e-12
ORACLES = {}
#: PolyBench/C 4.2's DATA_TYPE where it is not double: the library keeps it.
NATIVE_TYPES = {"deriche": "f32", "floyd-warshall": "i32", "nussinov": "i32"}


def oracle(name):
    def register(fn):
        ORACLES[name] = fn
        return fn
    return register


def _lower_mask(n):
    return np.tril(np.ones((n, n), dtype=bool))


# ---------------------------------------------------------------------------------------- blas
@oracle("gemm")
def _gemm(C, A, B, alpha, beta):
    return {"C": alpha * A @ B + beta * C}


@oracle("gemver")
def _gemver(A, u1, v1, u2, v2, w, x, y, z, alpha, beta):
    A = A + np.outer(u1, v1) + np.outer(u2, v2)
    x = x + beta * A.T @ y + z
    return {"A": A, "x": x, "w": w + alpha * A @ x}


@oracle("gesummv")
def _gesummv(A, B, tmp, x, y, alpha, beta):
    return {"tmp": A @ x, "y": alpha * (A @ x) + beta * (B @ x)}


@oracle("symm")
def _symm(C, A, B, alpha, beta):
    sym = np.tril(A) + np.tril(A, -1).T
    return {"C": alpha * sym @ B + beta * C}


@oracle("syr2k")
def _syr2k(C, A, B, alpha, beta):
    full = alpha * (A @ B.T + B @ A.T) + beta * C
    return {"C": np.where(_lower_mask(len(C)), full, C)}


@oracle("syrk")
def _syrk(C, A, alpha, beta):
    return {"C": np.where(_lower_mask(len(C)), alpha * A @ A.T + beta * C, C)}


@oracle("trmm")
def _trmm(A, B, alpha):
    unit_upper = np.tril(A, -1).T + np.eye(len(A))
    return {"B": alpha * unit_upper @ B}


# ------------------------------------------------------------------------- linear-algebra kernels
@oracle("2mm")
def _2mm(tmp, A, B, C, D, alpha, beta):
    tmp = alpha * A @ B
    return {"tmp": tmp, "D": tmp @ C + beta * D}


@oracle("3mm")
def _3mm(E, A, B, F, C, D, G):
    return {"E": A @ B, "F": C @ D, "G": (A @ B) @ (C @ D)}


@oracle("atax")
def _atax(A, x, y, tmp):
    return {"tmp": A @ x, "y": A.T @ (A @ x)}


@oracle("bicg")
def _bicg(A, s, q, p, r):
    return {"s": A.T @ r, "q": A @ p}


@oracle("doitgen")
def _doitgen(A, C4, total):
    out = np.einsum("rqs,sp->rqp", A, C4)
    return {"A": out, "total": out[-1, -1].copy()}  # the scratch row holds the last (r, q)


@oracle("mvt")
def _mvt(A, x1, x2, y_1, y_2):
    return {"x1": x1 + A @ y_1, "x2": x2 + A.T @ y_2}


# ------------------------------------------------------------------------------------ solvers
def _lu_right_looking(A):
    """Doolittle LU by rank-1 updates (the outer-product order, not the kernel's dot products)."""
    A = A.copy()
    for k in range(len(A)):
        A[k + 1:, k] /= A[k, k]
        A[k + 1:, k + 1:] -= np.outer(A[k + 1:, k], A[k, k + 1:])
    return A


@oracle("cholesky")
def _cholesky(A):
    L = np.linalg.cholesky(A)  # reads the lower triangle
    return {"A": np.tril(L) + np.triu(A, 1)}  # the strict upper triangle is left alone


@oracle("durbin")
def _durbin(r, y, z):
    n = len(r)
    first = np.concatenate([[1.0], r[:-1]])
    toeplitz = first[np.abs(np.subtract.outer(np.arange(n), np.arange(n)))]
    sol = np.linalg.solve(toeplitz, -r)
    # z is scratch: after the last step it holds the first N-1 entries of the solution
    return {"y": sol, "z": np.concatenate([sol[:-1], [0.0]])}


@oracle("gramschmidt")
def _gramschmidt(A, R, Q):
    q, r = np.linalg.qr(A)
    signs = np.sign(np.diag(r))
    q, r = q * signs, r * signs[:, None]
    # A keeps, in column j, what is left after projecting out q_0..q_{j-1}: r_jj q_j
    return {"Q": q, "R": r, "A": q * np.diag(r)}


@oracle("lu")
def _lu(A):
    return {"A": _lu_right_looking(A)}


@oracle("ludcmp")
def _ludcmp(A, b, x, y):
    lu = _lu_right_looking(A)
    unit_lower = np.tril(lu, -1) + np.eye(len(A))
    return {"A": lu, "y": np.linalg.solve(unit_lower, b), "x": np.linalg.solve(A, b)}


@oracle("trisolv")
def _trisolv(L, x, b):
    return {"x": np.linalg.solve(np.tril(L), b)}


# ---------------------------------------------------------------------------------- datamining
@oracle("correlation")
def _correlation(data, corr, mean, stddev):
    n = len(data)
    mu = data.mean(axis=0)
    sd = np.sqrt(((data - mu) ** 2).mean(axis=0))
    sd = np.where(sd <= 0.1, 1.0, sd)
    z = (data - mu) / (np.sqrt(n) * sd)
    c = z.T @ z
    np.fill_diagonal(c, 1.0)
    return {"data": z, "corr": c, "mean": mu, "stddev": sd}


@oracle("covariance")
def _covariance(data, cov, mean):
    mu = data.mean(axis=0)
    centred = data - mu
    return {"data": centred, "cov": centred.T @ centred / (len(data) - 1), "mean": mu}


# -------------------------------------------------------------------------------------- stencils
@oracle("adi")
def _adi(u, v, p, q, TSTEPS):
    n = len(u)
    dt, dx = 1.0 / TSTEPS, 1.0 / n
    mul1, mul2 = 2.0 * dt / dx**2, 1.0 * dt / dx**2
    a, b, c = -mul1 / 2, 1 + mul1, -mul1 / 2
    d, e, f = -mul2 / 2, 1 + mul2, -mul2 / 2
    u, v, p, q = u.copy(), v.copy(), p.copy(), q.copy()
    inner = slice(1, n - 1)

    def sweep(rhs, lo, diag, hi, out_line):
        """Thomas algorithm along the second axis of p and q for all interior lines at once;
        `rhs(j)` is the explicit right-hand side of every line at position j; returns the solution
        line by line (solution[i, j]) with boundary values 1."""
        p[inner, 0], q[inner, 0] = 0.0, 1.0
        for j in range(1, n - 1):
            den = lo * p[inner, j - 1] + diag
            p[inner, j] = -hi / den
            q[inner, j] = (rhs(j) - lo * q[inner, j - 1]) / den
        sol = np.ones((n - 2, n))
        for j in range(n - 2, 0, -1):
            sol[:, j] = p[inner, j] * sol[:, j + 1] + q[inner, j]
        out_line(sol)

    def put_v(sol):
        v[:, inner] = sol.T  # v's first index is the solved direction
        v[0, inner] = 1.0
        v[n - 1, inner] = 1.0

    def put_u(sol):
        u[inner, 1:n - 1] = sol[:, 1:n - 1]
        u[inner, 0] = 1.0
        u[inner, n - 1] = 1.0

    for _ in range(TSTEPS):
        ut = u.T  # ut[i, j] = u[j, i]
        sweep(lambda j: -d * ut[0:n - 2, j] + (1 + 2 * d) * ut[1:n - 1, j] - f * ut[2:n, j],
              a, b, c, put_v)
        sweep(lambda j: -a * v[0:n - 2, j] + (1 + 2 * a) * v[1:n - 1, j] - c * v[2:n, j],
              d, e, f, put_u)
    return {"u": u, "v": v, "p": p, "q": q}


@oracle("fdtd-2d")
def _fdtd_2d(ex, ey, hz, fict):
    ex, ey, hz = ex.copy(), ey.copy(), hz.copy()
    for t in range(len(fict)):
        ey[0, :] = fict[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return {"ex": ex, "ey": ey, "hz": hz}


@oracle("heat-3d")
def _heat_3d(A, B, TSTEPS):
    A, B = A.copy(), B.copy()
    c = (slice(1, -1),) * 3

    def step(src, dst):
        s = src
        lap = (0.125 * (s[2:, 1:-1, 1:-1] - 2 * s[c] + s[:-2, 1:-1, 1:-1])
               + 0.125 * (s[1:-1, 2:, 1:-1] - 2 * s[c] + s[1:-1, :-2, 1:-1])
               + 0.125 * (s[1:-1, 1:-1, 2:] - 2 * s[c] + s[1:-1, 1:-1, :-2]))
        dst[c] = lap + s[c]

    for _ in range(TSTEPS):
        step(A, B)
        step(B, A)
    return {"A": A, "B": B}


@oracle("jacobi-1d")
def _jacobi_1d(A, B, TSTEPS):
    A, B = A.copy(), B.copy()
    for _ in range(TSTEPS):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
    return {"A": A, "B": B}


@oracle("jacobi-2d")
def _jacobi_2d(A, B, TSTEPS):
    A, B = A.copy(), B.copy()

    def avg(s):
        return 0.2 * (s[1:-1, 1:-1] + s[1:-1, :-2] + s[1:-1, 2:] + s[2:, 1:-1] + s[:-2, 1:-1])

    for _ in range(TSTEPS):
        B[1:-1, 1:-1] = avg(A)
        A[1:-1, 1:-1] = avg(B)
    return {"A": A, "B": B}


@oracle("seidel-2d")
def _seidel_2d(A, TSTEPS):
    """Gauss-Seidel by wavefronts: every point with the same 2i + j reads only points of smaller
    2i + j (already updated) or larger (not yet updated), so each wavefront is one vector step."""
    A = A.copy()
    n = len(A)
    ii, jj = np.meshgrid(np.arange(1, n - 1), np.arange(1, n - 1), indexing="ij")
    level = (2 * ii + jj).ravel()
    order = np.argsort(level, kind="stable")
    bounds = np.flatnonzero(np.diff(level[order])) + 1
    for _ in range(TSTEPS):
        for group in np.split(order, bounds):
            i, j = ii.ravel()[group], jj.ravel()[group]
            A[i, j] = sum(A[i + di, j + dj] for di in (-1, 0, 1) for dj in (-1, 0, 1)) / 9.0
    return {"A": A}


# ---------------------------------------------------------------------------------------- medley
@oracle("deriche")
def _deriche(imgIn, imgOut, y1, y2, alpha):
    ea, e2a = np.exp(-alpha), np.exp(-2 * alpha)
    k = (1 - ea) ** 2 / (1 + 2 * alpha * ea - np.exp(2 * alpha))
    a1, a2, a3, a4 = k, k * ea * (alpha - 1), k * ea * (alpha + 1), -k * e2a
    b1, b2 = 2.0 ** -alpha, -e2a

    def causal(x):  # along axis 1, every line at once, recursion state carried in vectors
        out = np.zeros_like(x)
        xm1, ym1, ym2 = (np.zeros(len(x)) for _ in range(3))
        for j in range(x.shape[1]):
            out[:, j] = a1 * x[:, j] + a2 * xm1 + b1 * ym1 + b2 * ym2
            xm1, ym2, ym1 = x[:, j], ym1, out[:, j]
        return out

    def anticausal(x):
        out = np.zeros_like(x)
        xp1, xp2, yp1, yp2 = (np.zeros(len(x)) for _ in range(4))
        for j in reversed(range(x.shape[1])):
            out[:, j] = a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2
            xp2, xp1, yp2, yp1 = xp1, x[:, j], yp1, out[:, j]
        return out

    horizontal = causal(imgIn) + anticausal(imgIn)
    down, up = causal(horizontal.T).T, anticausal(horizontal.T).T
    return {"imgOut": down + up, "y1": down, "y2": up}


@oracle("floyd-warshall")
def _floyd_warshall(paths):
    d = paths.copy()
    for k in range(len(d)):
        d = np.minimum(d, d[:, k, None] + d[None, k, :])  # min-plus relaxation through k
    return {"paths": d}


@oracle("nussinov")
def _nussinov(seq, table):
    """Nussinov's recurrence filled by diagonals (span d = j - i), each diagonal vectorised."""
    n = len(seq)
    S = table.copy()
    pairs = (np.add.outer(seq.astype(int), seq.astype(int)) == 3).astype(int)
    for d in range(1, n):
        i = np.arange(n - d)
        j = i + d
        best = np.maximum.reduce([S[i, j], S[i, j - 1], S[i + 1, j],
                                  S[i + 1, j - 1] + (pairs[i, j] if d > 1 else 0)])
        for k in range(1, d):  # split points i < i + k < j
            best = np.maximum(best, S[i, i + k] + S[i + k + 1, j])
        S[i, j] = best
    return {"table": S}


# ------------------------------------------------------------------------------------------ tests
def test_the_thirty_kernels_and_their_presets():
    assert sorted(KERNELS) == NAMES
    assert sorted(ORACLES) == NAMES
    for k in KERNELS.values():
        assert k.suite == "polybench" and k.dtypes == (NATIVE_TYPES.get(k.name, "f64"),)
        assert tuple(k.sizes) == PRESETS
        volumes = [np.prod(list(k.sizes[p].values())) for p in PRESETS]
        # PolyBench's atax and bicg EXTRALARGE (1800 x 2200) is a hair smaller than LARGE (1900 x 2100)
        assert volumes[:4] == sorted(volumes[:4]) and volumes[4] > volumes[2], k.name


@pytest.mark.parametrize("name", NAMES)
def test_kernel_as_written_matches_independent_oracle(name):
    lk = KERNELS[name]
    dtype = lk.dtypes[0]
    inputs = lk.make_inputs(lk.sizes["MINI"], dtype, np.random.default_rng(0))
    again = lk.make_inputs(lk.sizes["MINI"], dtype, np.random.default_rng(1))
    for key, value in inputs.items():  # deterministic, independent of the rng
        np.testing.assert_array_equal(value, again[key])
    got = lk.expected(inputs)
    if not isinstance(got, dict):
        got = {lk.outputs[0]: got}
    expected = ORACLES[name](**{k: (v.copy() if isinstance(v, np.ndarray) else v)
                                  for k, v in inputs.items()})
    assert set(got) == set(expected) == set(lk.outputs)
    rtol, atol = (RTOL, ATOL) if dtype == "f64" else lk.tol(dtype)
    for key, want in expected.items():
        assert np.isfinite(got[key]).all(), (name, key)
        assert got[key].dtype == inputs[key].dtype, (name, key)  # computed in the kernel's own type
        np.testing.assert_allclose(got[key], want, rtol=rtol, atol=atol, err_msg=f"{name}: {key}")


@pytest.mark.parametrize("name,array,kept_diagonal", [
    ("symm", "A", 0),       # only the lower triangle of the symmetric A is stored
    ("trmm", "A", -1),      # the unit diagonal is implied
    ("trisolv", "L", 0),
    ("cholesky", "A", 0),   # neither read nor written
])
def test_unread_upper_triangles_do_not_matter(name, array, kept_diagonal):
    lk = KERNELS[name]
    inputs = lk.make_inputs(lk.sizes["MINI"], None, None)
    clean = inputs[array]
    poisoned = np.tril(clean, kept_diagonal) + np.triu(np.full_like(clean, -123.0), kept_diagonal + 1)
    got = lk.expected(dict(inputs, **{array: poisoned}))
    want = lk.expected(inputs)
    if name == "cholesky":  # L replaces the lower triangle; the upper one stays as it was
        np.testing.assert_array_equal(np.tril(got), np.tril(want))
        np.testing.assert_array_equal(np.triu(got, 1), np.triu(poisoned, 1))
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name,arrays", [
    ("floyd-warshall", {"paths": np.int32}),
    ("nussinov", {"seq": np.uint8, "table": np.int32}),  # PolyBench's char bases and int scores
    ("deriche", {"imgIn": np.float32, "imgOut": np.float32, "y1": np.float32, "y2": np.float32}),
    ("gemm", {"A": np.float64, "B": np.float64, "C": np.float64}),
])
def test_polybench_data_types_are_kept(name, arrays):
    lk = KERNELS[name]
    inputs = lk.make_inputs(lk.sizes["MINI"])
    assert {k: inputs[k].dtype for k in arrays} == {k: np.dtype(t) for k, t in arrays.items()}
    for array, dtype in arrays.items():
        assert lk.kernel.program.tensor(array).dtype.numpy == np.dtype(dtype), (name, array)
    other = "f64" if lk.dtypes[0] != "f64" else "f32"
    with pytest.raises(ValueError, match=f"defined in {lk.dtypes[0]} only"):
        lk.make_inputs(lk.sizes["MINI"], other)


@pytest.mark.parametrize("name", ["floyd-warshall", "nussinov"])
def test_integer_kernels_generate_integer_code(name):
    """The C that polyc times does PolyBench's integer work: no double arithmetic on the tables."""
    import polyc as pc

    lk = KERNELS[name]
    assert lk.tol("i32") == (0.0, 0.0)
    src = pc.codegen(lk.kernel)
    assert "int32_t *restrict d_" in src and "double" not in src.split("void polyc_")[-1], src


def test_run_as_written_binds_sizes_from_shapes():
    lk = KERNELS["gemm"]
    inputs = lk.make_inputs({"NI": 3, "NJ": 4, "NK": 5}, "f64", None)
    expected = inputs["alpha"] * inputs["A"] @ inputs["B"] + inputs["beta"] * inputs["C"]
    C = inputs["C"]
    run_as_written(lk.function, **inputs)  # in place
    np.testing.assert_allclose(C, expected, rtol=RTOL)
    with pytest.raises(ValueError, match="NK"):
        run_as_written(lk.function, **dict(inputs, B=np.zeros((6, 4))))
