"""Fixtures of the end-to-end suite: ``agac run`` through the official SDKs against one
emulator per session, with a clean slate (no faults, zeroed counters) per test.

Nothing is mocked: the engine calls the adapters, the adapters call their SDKs, and the
SDKs talk HTTP to the emulator over loopback.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def emulator_server() -> Iterator[Any]:
    testing = pytest.importorskip("agac.emulator.testing")
    with testing.RunningEmulator() as server:
        yield server


@pytest.fixture
def emulator(emulator_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The session's emulator, reset, with its environment (base URLs and dummy keys of
    all five providers) set for this test as a user's shell would set it."""
    emulator_server.reset()
    for name, value in emulator_server.env().items():
        monkeypatch.setenv(name, value)
    yield emulator_server
    emulator_server.reset()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder (the cwd) on its own SQLite store."""
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root
