"""`make demo` (benchmarks/demo.py): every kernel verified, then timed against what a user would
otherwise run (numpy where a numpy formulation exists, else the source-order C at -O3), each in
its own process; a table and a one-line geometric-mean summary."""
from __future__ import annotations

import pytest

import functools
from types import SimpleNamespace

import numpy as np

from benchmarks import demo
from benchmarks.numpy_baselines import FORMULATIONS


@functools.lru_cache(maxsize=None)
def _polybench():
    from benchmarks.polybench import polybench_kernels
    return polybench_kernels()


def row(name, baseline, polyc_ms, baseline_ms, status="OK"):
    return demo.Row(name, "core" if baseline == "numpy" else "polybench", "N=1", "f32", baseline,
                    status=status, polyc_ms=polyc_ms, baseline_ms=baseline_ms)


def test_the_baseline_is_numpy_for_numpy_formulations_and_source_c_otherwise():
    # the core suite's references are numpy; PolyBench's are Python loop nests
    assert demo.baseline_of(SimpleNamespace(name="matmul", suite="core")) == "numpy"
    assert demo.baseline_of(SimpleNamespace(name="gemm", suite="polybench")) == "numpy"
    assert demo.baseline_of(SimpleNamespace(name="lu", suite="polybench")) == "C -O3"


@pytest.mark.parametrize("name", sorted(FORMULATIONS))
def test_each_numpy_formulation_computes_what_the_polybench_kernel_does(name):
    lk = _polybench()[name]
    inputs = lk.make_inputs(lk.sizes["MINI"], lk.dtypes[0])  # int32 for floyd-warshall
    expected = lk.expected(inputs)
    expected = expected if isinstance(expected, dict) else {lk.outputs[0]: expected}
    work = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    FORMULATIONS[name](**work)
    for array, want in expected.items():
        np.testing.assert_allclose(work[array], want, *lk.tol(lk.dtypes[0]), err_msg=f"{name}: {array}")


def test_summary_is_one_line_of_geometric_means_over_verified_kernels():
    rows = [row("a", "numpy", 1.0, 2.0), row("b", "numpy", 2.0, 1.0), row("c", "numpy", 1.0, 8.0),
            row("d", "C -O3", 1.0, 3.0), row("e", "C -O3", 1.0, 100.0, status="FAIL")]
    line = demo.summary_line(rows, "auto", 12.3)
    assert "\n" not in line
    assert line == ("geomean speedup of polyc (schedule=auto): 2.00x over numpy (3 kernels); "
                    "3.00x over source-order C at -O3 (1 kernel). 4 OK, 1 FAIL, 0 ERROR in 12 s")


def test_the_table_names_each_kernels_baseline():
    text = demo.format_table([row("a", "numpy", 1.0, 2.0), row("d", "C -O3", 4.0, 1.0)])
    header, _, first, second = text.splitlines()
    assert header.split("  ")[-1].strip() == "speedup" and "baseline  baseline ms" in header
    assert first.split()[-3:] == ["numpy", "2.000", "2.00x"]
    assert second.split()[-4:] == ["C", "-O3", "1.000", "0.25x"]


@pytest.mark.slow
def test_the_demo_verifies_and_times_in_separate_processes(capsys):
    status = demo.main(["--kernel", "matmul", "--kernel", "gemm", "--kernel", "lu", "--core-preset", "small",
                        "--polybench-preset", "MINI", "--rounds", "1", "--no-progress"])
    out = capsys.readouterr().out
    assert status == 0, out
    lines = {l.split()[0]: l for l in out.splitlines() if l.split()[:1] in (["matmul"], ["gemm"], ["lu"])}
    assert " OK " in lines["matmul"] and " numpy " in lines["matmul"]
    assert " OK " in lines["gemm"] and " numpy " in lines["gemm"]
    assert " OK " in lines["lu"] and " C -O3 " in lines["lu"]
    summary = out.strip().splitlines()[-1]
    assert "over numpy (2 kernels); " in summary and "over source-order C at -O3 (1 kernel). 3 OK, 0 FAIL" in summary
