"""Fixtures shared by several test groups."""
from __future__ import annotations

import subprocess

import pytest

from polyc.runtime import compiler as compiler_module


@pytest.fixture
def compile_counter(monkeypatch):
    """The real compiler invocations of the test (not `--version` queries), as command lists."""
    calls = []
    real_run = subprocess.run

    def counting_run(command, *args, **kwargs):
        if "-o" in command:
            calls.append(command)
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(compiler_module.subprocess, "run", counting_run)
    return calls


@pytest.fixture(params=["1", "2"])
def threads(request, monkeypatch):
    """The test runs twice, with OpenMP on one thread and on two (`OMP_NUM_THREADS`): the packed
    and parallel paths split work differently, and both must give the same result."""
    monkeypatch.setenv("OMP_NUM_THREADS", request.param)
    return request.param
