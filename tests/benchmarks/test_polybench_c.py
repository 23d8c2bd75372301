"""`benchmarks.polybench_c`: PolyBench/C's own programs as a contender, built from a copy the user
names, at the preset's sizes, timed by their own timer (the harness's self-timed contenders).

No PolyBench/C sources are part of polyc, so these tests build a stand-in copy with PolyBench's
layout: `utilities/polybench.c` and one kernel `medley/toy/toy.c` that prints its size and a time.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import _harness as H
from benchmarks import polybench_c as PBC

TOY = r"""
#include <stdio.h>
#ifndef N
#  ifdef MINI_DATASET
#    define N 3
#  endif
#endif
int main(void) {
  /* a PolyBench program under -DPOLYBENCH_TIME prints the kernel's seconds last */
  fprintf(stderr, "N=%d\n", N);
  printf("%0.6f\n", 0.000125 * N);
  return 0;
}
"""


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    (tmp_path / "utilities").mkdir()
    (tmp_path / "utilities" / "polybench.c").write_text("int polybench_stub;\n")
    (tmp_path / "medley" / "toy").mkdir(parents=True)
    (tmp_path / "medley" / "toy" / "toy.c").write_text(TOY)
    return tmp_path


def test_the_root_comes_from_the_option_or_the_environment(copy, monkeypatch, tmp_path):
    monkeypatch.delenv(PBC.ENV_VAR, raising=False)
    assert PBC.source_root(None) is None
    assert PBC.source_root(str(copy)) == copy.resolve()
    monkeypatch.setenv(PBC.ENV_VAR, str(copy))
    assert PBC.source_root(None) == copy.resolve()
    with pytest.raises(PBC.PolyBenchSourceError, match="no utilities/polybench.c"):
        PBC.source_root(str(tmp_path / "medley"))


def test_build_uses_o3_native_the_preset_and_its_sizes(copy):
    cmd = PBC.build_command(copy, "toy", "LARGE", {"N": 40, "TSTEPS": 7}, Path("/tmp/x"))
    assert cmd[:3] == ["gcc", "-O3", "-march=native"]
    assert {"-DPOLYBENCH_TIME", "-DLARGE_DATASET", "-DN=40", "-DTSTEPS=7"} <= set(cmd)
    assert str(copy / "medley" / "toy" / "toy.c") in cmd
    with pytest.raises(PBC.PolyBenchSourceError, match="no gemm/gemm.c"):
        PBC.kernel_source(copy, "gemm")


def test_the_program_is_timed_by_its_own_timer_in_its_own_process(copy):
    program = PBC.build(copy, "toy", "MINI", {"N": 8})   # the preset's sizes win over the header's
    assert PBC.run_program(program) == pytest.approx(0.001)
    res, = H.measure([H.Contender("pbc", "benchmarks.polybench_c:setup",
                                  dict(kernel="toy", preset="MINI", sizes={"N": 8}, root=str(copy)))],
                     rounds=2, min_sample_s=0.0, max_calls=1, pause_s=0.0, progress=False)
    assert res.ok, res.error
    assert res.samples == [pytest.approx(0.001), pytest.approx(0.001)]  # not the process's run time


def test_a_copy_that_does_not_build_is_reported(copy):
    (copy / "medley" / "toy" / "toy.c").write_text("this is not C\n")
    with pytest.raises(PBC.PolyBenchSourceError, match="building PolyBench's toy failed"):
        PBC.build(copy, "toy", "SMALL", {"N": 9})
