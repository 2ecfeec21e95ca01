"""Fixtures of the batch-rule suite (docs/guarantees.md, Batches, B0-B13): ``agac run`` through the official
SDKs against one emulator per session, reset before each test.

Batch time is emulator time: tests move it with ``emulator.advance(seconds)`` and never
sleep for a batch to end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agac.emulator.testing import RunningEmulator

#: How long a batch takes in emulator time from creation to its end.
BATCH_SECONDS = 60.0


@pytest.fixture
def emulator(emulator: RunningEmulator) -> RunningEmulator:
    """The session's emulator, reset, with every SDK pointed at it (tests/conftest.py), its
    clock held: a batch progresses only when the test advances it, never because the
    machine was slow (a loaded machine once saw a 60 s batch end under a slow first run)."""
    emulator.hold_clock()
    return emulator


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder (the cwd) on its own SQLite store."""
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root
