"""Every tutorial notebook runs top to bottom without an error (the cells `assert` their results).

Notebooks are stored without outputs; each one is executed here in a fresh kernel whose working
directory is the repository root, so `import polyc` and `import kernels` work as in a checkout.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import ipykernel  # noqa: F401  (the test extra installs all three: a missing one is an error)
import nbclient
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: Seconds any one cell may take.
CELL_TIMEOUT = 120
#: Notebooks that take longer than ~30 s; run with the slow tests.
SLOW: set = set()


def _kernel_manager_class():
    """A kernel manager that always starts the kernel with this interpreter (the test's venv),
    whatever `python3` kernel specs the machine has installed."""
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import KernelManager

    class ThisPythonKernelManager(KernelManager):
        @property
        def kernel_spec(self):
            return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                              display_name="polyc tests", language="python", resource_dir=str(ROOT))

    return ThisPythonKernelManager


def _params():
    for path in NOTEBOOKS:
        marks = [pytest.mark.slow] if path.stem in SLOW else []
        yield pytest.param(path, id=path.stem, marks=marks)


def test_there_are_tutorial_notebooks():
    names = {p.stem for p in NOTEBOOKS}
    assert {"01_quickstart", "02_dependences_and_legality", "03_scheduling_matmul",
            "04_stencils_and_time_tiling", "05_cuda", "06_kernel_unit_tests"} <= names


@pytest.mark.parametrize("path", list(_params()))
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: clear outputs"


@pytest.mark.parametrize("path", list(_params()))
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("MPLBACKEND", "Agg")
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    client = nbclient.NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", allow_errors=False,
        kernel_manager_class=_kernel_manager_class(),
        resources={"metadata": {"path": str(ROOT)}})
    try:
        client.execute(env=env)
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"{path.name}: a cell failed:\n{e}", pytrace=False)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
