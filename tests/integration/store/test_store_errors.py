"""Driver errors leave the store as StoreError in the driver's words, with the store and
the fix — never the SQL statement or its bound values (record data may be in them)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from agac.errors import StoreError
from agac.store.database import DriverFailure, display_url
from agac.store.repository import Store
from agac.store.values import RunSettings

SECRET = "secret-value-4242"


def test_driver_errors_carry_no_sql_or_values(store_url: str) -> None:
    store = Store(store_url)
    try:
        statement = (
            "SELECT CAST(:v AS integer) AS n FROM runs"
            if store.dialect == "postgresql"
            else "INSERT INTO no_such_table (x) VALUES (:v)"
        )
        with pytest.raises(DriverFailure) as info, store.engine.begin() as conn:
            conn.execute(sa.text(statement), {"v": SECRET})
        message = f"{info.value.message} {info.value.hint}"
        assert SECRET not in message
        assert "SELECT" not in message and "INSERT" not in message and "[SQL" not in message
        assert f"(store {display_url(store_url)})" in info.value.message
        assert isinstance(info.value, StoreError) and info.value.exit_code == 1
    finally:
        store.close()


def test_guarded_write_says_what_failed_without_the_statement(store_url: str) -> None:
    store = Store(store_url)
    try:
        store.create_run(
            id="r1",
            workflow="wf",
            workflow_path="wf.yml",
            retry_of=None,
            config={},
            config_hash="h",
            snapshot_id="s",
            fresh=False,
            settings=RunSettings(),
            tenant="default",
        )
        with pytest.raises(StoreError) as info:
            store.create_run(
                id="r1",
                workflow=SECRET,
                workflow_path="wf.yml",
                retry_of=None,
                config={},
                config_hash="h",
                snapshot_id="s",
                fresh=False,
                settings=RunSettings(),
                tenant="default",
            )
        assert SECRET not in info.value.message and "INSERT" not in info.value.message
    finally:
        store.close()


def test_display_url_hides_the_password() -> None:
    assert (
        display_url("postgresql://ann:hunter2@db:5432/agac")
        == "postgresql+psycopg://ann:***@db:5432/agac"
    )
    assert display_url("sqlite:////var/agac/agac.db") == "/var/agac/agac.db"
    assert display_url("memory") == "memory"
