"""Tuning tests use a private record database per test (POLYC_TUNE_DB) and small sizes."""
from __future__ import annotations

import pytest


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "tune.sqlite"
    monkeypatch.setenv("POLYC_TUNE_DB", str(path))
    return path
