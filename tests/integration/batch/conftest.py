"""Fixtures of the batch-rule suite (docs/guarantees.md, Batches, B0-B13): ``agac run`` through the official
SDKs against one emulator per session, reset before each test.

Batch time is emulator time: tests move it with ``emulator.advance(seconds)`` and never
sleep for a batch to end.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agac.emulator.testing import RunningEmulator

#: How long a batch takes in emulator time from creation to its end.
BATCH_SECONDS = 60.0


@pytest.fixture(scope="session")
def emulator_server() -> Iterator[RunningEmulator]:
    with RunningEmulator(batch_seconds=BATCH_SECONDS) as server:
        yield server


@pytest.fixture
def emulator(
    emulator_server: RunningEmulator, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RunningEmulator]:
    """The session's emulator, reset, with every SDK pointed at it for this test. Its clock
    is held: a batch progresses only when the test advances it, never because the machine
    was slow (a loaded machine once saw a 60 s batch end under a slow first run)."""
    emulator_server.reset()
    emulator_server.hold_clock()
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
