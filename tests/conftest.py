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
