"""Alembic environment: always run with a connection handed in by agac.store.database."""

from __future__ import annotations

from alembic import context

from agac.store.tables import metadata

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # pragma: no cover - agac never runs alembic without a connection
    raise RuntimeError("agac migrations run through `agac store upgrade`, not the alembic CLI")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
