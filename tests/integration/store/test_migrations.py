"""The migrated schema equals the declared tables, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from agac.store.database import HEAD_REVISION, create_store_engine, current_revision, upgrade
from agac.store.tables import metadata


def test_migrations_produce_exactly_the_declared_tables(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        assert upgrade(engine) == HEAD_REVISION
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}),
                                    metadata)
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
