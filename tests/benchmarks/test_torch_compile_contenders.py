"""`torch.compile` as a contender in `benchmarks.cpu` and `benchmarks.grad` (issue 16): its column
and ratio in each table, its compilation outside timing, and a readable FAILED line where it cannot
compile."""
from __future__ import annotations

import json

import pytest

from benchmarks import _harness as H
from benchmarks import cpu, grad

# importing torch in this process warns about its own deprecated torch.jit internals
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")


def result(name: str, seconds: float, ok: bool = True, info=None) -> H.Result:
    return H.Result(name, "bench", ok, samples=[seconds] if ok else [], info=info,
                    error="" if ok else "TorchCompileFailed: InvalidCxxCompiler: no compiler\ntrace")


def cell(header, row, column):
    return row[header.index(column)]


# -- fast: table rows from given results, and the failure reason -----------------------------------

def test_cpu_row_has_the_torch_compile_time_and_its_ratio_to_polyc_auto():
    res = [result("polyc-auto", 0.002, info={"max_rel_err": 1e-7}), result("numpy", 0.004),
           result("torch", 0.003), result("torch.compile", 0.005), result("naive-C", 0.010)]
    row = cpu.table_row("softmax", 1, res)
    assert len(row) == len(cpu.HEADER)
    assert cell(cpu.HEADER, row, "torch.compile") == "5.0 ms"
    assert cell(cpu.HEADER, row, "vs compile") == pytest.approx(2.5)  # compile time / auto time
    assert cell(cpu.HEADER, row, "vs torch") == pytest.approx(1.5)
    assert cell(cpu.HEADER, row, "vs BLAS") == pytest.approx(2.0)
    assert cell(cpu.HEADER, row, "vs naive") == pytest.approx(5.0)
    assert cell(cpu.HEADER, row, "ordered") == "-"  # not run


def test_cpu_row_marks_a_failed_torch_compile_and_keeps_the_other_columns():
    res = [result("polyc-auto", 0.002), result("numpy", 0.004), result("torch.compile", 0, ok=False)]
    row = cpu.table_row("softmax", 2, res)
    assert cell(cpu.HEADER, row, "torch.compile") == "FAILED"
    assert cell(cpu.HEADER, row, "vs compile") != cell(cpu.HEADER, row, "vs compile")  # nan, printed "-"
    assert cell(cpu.HEADER, row, "vs BLAS") == pytest.approx(2.0)
    table = H.format_table(cpu.HEADER, [row])
    assert "FAILED" in table and "2.00" in table


def test_grad_row_has_the_torch_compile_forward_and_backward_and_its_ratio():
    res = [result("polyc", 0.001, info={"max_rel_err": 2e-7}), result("torch bwd", 0.002),
           result("torch f+b", 0.003), result("torch.compile f+b", 0.004)]
    row = grad.table_row("softmax", 1, res)
    assert len(row) == len(grad.HEADER)
    assert cell(grad.HEADER, row, "torch.compile f+b") == "4.0 ms"
    assert cell(grad.HEADER, row, "vs compile") == pytest.approx(4.0)
    assert cell(grad.HEADER, row, "vs f+b") == pytest.approx(3.0)
    assert cell(grad.HEADER, row, "max err") == "2.0e-07"
    failed = grad.table_row("softmax", 1, res[:3] + [result("torch.compile f+b", 0, ok=False)])
    assert cell(grad.HEADER, failed, "torch.compile f+b") == "FAILED"


def test_grad_row_compares_the_saved_gradient_with_torchs_backward():
    res = [result("polyc", 0.004, info={"max_rel_err": 2e-7}), result("polyc saved", 0.001, info={"max_rel_err": 3e-7}),
           result("torch bwd", 0.002)]
    row = grad.table_row("softmax", 1, res)
    assert cell(grad.HEADER, row, "polyc saved") == "1.0 ms"
    assert cell(grad.HEADER, row, "saved vs bwd") == pytest.approx(2.0)
    assert cell(grad.HEADER, row, "vs bwd") == pytest.approx(0.5)
    assert cell(grad.HEADER, row, "max err") == "3.0e-07"     # the worse of the two
    plain = grad.table_row("matmul 512", 1, res[:1] + res[2:])
    assert cell(grad.HEADER, plain, "polyc saved") == "-"


def test_grad_saved_worker_takes_the_forwards_values_and_computes_the_same_gradient():
    plain = grad.setup_polyc("softmax 2048x2048", small=True)
    kept = grad.setup_polyc("softmax 2048x2048", small=True, saved=True)
    import numpy as np
    np.testing.assert_allclose(kept["run"](), plain["run"](), rtol=1e-4, atol=1e-7)
    assert kept["check"]().get("max_rel_err", 0.0) < 1e-5    # against torch autograd, where importable


def test_root_reason_names_the_innermost_cause_by_its_first_line():
    class BackendFailed(Exception):
        def __init__(self, inner):
            super().__init__("backend='inductor' raised:\n" + str(inner))
            self.inner_exception = inner

    root = ValueError("No working C++ compiler found\nsecond line")
    try:
        try:
            raise BackendFailed(root)
        except BackendFailed as e:
            raise RuntimeError("while compiling") from e
    except RuntimeError as outer:
        assert H.root_reason(outer) == "ValueError: No working C++ compiler found"
    assert H.root_reason(KeyError()) == "KeyError"


def test_a_failure_to_compile_is_raised_as_torch_compile_failed_with_its_reason():
    pytest.importorskip("torch")

    def warm_up(f):
        raise RuntimeError("outer") from OSError("g++: not found")

    with pytest.raises(H.TorchCompileFailed, match=r"^OSError: g\+\+: not found$"):
        H.torch_compile(lambda x: x + 1, warm_up)


# -- end to end, tiny sizes and one round: each worker compiles in its own process -------------------

def written_table(tmp_path, name):
    """The table a benchmark wrote to its results file, as {column: cell} of its one row."""
    (path,) = tmp_path.glob(f"{name}-*.json")
    table = json.loads(path.read_text())["table"]
    (row,) = table["rows"]
    return dict(zip(table["header"], row))


@pytest.mark.parametrize("script, name, compile_column", [(cpu, "cpu", "torch.compile"),
                                                         (grad, "grad", "torch.compile f+b")])
def test_the_benchmark_times_torch_compile_beside_polyc(script, name, compile_column, capsys, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(H, "RESULTS", tmp_path)
    assert script.main(["--small", "--only", "softmax", "--threads", "1", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "FAILED" not in out, out
    header = next(line for line in out.splitlines() if line.startswith(script.HEADER[0]))
    assert compile_column in header and "vs compile" in header
    row = written_table(tmp_path, name)
    assert row[compile_column].endswith(("us", "ms")) and row["vs compile"] > 0
    assert float(row["max err"]) < 1e-4  # polyc's result agreed with its reference before timing


@pytest.mark.slow
def test_a_torch_compile_that_cannot_compile_is_reported_and_the_table_still_prints(capsys, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(H, "RESULTS", tmp_path)
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-c++"))  # inductor's compiler; polyc uses its own
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # no cached kernel to reuse
    assert cpu.main(["--small", "--only", "softmax", "--threads", "1", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "softmax 4096x4096 f32 1t torch.compile FAILED: TorchCompileFailed: InvalidCxxCompiler" in out, out
    row = next(line for line in out.splitlines() if line.startswith("softmax"))
    assert "FAILED" in row and "e-" in row.split()[-1]  # the rest of the row, max err included
