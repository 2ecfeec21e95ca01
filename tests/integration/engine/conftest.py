"""Fixtures for engine tests: a throwaway project whose store is SQLite or PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import BASIC, rows

from agac.testing import write_project


@pytest.fixture
def project(tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder (cwd) whose store is ``store_url`` (SQLite or PostgreSQL)."""
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("AGAC_STORE", store_url)
    return root


@pytest.fixture
def sqlite_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project on the default SQLite store under .agac/ (for subprocess crash tests)."""
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def make() -> Callable[..., Path]:
    def _make(root: Path, workflow: str = BASIC, **kwargs: Any) -> Path:
        kwargs.setdefault("data", {"data/a.jsonl": rows(20)})
        return write_project(root, workflow, **kwargs)

    return _make

