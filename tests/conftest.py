"""Shared fixtures of the agac test suite.

Sections (append new fixtures under their own section header, at the end):

1. Isolation — every test runs without agac or provider settings from the
   environment; ``in_tmp_project`` gives a test its own project folder as cwd.
2. PostgreSQL — a throwaway server started once per session (tests/pg.py), a fresh
   database per test, and ``store_url`` running a test on SQLite and on PostgreSQL.
   Tests using them are marked ``postgres`` (``-m "not postgres"`` deselects them).
   Without the server binaries they skip, except in CI (env ``CI``), where they fail.
3. The emulator — one per session (``emulator_server``: 60 s batches, no latency) and
   ``emulator``: that one, reset, with every SDK pointed at it for this test. A suite
   that needs it otherwise (its clock held, another latency) builds on these.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agac.emulator.testing import RunningEmulator

# tests/ has no __init__.py, so pytest puts this folder on sys.path: pg.py imports
# as a top-level module.
from pg import PostgresServer, PostgresUnavailable, skip_or_fail, start_server

# google-auth reads NO_GCE_CHECK once, when its metadata module is first imported, and
# only the exact text "true": set for the whole process (and what it starts) before any
# test module imports it, so no test asks a metadata server.
os.environ["NO_GCE_CHECK"] = "true"

# --------------------------------------------------------------------------------------
# 1. Isolation
# --------------------------------------------------------------------------------------

#: Environment variables that change what agac does; no test sees the developer's.
PROVIDER_ENV_VARS: tuple[str, ...] = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GROQ_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GROQ_BASE_URL",
    "OLLAMA_HOST",
    "OLLAMA_API_KEY",
    "OLLAMA_WEB_SEARCH_URL",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "AZURE_OPENAI_ENDPOINT",
    "OPENAI_API_VERSION",
    "DEEPSEEK_API_KEY",
    "DEEPSEEK_BASE_URL",
    "MISTRAL_API_KEY",
    "MISTRAL_BASE_URL",
    "TOGETHER_API_KEY",
    "TOGETHER_BASE_URL",
    "OPENROUTER_API_KEY",
    "OPENROUTER_BASE_URL",
    "AWS_ENDPOINT_URL_BEDROCK",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "AWS_BEARER_TOKEN_BEDROCK",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_SERVICE_ACCOUNT",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_VERTEX_BASE_URL",
)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove ``AGAC_*`` variables and provider keys/base URLs for the test; google-auth
    never looks for a Google Cloud machine's metadata server."""
    for name in list(os.environ):
        if name.startswith("AGAC_") or name in PROVIDER_ENV_VARS:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_GCE_CHECK", "true")


@pytest.fixture
def in_tmp_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make ``tmp_path`` an agac project (an empty ``agac.yml``) and the cwd."""
    (tmp_path / "agac.yml").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --------------------------------------------------------------------------------------
# 2. PostgreSQL
# --------------------------------------------------------------------------------------

# Read at import, before the isolation fixture clears AGAC_* for each test:
#: an existing server to use instead of starting one (a database URL on it whose user
#: may create databases);
EXTERNAL_PG_URL = os.environ.get("AGAC_TEST_POSTGRES_URL") or None
#: the folder of the server binaries, instead of searching for them.
PG_BINDIR = os.environ.get("AGAC_TEST_POSTGRES_BINDIR") or None
_PG_FIXTURES = frozenset({"postgres_url", "fresh_pg_database"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests that use the PostgreSQL fixtures ``postgres``."""
    for item in items:
        if _PG_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session")
def _pg_server() -> Iterator[PostgresServer | None]:
    """The session's throwaway server; None when an external URL is given."""
    if EXTERNAL_PG_URL:
        yield None
        return
    try:
        server = start_server(PG_BINDIR)
    except PostgresUnavailable as exc:
        skip_or_fail(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(_pg_server: PostgresServer | None) -> str:
    """URL of the session's ``agac_test`` database (plain ``postgresql://`` form)."""
    if _pg_server is None:
        assert EXTERNAL_PG_URL is not None
        return EXTERNAL_PG_URL
    return _pg_server.url


@pytest.fixture
def fresh_pg_database(postgres_url: str) -> Iterator[str]:
    """URL of a new, empty database for this test only; dropped afterwards."""
    name = f"agac_t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(postgres_url, name)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store URL: once SQLite in ``tmp_path``, once a new PG database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/agac.db"
    return str(request.getfixturevalue("fresh_pg_database"))


def _with_database(url: str, database: str) -> str:
    """``url`` with its database name replaced (query string kept)."""
    base, sep, query = url.partition("?")
    head = base.rsplit("/", 1)[0]
    return f"{head}/{database}{sep}{query}"


# --------------------------------------------------------------------------------------
# 3. The emulator
# --------------------------------------------------------------------------------------


FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
"""What boto3 (Bedrock) finds in a test's environment: fake keys and a region, and no
cloud metadata service to look for — nothing leaves 127.0.0.1."""


@pytest.fixture(scope="session")
def emulator_server() -> Iterator[RunningEmulator]:
    """The session's emulator (each xdist worker has its own): batches end 60 s after
    they are created, in emulator time; answers come at once."""
    with RunningEmulator(batch_seconds=60.0) as server:
        yield server


@pytest.fixture
def emulator(
    emulator_server: RunningEmulator, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RunningEmulator]:
    """The session's emulator with no files, batches, faults or counts, and its
    environment (base URLs and dummy keys of every provider) set for this test as a
    user's shell would set it. Its clock follows the wall (rate-limit windows roll over);
    a test whose batches must not move by themselves holds it (``hold_clock``)."""
    emulator_server.reset()
    for name, value in {**emulator_server.env(), **FAKE_AWS}.items():
        monkeypatch.setenv(name, value)
    yield emulator_server
    emulator_server.reset()
