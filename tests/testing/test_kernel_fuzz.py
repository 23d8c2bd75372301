"""The kernel fuzzer itself: deterministic, printable cases; generated kernels that polyc accepts;
a NaN-aware comparison; cases run end to end; triage of known failure classes.

The campaign over many cases is the slow group (`test_kernel_fuzz_slow.py`).
"""
from __future__ import annotations

import numpy as np

from polyc.errors import PolycError
from polyc.testing.kernel_compare import compare_outputs
from polyc.testing.kernel_campaign import main
from polyc.testing.kernel_fuzz import make_case, run_case
from polyc.testing.kernel_gen_common import draw_array
from polyc.testing.kernel_triage import classify


def test_cases_are_deterministic_and_printable():
    for index in range(25):
        a, b = make_case(7, index), make_case(7, index)
        assert a == b
        text = a.describe()
        assert f"seed=7 index={index}" in text and a.kernel.name in text and a.target in text
    kinds = {make_case(7, i).kernel.language for i in range(25)}
    assert kinds == {"einstein", "loops"}


def test_generated_kernels_are_accepted_and_varied():
    """Most generated kernels are valid polyc kernels (a refusal is a finding to look at), and
    together they use the language's features."""
    refused, features = [], set()
    for index in range(30):
        case = make_case(11, index)
        features |= case.kernel.features
        try:
            case.kernel.build()
        except PolycError as e:
            refused.append(f"{index}: {type(e).__name__}: {e}")
    assert len(refused) <= 6, refused
    for f in ("+=!", "max", "select", "triangular", "stencil", "ifexp", "local"):
        assert f in features, f


def test_loop_kernel_text_rebuilds_the_same_kernel():
    case = next(make_case(3, i) for i in range(50) if make_case(3, i).kernel.language == "loops")
    namespace = {}
    exec(case.kernel.text().replace("@pc.kernel\n", ""), namespace)   # the printed text is Python
    assert callable(namespace[case.kernel.name])


def test_compare_outputs_is_nan_and_inf_aware():
    want = {"X": np.array([1.0, np.nan, np.inf, -np.inf, 0.0], dtype=np.float32)}
    assert compare_outputs({"X": want["X"].copy()}, want, 1e-7, {}, {}) == []
    for k, v in [(1, 2.0), (1, 0.0), (2, -np.inf), (3, np.nan), (0, np.nan), (0, 1.001)]:
        got = want["X"].copy()
        got[k] = v
        assert compare_outputs({"X": got}, want, 1e-7, {}, {}), (k, v)
    near = want["X"].copy()
    near[0] = np.nextafter(np.float32(1.0), np.float32(2.0))          # one ulp: within tolerance
    assert compare_outputs({"X": near}, want, 1e-7, {}, {}) == []
    ints = {"I": np.array([1, 2], dtype=np.int32)}
    assert compare_outputs({"I": np.array([1, 3], dtype=np.int32)}, ints, 1e-7, {}, {})
    assert compare_outputs({"I": np.array([1, 2], dtype=np.int64)}, ints, 1e-7, {}, {})   # dtype


def test_draw_array_injects_specials_only_in_floats():
    rng = np.random.default_rng(0)
    f = draw_array(rng, (400,), "f32", 0.3)
    assert f.dtype == np.float32 and np.isnan(f).any() and np.isinf(f).any()
    i = draw_array(rng, (400,), "i64", 0.3)
    assert i.dtype == np.int64 and i.min() >= -5 and i.max() <= 5


def test_cases_run_end_to_end(capsys):
    """A handful of cases (both languages, both targets) run with no silent mismatch, and the
    command line prints a case as source plus schedule."""
    seen = set()
    for index in (0, 2, 4, 8):
        r = run_case(make_case(5, index))
        assert r.status in ("ok", "refused", "discarded") or classify(r).startswith("known:"), r.report()
        seen.add((r.case.kernel.language, r.case.target, r.status))
    assert any(s == "ok" for _, _, s in seen)
    main(["--show", "0", "--seed", "5"])
    out = capsys.readouterr().out
    assert "kernel_fuzz case seed=5 index=0" in out and "# outcome:" in out


def test_triage_recognises_nan_through_max():
    """A case whose mismatch is NaN through `max=!` (another area's bug) is classed as known: it
    passes once the NaN inputs are replaced by zeros."""
    case = make_case(5, 8)               # T0[i] min=! A0[i], with NaN among the inputs
    assert "min=!" in case.kernel.source and case.specials > 0
    r = run_case(case)
    if r.status == "ok":
        # Once NaN propagates through min (the semantics fix), the case passes outright.
        import polyc as pc
        k = pc.kernel("B[i] min=! A[i, j]", name="nan_min_check")
        assert np.isnan(pc.compile(k)(A=np.array([[1.0, np.nan]])))[0]
        return
    assert r.status == "mismatch" and "nan" in r.detail
    assert classify(r) == "known:nan-through-max/min"


def test_einstein_where_names_only_indices_used_in_subscripts():
    """Every index a generated `where` clause names is read in a subscript of its statement (an
    index only in a guard has no range polyc could infer: such kernels were refused, wasted)."""
    import re
    for index in range(1300, 1420):
        k = make_case(1, index).kernel
        if k.language != "einstein":
            continue
        for line in k.source.splitlines():
            body, _, where = line.partition(" where ")
            for part in filter(None, where.split(", ")):
                v = part.split(" in ")[0]
                assert re.search(rf"\[[^\]]*\b{v}\b[^\]]*\]", body), (index, line)


def test_random_schedules_for_cuda_emu_map_blocks_and_threads():
    """For "cuda-emu" the random primitive sequences also draw explicit block/thread mappings
    (proven legal like every primitive); for "c" they never do."""
    from collections import Counter

    import polyc as pc
    from polyc.testing.kernel_fuzz import random_schedule
    k = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="mm_fuzz_map")
    gpu, cpu = Counter(), Counter()
    for seed in range(12):
        random_schedule(k, seed, gpu, target="cuda-emu")
        random_schedule(k, seed, cpu, target="c")
    assert gpu["call:map_to_blocks"] + gpu["call:map_to_threads"] > 0, gpu
    assert not any(key.startswith("call:map_to") for key in cpu), cpu


def test_reference_values_beyond_the_generators_bounds_are_recognised():
    """An empty integer `max=!` leaks INT_MIN into later arithmetic, whose overflow C leaves
    undefined: a mismatch with such reference values is discarded, not reported as a bug."""
    from polyc.testing.kernel_fuzz import _beyond_bounds
    assert _beyond_bounds({"T": np.array([3, -2**31], dtype=np.int32)}, {"T": 10.0})
    assert not _beyond_bounds({"T": np.array([3, -10], dtype=np.int32)}, {"T": 10.0})
    assert not _beyond_bounds({"T": np.array([np.inf, np.nan, -9.5])}, {"T": 10.0})   # identities of floats
    assert not _beyond_bounds({"A0": np.array([1e9])}, {})                               # loop kernels: no bound


def test_only_nan_lost_signature():
    from polyc.testing.kernel_compare import only_nan_lost
    want = {"T": np.array([np.nan, 1.0, np.nan])}
    assert only_nan_lost({"T": np.array([np.inf, 1.0, 2.0])}, want)
    assert not only_nan_lost({"T": np.array([np.inf, 1.5, np.nan])}, want)   # a plain wrong value too
    assert not only_nan_lost({"T": want["T"].copy()}, want)                  # no difference at all


def test_a_campaign_whose_generator_fails_says_so_and_fails(monkeypatch, capsys, tmp_path):
    import polyc.testing.kernel_campaign as kc

    def broken(seed, index):
        raise RuntimeError("generator bug")
    monkeypatch.setattr(kc, "make_case", broken)
    assert kc.main(["--cases", "3", "--seed", "1", "--log", str(tmp_path / "log.txt")]) == 1
    assert "GENERATOR ERRORS 3 (cases never built)" in capsys.readouterr().out
