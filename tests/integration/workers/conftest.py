"""The scale-out suite runs on the session's throwaway PostgreSQL (tests/pg.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _reap_workers() -> Iterator[None]:
    yield
    from workers_support import reap_all

    reap_all()
