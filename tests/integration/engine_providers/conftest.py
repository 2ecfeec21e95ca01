"""Fixtures of the end-to-end suite: ``agac run`` against one emulator per session, with a
clean slate (no faults, zeroed counters) per test (``emulator``, tests/conftest.py).

Every test runs once per online transport (P1), chosen in the project's
``agac.yml``: ``lean`` (agac's own HTTP client, the default) and ``sdk`` (the official
SDKs). Nothing is mocked: the engine calls the adapters, the adapters talk HTTP to the
emulator over loopback.
"""

from __future__ import annotations

from pathlib import Path

import e2e_support
import pytest

from agac.providers.base import TRANSPORTS


@pytest.fixture(params=TRANSPORTS)
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Path:
    """An empty project folder (the cwd) on its own SQLite store; the projects
    ``make_project`` writes in it send online calls over this test's transport."""
    monkeypatch.setattr(e2e_support, "TRANSPORT", request.param)
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root
