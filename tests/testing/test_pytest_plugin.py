"""The pytest plugin (`polyc.testing.pytest_plugin`): one line checks a kernel over sizes x
schedules x targets x dtypes; failures name the case and the first differing element.

The plugin is exercised as users meet it: a test file run by pytest in a subprocess (plugin
autoloading off and the plugin named with `-p`, so the result does not depend on whether this
checkout's entry point is installed), plus in-process checks of the case matrix."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import polyc as pc
from polyc.testing.pytest_plugin import cases, run_cases, schedule_label

ROOT = Path(__file__).resolve().parents[2]

USER_TESTS = textwrap.dedent('''
    import numpy as np
    import pytest
    import polyc as pc

    matmul = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")
    SIZES = [{"I": 7, "J": 5, "K": 6}, {"I": 1, "J": 3, "K": 2}]

    def test_fixture_all_cases(polyc_check):
        report = polyc_check(matmul, sizes=SIZES, dtypes=["f32", "f64"], targets=["c", "cuda-emu"],
                             schedules=[None, "auto", lambda k: k.schedule().tile(i=4, j=2)],
                             reference=lambda A, B, **_: A @ B)
        assert len(report.checked) == 2 * 2 * 2 * 3

    def test_fixture_wrong_reference(polyc_check):
        polyc_check(matmul, sizes=SIZES[0], schedules=[lambda k: k.schedule().interchange("i", "j")],
                    reference=lambda A, B, **_: A @ B + (np.arange(B.shape[1]) == 3))

    @pytest.mark.polyc_kernel(matmul, sizes=SIZES, schedules=[None, "auto"], dtypes="f32")
    def test_marker(polyc_case):
        assert polyc_case.kernel is matmul

    @pytest.mark.polyc_kernel(matmul, sizes={"I": 4, "J": 4, "K": 4},
                              reference=lambda A, B, **_: (A @ B).T)
    def test_marker_wrong_reference():
        pass

    @pytest.mark.polyc_kernel(matmul, sizes={"I": 4, "J": 4, "K": 4}, targets="cuda")
    def test_marker_cuda(polyc_case):
        pass
''')


@pytest.fixture(scope="module")
def junit(tmp_path_factory):
    """Run USER_TESTS under pytest with the plugin; the per-test outcomes from its JUnit XML."""
    tmp = tmp_path_factory.mktemp("plugin")
    (tmp / "test_user_kernels.py").write_text(USER_TESTS)
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "polyc.testing.pytest_plugin",
                           "-p", "no:cacheprovider", "-q", "--strict-markers", "--junitxml", str(tmp / "out.xml"),
                           "test_user_kernels.py"], cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    outcomes = {}
    for case in ET.parse(tmp / "out.xml").getroot().iter("testcase"):
        children = [c for c in case if c.tag in ("failure", "error", "skipped")]
        outcomes[case.get("name")] = (children[0].tag if children else "passed",
                                      (children[0].get("message", "") + (children[0].text or "")) if children else "")
    return proc, outcomes


def test_the_fixture_checks_every_combination_in_one_line(junit):
    proc, outcomes = junit
    assert outcomes["test_fixture_all_cases"][0] == "passed", proc.stdout[-3000:]


def test_the_marker_makes_one_test_per_case_with_readable_ids(junit):
    _, outcomes = junit
    marked = sorted(n for n in outcomes if n.startswith("test_marker["))
    assert marked == ["test_marker[c-auto-f32-I=1,J=3,K=2]", "test_marker[c-auto-f32-I=7,J=5,K=6]",
                      "test_marker[c-source-f32-I=1,J=3,K=2]", "test_marker[c-source-f32-I=7,J=5,K=6]"]
    assert all(outcomes[n][0] == "passed" for n in marked)


def test_a_failure_names_schedule_sizes_and_first_differing_element(junit):
    _, outcomes = junit
    kind, text = outcomes["test_fixture_wrong_reference"]
    assert kind == "failure"
    assert "1 of 1 cases differ" in text
    assert "schedule interchange('i', 'j'), target c, dtype f64, sizes I=7, J=5, K=6" in text
    assert "C (float64): 7 of 35 elements differ" in text and "first at (0, 3)" in text
    kind, text = outcomes["test_marker_wrong_reference[c-source-f64-I=4,J=4,K=4]"]
    assert kind == "failure"
    assert "matmul: schedule source, target c, dtype f64, sizes I=4, J=4, K=4" in text
    assert "first at (0, 1)" in text


def test_an_unavailable_target_skips_with_the_reason(junit):
    _, outcomes = junit
    (name,) = [n for n in outcomes if n.startswith("test_marker_cuda[")]
    try:
        pc.compile(pc.kernel("y[i] = x[i]", name="probe"), target="cuda")
        available = True
    except pc.TargetUnavailableError:
        available = False
    assert outcomes[name][0] == ("passed" if available else "skipped")
    if not available:
        assert "target cuda" in outcomes[name][1]


def test_the_entry_point_is_declared_under_the_module_name():
    import tomllib
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["entry-points"]["pytest11"] == {"polyc.testing.pytest_plugin": "polyc.testing.pytest_plugin"}


# -- in process: the case matrix --------------------------------------------------------------

MV = pc.kernel("y[i] +=! A[i, j] * x[j]", name="mv_plugin")


def test_cases_is_the_product_and_single_values_count_as_lists():
    found = cases(MV, sizes=[{"I": 3, "J": 4}, {"I": 5, "J": 1}], schedules="auto", targets=["c", "cuda-emu"],
                  dtypes="f32")
    assert [c.id for c in found] == ["c-auto-f32-I=3,J=4", "c-auto-f32-I=5,J=1",
                                     "cuda-emu-auto-f32-I=3,J=4", "cuda-emu-auto-f32-I=5,J=1"]
    s = MV.schedule().split("i", 2)
    assert schedule_label(s) == "split('i', 2)" and schedule_label(None) == "source"
    with pytest.raises(ValueError, match="at least one"):
        cases(MV, targets=[])


def test_run_cases_reports_every_failing_case_not_only_the_first():
    def wrong(A, x, **_):
        return A @ x + 1.0

    with pytest.raises(AssertionError) as err:
        run_cases(cases(MV, sizes=[{"I": 3, "J": 4}, {"I": 2, "J": 2}], reference=wrong))
    text = str(err.value)
    assert text.startswith("2 of 2 cases differ")
    assert "sizes I=3, J=4" in text and "sizes I=2, J=2" in text
    report = run_cases(cases(MV, sizes={"I": 3, "J": 4}, dtypes=["f32", "f64"],
                             reference=lambda A, x, **_: A @ x))
    assert len(report.checked) == 2 and not report.skipped
