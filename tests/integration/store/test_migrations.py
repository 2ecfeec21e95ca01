"""The migrated schema equals the declared tables, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from agac.errors import StoreError
from agac.store.database import HEAD_REVISION, create_store_engine, current_revision, upgrade
from agac.store.tables import metadata


def test_migrations_produce_exactly_the_declared_tables(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        # force: replay every migration through Alembic, also where a brand-new SQLite
        # store would otherwise be created from the declared tables directly.
        assert upgrade(engine, force=True) == HEAD_REVISION
        with engine.connect() as conn:
            diff = compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": True}), metadata
            )
        assert diff == []
        tables = set(sa.inspect(engine).get_table_names())
        assert tables == set(metadata.tables) | {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_is_idempotent_and_concurrent_first_use_migrates_once(store_url: str) -> None:
    errors: list[BaseException] = []

    def first_use() -> None:
        engine = create_store_engine(store_url)
        try:
            upgrade(engine)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=first_use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    engine = create_store_engine(store_url)
    try:
        assert current_revision(engine) == HEAD_REVISION
        assert upgrade(engine) == HEAD_REVISION
    finally:
        engine.dispose()


def _schema(engine: sa.engine.Engine) -> dict[str, object]:
    insp = sa.inspect(engine)
    out: dict[str, object] = {}
    for name in sorted(insp.get_table_names()):
        out[name] = {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"], c.get("default"))
                for c in insp.get_columns(name)
            ],
            "pk": insp.get_pk_constraint(name)["constrained_columns"],
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                for i in insp.get_indexes(name)
            ),
            "unique": sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(name)),
        }
    return out


def test_new_sqlite_store_from_declared_tables_equals_the_migrated_one(tmp_path: Path) -> None:
    """A brand-new SQLite store skips Alembic: it gets the declared tables stamped at
    HEAD, in one transaction, and is then the same store the migrations would build."""
    declared = create_store_engine(f"sqlite:///{tmp_path}/declared.db")
    migrated = create_store_engine(f"sqlite:///{tmp_path}/migrated.db")
    try:
        assert upgrade(declared) == HEAD_REVISION
        assert upgrade(migrated, force=True) == HEAD_REVISION
        assert current_revision(declared) == HEAD_REVISION
        assert _schema(declared) == _schema(migrated)
        with declared.connect() as conn:
            diff = compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": True}), metadata
            )
        assert diff == []
        assert upgrade(declared) == HEAD_REVISION  # then an ordinary store: nothing to do
    finally:
        declared.dispose()
        migrated.dispose()


def test_store_with_tables_but_no_revision_is_left_to_alembic(tmp_path: Path) -> None:
    """Only an empty database is created from the declared tables; anything else goes
    through the migrations (here they fail on the table in their way, which is kept)."""
    engine = create_store_engine(f"sqlite:///{tmp_path}/other.db")
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE runs (x INTEGER)"))
        with pytest.raises(StoreError):
            upgrade(engine)
        assert [c["name"] for c in sa.inspect(engine).get_columns("runs")] == ["x"]
        assert current_revision(engine) != HEAD_REVISION
    finally:
        engine.dispose()
