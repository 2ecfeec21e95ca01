"""The test run's throwaway PostgreSQL (tests/pg.py and the fixtures in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import pg

ROOT = Path(__file__).resolve().parents[2]


def test_server_answers_select_version(postgres_url: str) -> None:
    assert postgres_url.startswith("postgresql://postgres@127.0.0.1:")
    assert postgres_url.endswith("/agac_test")
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("select version()").fetchone()
    assert row is not None and row[0].startswith("PostgreSQL")


def test_server_runs_with_test_settings(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        settings = {
            name: conn.execute(f"show {name}").fetchone()[0]  # type: ignore[index]
            for name in ("fsync", "synchronous_commit", "full_page_writes")
        }
    assert settings == {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def test_fresh_database_is_isolated(postgres_url: str, fresh_pg_database: str) -> None:
    assert fresh_pg_database != postgres_url
    with psycopg.connect(fresh_pg_database, autocommit=True) as conn:
        conn.execute("create table only_here (id int)")
        conn.execute("insert into only_here values (1)")
    with psycopg.connect(postgres_url) as conn:
        found = conn.execute("select to_regclass('public.only_here')").fetchone()
    assert found == (None,)


def test_fresh_database_starts_empty(fresh_pg_database: str) -> None:
    with psycopg.connect(fresh_pg_database) as conn:
        tables = conn.execute(
            "select count(*) from information_schema.tables where table_schema = 'public'"
        ).fetchone()
    assert tables == (0,)


def test_no_fresh_database_outlives_its_test(postgres_url: str) -> None:
    # The isolation tests above each created one; their teardown must have dropped it.
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            "select datname from pg_database where datname like 'agac\\_t\\_%'"
        ).fetchall()
    assert rows == []


def test_store_url_gives_a_fresh_store_per_backend(store_url: str, tmp_path: Path) -> None:
    if store_url.startswith("sqlite:"):
        assert store_url == f"sqlite:///{tmp_path}/agac.db"
        assert not (tmp_path / "agac.db").exists()
    else:
        assert store_url.startswith("postgresql://postgres@127.0.0.1:")
        with psycopg.connect(store_url) as conn:
            assert conn.execute("select 1").fetchone() == (1,)


def test_postgres_tests_carry_the_postgres_marker(request: pytest.FixtureRequest) -> None:
    items = {item.name: item for item in request.session.items}
    expected = {
        "test_store_url_gives_a_fresh_store_per_backend[sqlite]": False,
        "test_store_url_gives_a_fresh_store_per_backend[postgres]": True,
        "test_server_answers_select_version": True,
        "test_fresh_database_starts_empty": True,
        "test_in_tmp_project_is_an_empty_project": False,
    }
    for name, marked in expected.items():
        if name in items:  # absent when deselected with -k/-m
            assert (items[name].get_closest_marker("postgres") is not None) is marked, name


def test_missing_binaries_skip_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no binaries"):
        pg.skip_or_fail("no binaries")


@pytest.mark.parametrize("value", ["true", "1", "yes"])
def test_missing_binaries_fail_in_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="must run, not skip"):
        pg.skip_or_fail("no binaries")


def test_ci_false_is_not_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    assert not pg.in_ci()


def test_missing_binaries_are_reported(tmp_path: Path) -> None:
    with pytest.raises(pg.PostgresUnavailable, match="install postgresql"):
        pg.start_server(str(tmp_path / "no-such-bin"))


_PROBE = "test_server_answers_select_version"


def _run_probe_without_binaries(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    """Run one PostgreSQL test in a child pytest whose binaries are "missing"."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "AGAC_TEST_POSTGRES_URL")}
    env["AGAC_TEST_POSTGRES_BINDIR"] = str(tmp_path / "no-such-bin")
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            f"{__file__}::{_PROBE}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_postgres_tests_skip_without_binaries(tmp_path: Path) -> None:
    result = _run_probe_without_binaries(tmp_path, ci=None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 skipped" in result.stdout
    assert "PostgreSQL server binaries not found" in result.stdout


def test_postgres_tests_fail_without_binaries_in_ci(tmp_path: Path) -> None:
    result = _run_probe_without_binaries(tmp_path, ci="true")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 error" in result.stdout
    assert "must run, not skip" in result.stdout


def test_server_stop_removes_its_folder() -> None:
    if pg.find_bindir() is None:
        pytest.skip("PostgreSQL server binaries not installed")
    server = pg.start_server()
    try:
        assert server.datadir.is_dir()
        assert (server.datadir / "server.log").exists()
    finally:
        server.stop()
    assert not server.base.exists()
    server.stop()  # idempotent


def test_isolation_clears_agac_and_provider_env() -> None:
    assert not [name for name in os.environ if name.startswith("AGAC_")]
    assert not {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_HOST"}.intersection(os.environ)


def test_in_tmp_project_is_an_empty_project(in_tmp_project: Path) -> None:
    assert Path.cwd() == in_tmp_project
    assert (in_tmp_project / "agac.yml").read_text() == ""
