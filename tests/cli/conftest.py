"""Fixtures of the CLI tests: run the real ``agac`` console script in a subprocess.

Every call gets a clean environment (no ``AGAC_*`` settings or provider keys from the
developer's shell) plus whatever the test adds, its own working directory, and a
timeout. ``quickstart`` is one project made by ``agac init`` and run once, shared by
the read-only tests of a module; ``emulator`` is the session's provider emulator, reset
for the test (tests/conftest.py; a module with other needs defines its own).
"""

from __future__ import annotations

import pytest
from cli_support import Quickstart, agac, clean_env, spawn  # noqa: F401 - re-exported


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Quickstart:
    base = tmp_path_factory.mktemp("quickstart")
    made = agac("init", "proj", "--example", "quickstart", cwd=base)
    assert made.code == 0, made
    root = base / "proj"
    first = agac("run", "review_triage", "--json", cwd=root)
    assert first.code == 0, first
    return Quickstart(root, first)
