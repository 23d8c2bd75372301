"""The `polyc` command line: codegen, dependences, outline and the cache, on kernel files."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import polyc as pc
from polyc.cli import main, parse_chain

ROOT = Path(__file__).resolve().parents[2]

KERNELS_PY = textwrap.dedent('''
    import polyc as pc

    matmul = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")

    @pc.kernel
    def shift(A: pc.f64["N"], B: pc.f64["N"]):
        for i in range(N - 1):
            B[i] = A[i + 1]
''')


@pytest.fixture
def files(tmp_path):
    (tmp_path / "kernels.py").write_text(KERNELS_PY)
    (tmp_path / "matvec.tc").write_text("y[i] +=! A[i, j] * x[j]\n")
    (tmp_path / "broken.tc").write_text("y[i] +=! A[i, j] * )\n")
    return tmp_path


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_codegen_prints_the_c_of_the_schedule_given_as_a_primitive_chain(files, capsys):
    status, out, err = run(capsys, "codegen", f"{files}/kernels.py::matmul",
                           "--schedule", "tile(i=32, j=32).parallel('i_outer')")
    assert status == 0, err
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")
    expected = pc.codegen(mm, mm.schedule().tile(i=32, j=32).parallel("i_outer"))
    assert out == expected.rstrip("\n") + "\n"
    assert "#pragma omp parallel for" in out or "omp parallel" in out


def test_codegen_of_an_einstein_text_file_for_cuda_in_f64(files, capsys):
    status, out, _ = run(capsys, "codegen", files / "matvec.tc", "--target", "cuda", "--dtype", "f64")
    assert status == 0
    assert "__global__" in out and "double *__restrict__ d_y" in out


def test_dependences_and_outline(files, capsys):
    status, out, _ = run(capsys, "dependences", files / "matvec.tc")
    assert status == 0
    assert "S1[i, j] -> S1[i' = i, j' = 1 + j]" in out and "on y (flow), distance (0, 1)" in out
    status, out, _ = run(capsys, "outline", f"{files}/kernels.py::matmul", "-s", "interchange('i', 'k')")
    assert status == 0
    assert out.splitlines()[0] == "Schedule of matmul: interchange('i', 'k')"
    assert "  for k\n    for j\n      for i\n        S1: C[i, j] += A[i, k] * B[k, j]" in out
    status, out, _ = run(capsys, "outline", f"{files}/kernels.py::shift")   # source order by default
    assert status == 0 and "for i" in out and "S0: B[i] = A[i + 1]" in out


def test_a_schedule_json_file_is_accepted(files, capsys):
    mm = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")
    (files / "s.json").write_text(mm.schedule().tile(i=8).to_json())
    status, out, _ = run(capsys, "outline", f"{files}/kernels.py::matmul", "-s", files / "s.json")
    assert status == 0 and "i_outer" in out and "i_inner" in out


def test_errors_are_messages_with_exit_status_not_tracebacks(files, capsys):
    status, out, err = run(capsys, "codegen", f"{files}/kernels.py::matmul", "-s", "parallel('k')")
    assert (status, out) == (1, "")
    assert err.startswith("polyc codegen: IllegalScheduleError: parallel('k') is illegal")
    status, _, err = run(capsys, "deps", files / "broken.tc")
    assert status == 1 and f"ParseError: {files / 'broken.tc'}:1:" in err
    status, _, err = run(capsys, "codegen", files / "kernels.py")
    assert status == 2 and "defines several kernels (matmul, shift); pick one with" in err
    status, _, err = run(capsys, "codegen", f"{files}/kernels.py::nope")
    assert status == 2 and "has no kernel 'nope'; it defines matmul, shift" in err
    status, _, err = run(capsys, "outline", f"{files}/kernels.py::matmul", "-s", "tile(i=size)")
    assert status == 2 and "must be literals" in err
    status, _, err = run(capsys, "outline", f"{files}/kernels.py::matmul", "-s", "__init__()")
    assert status == 2 and "not a schedule primitive" in err
    # Only the registry's primitives: an unproven mark (a data race on k) is no primitive.
    status, _, err = run(capsys, "codegen", f"{files}/kernels.py::matmul", "-s", "with_mark('k', 'parallel', 'x')")
    assert status == 2 and "not a schedule primitive" in err
    status, _, err = run(capsys, "deps", files / "missing.py")
    assert status == 2 and "no such kernel file" in err
    (files / "raises.py").write_text("import polyc as pc\n\nimport not_a_module_anywhere\n")
    status, _, err = run(capsys, "deps", files / "raises.py")
    assert status == 2
    assert err == (f"polyc deps: running {files / 'raises.py'} failed at line 3: ModuleNotFoundError: "
                   f"No module named 'not_a_module_anywhere'\n")


def test_files_that_are_not_utf8_and_unreadable_chains_are_one_line_errors(files, capsys):
    (files / "latin.tc").write_bytes("y[i] +=! A[i, j] * x[j]  # caf\xe9\n".encode("latin-1"))
    status, _, err = run(capsys, "codegen", files / "latin.tc")
    assert status == 2 and err.startswith("polyc codegen: the kernel file") and "is not UTF-8" in err
    (files / "sched.json").write_bytes(b"\xff\xfe{}")
    status, _, err = run(capsys, "codegen", files / "matvec.tc", "-s", files / "sched.json")
    assert status == 2 and "the schedule file" in err and "is not UTF-8" in err
    (files / "target.json").write_bytes(b"\xff{}")
    status, _, err = run(capsys, "codegen", files / "matvec.tc", "-t", files / "target.json")
    assert status == 2 and "the target file" in err and "is not UTF-8" in err
    status, _, err = run(capsys, "outline", f"{files}/kernels.py::matmul", "-s", "tile(i=4)" + ".tile(i=4)" * 3000)
    assert status == 2 and "too long to read" in err and "Traceback" not in err
    status, _, err = run(capsys, "outline", f"{files}/kernels.py::matmul", "-s", "tile(**{'i': 4})")
    assert status == 2 and "without * or **" in err


def test_parse_chain_reads_what_to_text_prints():
    assert parse_chain("matmul.schedule().tile(i=32, j=4).parallel('i_outer')") == [
        ("tile", (), {"i": 32, "j": 4}), ("parallel", ("i_outer",), {})]
    assert parse_chain(".unroll('k', factor=2)") == [("unroll", ("k",), {"factor": 2})]


def test_cache_info_and_clear_touch_only_cache_files(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    monkeypatch.setenv("POLYC_CACHE_DIR", str(cache))
    cache.mkdir()
    (cache / "notes.txt").write_text("not polyc's")
    f = pc.compile(pc.kernel("y[i] = x[i] * 2", name="cli_cache_probe"))
    np.testing.assert_array_equal(f(x=np.arange(3.0)), [0.0, 2.0, 4.0])
    status, out, _ = run(capsys, "cache", "info")
    assert status == 0
    assert f"cache directory: {cache} (from POLYC_CACHE_DIR)" in out
    assert "compiled kernels: 1\nsize: " in out
    status, out, _ = run(capsys, "cache", "clear")
    # the library, its C source and its checksum
    assert status == 0 and out.strip() == f"removed 3 files from {cache}"
    assert sorted(p.name for p in cache.iterdir()) == ["notes.txt"]
    status, out, _ = run(capsys, "cache", "info")
    assert "compiled kernels: 0\nsize: 0 bytes" in out


def test_python_dash_m_polyc_runs_the_command_line(files):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "polyc", "outline", f"{files}/kernels.py::matmul"],
                          capture_output=True, text=True, env=env, cwd=files, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Schedule of matmul: source order")


def test_the_polyc_script_is_declared():
    import tomllib
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["scripts"] == {"polyc": "polyc.cli:main"}


def test_kernels_that_share_a_name_are_told_apart_by_their_variables(tmp_path, capsys):
    (tmp_path / "two.py").write_text(textwrap.dedent('''
        import polyc as pc
        a = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]")      # both named "kernel"
        b = pc.kernel("y[i] = x[i] * 2.0")
        mm = pc.kernel("z[i] = x[i] + 1.0", name="plus")
    '''))
    status, _, err = run(capsys, "outline", tmp_path / "two.py")
    assert status == 2 and "defines several kernels (a, b, plus)" in err
    status, out, _ = run(capsys, "outline", f"{tmp_path}/two.py::b")
    assert status == 0 and "y[i] = x[i] * 2.0" in out
    status, _, err = run(capsys, "outline", f"{tmp_path}/two.py::kernel")
    assert status == 2 and "has 2 kernels named 'kernel' (a, b); pick one by its variable" in err
    for name in ("plus", "mm"):      # its kernel name, and its variable's
        status, out, _ = run(capsys, "outline", f"{tmp_path}/two.py::{name}")
        assert status == 0 and "z[i] = x[i] + 1.0" in out


def test_a_kernel_file_that_exits_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "bye.py").write_text("import sys\nsys.exit(3)\n")
    status, _, err = run(capsys, "outline", tmp_path / "bye.py")
    assert status == 2 and "running" in err and "line 2" in err and "exit(3)" in err


def test_dtype_names_must_be_tensors_of_the_kernel(files, capsys):
    status, out, _ = run(capsys, "codegen", files / "matvec.tc", "--dtype", "A=f64,x=f64,y=f64")
    assert status == 0 and "double *restrict d_A" in out
    status, _, err = run(capsys, "codegen", files / "matvec.tc", "--dtype", "A=f64,Z=f32")
    assert status == 2 and "--dtype names 'Z', which is not a tensor of kernel matvec (tensors: " in err
    status, _, err = run(capsys, "codegen", files / "matvec.tc", "--dtype", "A=f64,A=f32")
    assert status == 2 and "--dtype gives A twice, as f64 and as f32" in err
    status, _, err = run(capsys, "codegen", f"{files}/kernels.py::shift", "--dtype", "A=f32")
    assert status == 2 and "--dtype gives A as f32, but kernel shift declares it f64" in err


def test_outline_on_a_cuda_target_shows_the_mapping_codegen_prints(files, capsys):
    status, out, _ = run(capsys, "outline", files / "matvec.tc", "--target", "cuda", "--schedule", "auto")
    assert status == 0 and "[block]" in out and "[thread]" in out
    status, out, _ = run(capsys, "outline", files / "matvec.tc", "--target", "cuda")
    assert status == 0 and "[block]" in out


def test_a_target_file_that_is_a_pipe_or_a_directory_is_refused_not_waited_on(files, capsys):
    fifo = files / "target.json"
    os.mkfifo(fifo)
    (files / "dir.json").mkdir()
    for spec in (fifo, files / "dir.json"):
        status, out, err = run(capsys, "outline", f"{files}/kernels.py::matmul", "--target", spec)
        assert status != 0 and "is not a regular file" in err


def test_cache_commands_refuse_a_directory_polyc_does_not_use(tmp_path, monkeypatch, capsys):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)                 # others could plant libraries: polyc falls back
    monkeypatch.setenv("POLYC_CACHE_DIR", str(shared))
    for action in ("info", "clear"):
        status, out, err = run(capsys, "cache", action)
        assert status != 0 and "can be written by other users" in err and "keeps no cache there" in err
        assert "Warning" not in err


def test_schedule_tuned_falls_back_to_auto_with_the_warning_as_a_line_of_its_own(files, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("POLYC_TUNE_DB", str(tmp_path / "empty.sqlite"))
    status, out, err = run(capsys, "outline", files / "matvec.tc", "-s", "tuned")
    assert status == 0 and "auto(" in out
    assert "polyc outline: warning: TuningWarning: schedule='tuned': no tuning record of matvec" in err


def test_a_kernel_file_that_is_a_folder_or_a_pipe_says_so(files, capsys):
    (files / "folder.tc").mkdir()
    os.mkfifo(files / "pipe.tc")
    for name in ("folder.tc", "pipe.tc"):
        status, _, err = run(capsys, "deps", files / name)
        assert status == 2 and "is not a regular file" in err and "standard input" in err, err


def test_an_oversized_file_is_refused_before_it_is_read_whole(files, capsys, monkeypatch):
    import polyc.cli as cli
    monkeypatch.setattr(cli, "MAX_FILE_CHARS", 1000)
    (files / "big.tc").write_text("y[i] +=! A[i, j] * x[j]\n" + "#" * 2000 + "\n")
    status, _, err = run(capsys, "deps", files / "big.tc")
    assert status == 2 and "longer than 1000 characters" in err, err
