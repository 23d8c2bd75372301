"""Reassociated reductions: the reduction strategy of `schedule="auto"` and of
`vectorize(loop, reduction=True)` / `parallel(loop, reduction=True)`, proven legal, emitted as
OpenMP reduction clauses on an accumulator, and checked against numpy within `n * eps`."""
import numpy as np
import pytest

import polyc as pc
from polyc.schedule.auto import auto_schedule
from polyc.schedule.schedule import LoopKind
from polyc.testing import check_kernel

F32 = {"y": pc.f32, "A": pc.f32, "x": pc.f32, "m": pc.f32, "s": pc.f32, "p": pc.f32}


def _marks(schedule, loop):
    return schedule.dims[schedule.dim_index(loop)].marks


def test_auto_matvec_reduces_in_a_vector_accumulator():
    mv = pc.kernel("y[i] +=! A[i, j] * x[j]", name="matvec")
    f = pc.compile(mv, "auto")
    assert "reduction_vector" in _marks(f.schedule, "j")
    assert "parallel" in _marks(f.schedule, "i_outer")   # rows jammed eight at a time (test_jam.py)
    assert "#pragma omp simd reduction(+:pc_acc)" in f.source
    A = np.random.default_rng(0).uniform(-1, 1, (67, 1000)).astype(np.float32)
    x = np.random.default_rng(1).uniform(-1, 1, 1000).astype(np.float32)
    y = f(A=A, x=x)
    bound = 1000 * np.finfo(np.float32).eps * (np.abs(A) @ np.abs(x))  # n * eps * sum |terms|
    assert np.all(np.abs(y - A.astype(np.float64) @ x) <= bound)


@pytest.mark.parametrize("text, op, reference", [
    ("s[i] +=! A[i, j]", "+", lambda A: A.sum(axis=1)),
    ("s[i] *=! A[i, j]", "*", lambda A: A.prod(axis=1)),
    ("s[i] max=! A[i, j]", "max", lambda A: A.max(axis=1)),
    ("s[i] min=! A[i, j]", "min", lambda A: A.min(axis=1)),
])
def test_every_einstein_reduction_matches_numpy_within_n_eps(text, op, reference):
    k = pc.kernel(text, name="rows")
    f = pc.compile(k, "auto")
    assert f"reduction({op}:pc_acc)" in f.source
    rng = np.random.default_rng(2)
    A = rng.uniform(0.9, 1.1, (9, 301)).astype(np.float32)
    if op in ("max", "min"):
        A[1, 17] = np.nan          # NaN propagates, wherever it is
        A[2, 300] = np.nan
        A[3, 5] = np.inf
        A[4, 9] = -np.inf
        A[5, :] = np.nan
        A[6, :] = -np.inf if op == "max" else np.inf
    got, want = f(A=A), reference(A)
    if op in ("max", "min"):
        np.testing.assert_array_equal(got, want)  # exact, NaN where numpy has NaN
    else:
        np.testing.assert_allclose(got, want, rtol=301 * np.finfo(np.float32).eps)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
@pytest.mark.parametrize("text", ["s[i] +=! A[i, j]", "s[i] *=! A[i, j]", "s[i] max=! A[i, j]",
                                  "s[i] min=! A[i, j]", "s +=! A[i, j] * A[i, j]"])
def test_check_kernel_accepts_reassociated_reductions(text, target):
    k = pc.kernel(text, name="red")
    check_kernel(k, "auto", sizes={"I": 4, "J": 45}, dtype="f32", target=target)


def test_full_reduction_uses_a_parallel_reduction_clause_not_atomics():
    k = pc.kernel("s +=! A[i, j]", name="total")
    f = pc.compile(k, "auto")
    assert "reduction_parallel" in _marks(f.schedule, "i")
    assert "omp parallel for reduction(+:pc_acc)" in f.source
    assert "omp atomic" not in f.source
    A = np.random.default_rng(3).uniform(0, 1, (300, 70))
    np.testing.assert_allclose(f(A=A), A.sum(), rtol=21000 * np.finfo(np.float64).eps)


def test_dot_product_runs_as_parallel_simd_reduction():
    k = pc.kernel("s +=! a[i] * b[i]", name="dot")
    src = pc.codegen(k, "auto")
    assert "omp parallel for simd reduction(+:pc_acc)" in src


def test_reassociate_false_is_bit_identical_to_the_source_order():
    k = pc.kernel("y[i] +=! A[i, j] * x[j]", name="matvec")
    rng = np.random.default_rng(4)
    A = rng.uniform(-1, 1, (31, 4099)).astype(np.float32)
    x = rng.uniform(-1, 1, 4099).astype(np.float32)
    # Bit for bit needs the same contraction of multiply-adds in both (README: -ffp-contract=off);
    # the automatic schedule jams rows of the ordered chains, which gcc contracts differently.
    exact = ["-O3", "-march=native", "-ffp-contract=off"]
    ordered = pc.compile(k, "auto", reassociate=False, flags=exact)
    assert "pc_acc" not in ordered.source
    assert not any(d.marks & {"reduction_vector", "reduction_parallel"} for d in ordered.schedule.dims)
    source_order = pc.compile(k, flags=exact)
    got = ordered(A=A, x=x)
    assert np.array_equal(got, source_order(A=A, x=x))
    written = np.zeros(31, np.float32)
    for j in range(A.shape[1]):  # Python's order: one rounded product, then one rounded sum, per term
        written += A[:, j] * x[j]
    assert np.array_equal(got, written)
    m = pc.kernel("m[i] max=! A[i, j]", name="rowmax")
    A[3, 11] = np.nan
    assert np.array_equal(pc.compile(m, "auto", reassociate=False)(A=A), pc.compile(m)(A=A), equal_nan=True)


def test_loop_kernels_keep_python_order_unless_asked():
    def rowsum(A: pc.f64["N", "M"], s: pc.f64["N"]):
        for i in range(N):  # noqa: F821
            for j in range(M):  # noqa: F821
                s[i] += A[i, j]
    k = pc.kernel(rowsum)
    assert "pc_acc" not in pc.codegen(k, "auto")
    opted = pc.compile(k, "auto", reassociate=True)
    assert "reduction(+:pc_acc)" in opted.source
    check_kernel(k, opted.schedule, sizes={"N": 3, "M": 50})
    explicit = k.schedule().vectorize("j", reduction=True)
    assert "reduction_vector" in _marks(explicit, "j")


def test_reassociate_takes_only_booleans():
    k = pc.kernel("s[i] +=! A[i, j]")
    with pytest.raises(pc.PolycError, match="reassociate"):
        pc.compile(k, "auto", reassociate="yes")


def test_a_scan_is_refused():
    def scan(A: pc.f64["N"], O: pc.f64["N"]):
        for i in range(1, N):  # noqa: F821
            O[i] = O[i - 1] + A[i]
    k = pc.kernel(scan)
    with pytest.raises(pc.IllegalScheduleError, match="carries"):
        k.schedule().vectorize("i", reduction=True)
    with pytest.raises(pc.IllegalScheduleError):
        k.schedule().parallel("i", reduction=True)
    assert "pc_acc" not in pc.codegen(k, "auto", reassociate=True)


def test_an_update_reading_its_own_target_is_refused():
    def acc(A: pc.f64["N"], O: pc.f64["N"]):
        for i in range(1, N):  # noqa: F821
            O[i] += O[i - 1] * A[i]
    k = pc.kernel(acc)
    with pytest.raises(pc.IllegalScheduleError):
        k.schedule().vectorize("i", reduction=True)


def test_reduction_vector_needs_one_target_element_and_the_innermost_loop():
    k = pc.kernel("y[i] +=! A[i, j] * x[j]")
    s = k.schedule().interchange("i", "j")
    with pytest.raises(pc.IllegalScheduleError, match="different elements of y"):
        s.vectorize("j", reduction=True)
    t = pc.kernel("s[i] +=! A[i, j, k]").schedule()
    with pytest.raises(pc.IllegalScheduleError, match="innermost"):
        t.vectorize("j", reduction=True)


def test_a_loop_carrying_nothing_gets_a_plain_vector_mark():
    k = pc.kernel("y[i] +=! A[i, j] * x[j]")
    s = k.schedule().interchange("i", "j").vectorize("i", reduction=True)
    assert _marks(s, "i") == {"vector"}


def test_reduction_marks_survive_serialisation():
    k = pc.kernel("y[i] +=! A[i, j] * x[j]")
    s = k.schedule().parallel("i").vectorize("j", reduction=True)
    back = pc.Schedule.from_json(k, s.to_json())
    assert "reduction_vector" in _marks(back, "j")
    assert "vectorize('j', reduction=True)" in s.to_text()


def test_a_later_primitive_reproves_the_reduction_mark():
    k = pc.kernel("y[i] +=! A[i, j] * x[j]")
    s = k.schedule().vectorize("j", reduction=True)
    with pytest.raises(pc.IllegalScheduleError):
        s.interchange("i", "j")   # j no longer innermost


@pytest.mark.parametrize("text", ["s[i] +=! A[i, j] where j in 0:i+1", "t +=! A[i, i]", "s +=! A[i] * 2"])
def test_triangular_diagonal_and_scalar_reductions(text):
    k = pc.kernel(text)
    assert "pc_acc" in pc.codegen(k, "auto")
    check_kernel(k, "auto", dtype="f32")
    check_kernel(k, "auto")


def test_integer_reductions_are_exact():
    k = pc.kernel("s[i] +=! A[i, j]", A=pc.i32["I", "J"], s=pc.i32["I"])
    f = pc.compile(k, "auto")
    assert "reduction(+:pc_acc)" in f.source
    A = np.random.default_rng(0).integers(-100, 100, (5, 333)).astype(np.int32)
    assert np.array_equal(f(A=A), A.sum(axis=1, dtype=np.int32))
    m = pc.kernel("s[i] max=! A[i, j]", A=pc.i64["I", "J"], s=pc.i64["I"])
    g = pc.compile(m, "auto")
    assert "reduction(max:pc_acc)" in g.source and "pc_acc_nan" not in g.source  # no NaN in integers
    B = A.astype(np.int64)
    assert np.array_equal(g(A=B), B.max(axis=1))


def test_softmax_row_reductions_vectorise_beside_other_statements():
    import kernels
    lk = kernels.by_name("softmax")
    f = pc.compile(lk.kernel, "auto")
    assert "reduction(max:pc_acc)" in f.source and "reduction(+:pc_acc)" in f.source
    inputs = lk.make_inputs(dict(I=7, J=33), "f32", np.random.default_rng(1))
    np.testing.assert_allclose(f(**inputs), lk.expected(inputs), rtol=1e-5, atol=1e-7)


def test_a_fused_loop_of_several_reductions_and_a_definition_runs_as_one_simd_reduction():
    """isl groups the statements of softmax's gradient's row loop (e = exp(..), the row sum, the
    count of maxima) into nested blocks: the loop still runs as one SIMD loop with an accumulator
    per reduced element (it ran in order, with `expf` not vectorised, before)."""
    softmax = pc.kernel("""
        m[i] max=! X[i, j]
        e[i, j] = exp(X[i, j] - m[i])
        s[i] +=! e[i, j]
        Y[i, j] = e[i, j] / s[i]
    """, name="softmax")          # the maximum not stopped (the library's is): its ties are counted
    g = pc.grad(softmax, of="Y", wrt=["X"])
    f = pc.compile(g, "auto")
    assert "reduction(+:pc_acc) reduction(+:pc_acc1)" in f.source
    simd_loop = f.source.split("reduction(+:pc_acc) reduction(+:pc_acc1)")[1].split("}")[0]
    assert "expf(" in simd_loop
    rng = np.random.default_rng(3)
    X = rng.standard_normal((7, 300)).astype(np.float32)
    Yb = rng.standard_normal((7, 300)).astype(np.float32)
    Y = np.exp(X - X.max(axis=1, keepdims=True))
    Y /= Y.sum(axis=1, keepdims=True)
    want = Y * (Yb - (Yb * Y).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(f(X=X, Y_grad=Yb), want, rtol=1e-4, atol=1e-6)


def test_windows_too_short_for_a_vector_get_no_vector_mark():
    """avgpool2d's 2 x 2 window: a vector reduction over two elements set up and combined an
    accumulator per output element (3x slower than the source order); loops that never reach
    `MIN_VECTOR_TRIP` iterations get no vector mark, plain or reducing."""
    import kernels
    from polyc.schedule.auto_size import MIN_VECTOR_TRIP
    from polyc.schedule.rewrite import trip_count_bound
    lk = kernels.by_name("avgpool2d")
    sched = auto_schedule(lk.kernel, sizes=lk.sizes["typical"])
    for k, d in enumerate(sched.dims):
        if d.is_loop and d.runs(LoopKind.VECTORIZED):
            bound = trip_count_bound(sched, k)
            assert bound is None or bound >= MIN_VECTOR_TRIP, (d.name, bound)
    assert "pc_acc" not in pc.codegen(lk.kernel, sched)
    check_kernel(lk.kernel, sched, sizes=lk.sizes["primes"])
