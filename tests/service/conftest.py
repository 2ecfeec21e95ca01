"""Fixtures of the service tests (see service_support.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from service_support import Service, running_service, team_project

from agac import api


@pytest.fixture
def team(tmp_path: Path) -> Path:
    """A team project (identity: login; ann, bob, eve) whose run waits on two approvals."""
    root = team_project(tmp_path / "team")
    result = api.run("replies", root)
    assert result.exit_code == 75, result.summary
    return root


@pytest.fixture
def service(team: Path) -> Iterator[Service]:
    with running_service(team) as svc:
        yield svc
