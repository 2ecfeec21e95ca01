"""Fixtures for engine tests: a throwaway project whose store is SQLite or PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import BASIC, rows

from agac.store.repository import Store
from agac.testing import ManualClock, write_project


@pytest.fixture
def project(tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder (cwd) whose store is ``store_url`` (SQLite or PostgreSQL)."""
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("AGAC_STORE", store_url)
    return root


@pytest.fixture
def clocked(project: Path, store_url: str) -> Iterator[tuple[ManualClock, Store]]:
    """A store handle on the project's store whose clock a test moves (leases, expiry,
    deadlines), for the API calls that take ``store=``."""
    clock = ManualClock()
    store = Store(store_url, clock=clock)
    try:
        yield clock, store
    finally:
        store.close()


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
