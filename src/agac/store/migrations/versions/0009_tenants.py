"""Tenants (T2): runs, usage, batches, batch items, effects and proposals carry
their tenant; answers and tool results are keyed by (tenant, fingerprint) so that a
tenant reuses only its own; at most one run that is not final per (tenant, workflow).

Every row stored before this revision becomes tenant ``default``'s. Effect keys (E1) now
start with their tenant: ``<key>`` becomes ``default:<key>``. An effect that was in
flight (``started``/``unknown``) keeps the key it was called with in ``resolution``
(``key_before_tenants``): the engine never calls it again by itself — a person settles
it (``agac effects resolve``), because the service it called knows it by the old key.

Revision ID: 0009
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

FINAL = ("succeeded", "partial", "failed", "timed_out", "exhausted", "cancelled")
_FINAL_SQL = ", ".join(f"'{s}'" for s in FINAL)
_CARRY = ("runs", "usage", "batches", "batch_items", "effects", "approvals")


def _tenant() -> sa.Column[str]:
    return sa.Column("tenant", sa.String(length=64), server_default="default", nullable=False)


def upgrade() -> None:
    # ADD COLUMN with a constant default: in place on both dialects (no table copy).
    for table in _CARRY:
        op.add_column(table, _tenant())
    _end_duplicate_open_runs()
    op.drop_index("ix_runs_workflow_created", table_name="runs")
    op.create_index("ix_runs_tenant_workflow", "runs", ["tenant", "workflow", "created_at"])
    op.create_index(
        "ux_runs_open",
        "runs",
        ["tenant", "workflow"],
        unique=True,
        sqlite_where=sa.text(f"state NOT IN ({_FINAL_SQL})"),
        postgresql_where=sa.text(f"state NOT IN ({_FINAL_SQL})"),
    )
    for name, table, cols in (
        ("ix_batches_workflow", "batches", ["tenant", "workflow", "action", "state"]),
        ("ix_batch_items_unit", "batch_items", ["tenant", "workflow", "action", "unit_key"]),
        ("ix_effects_workflow", "effects", ["tenant", "workflow", "state"]),
        ("ix_approvals_unit", "approvals", ["tenant", "workflow", "action", "unit_key"]),
        ("ix_approvals_state", "approvals", ["tenant", "workflow", "state"]),
    ):
        op.drop_index(name, table_name=table)
        op.create_index(name, table, cols)
    _rekey_effects()
    _rekey_reuse(
        "answers",
        "fingerprint",
        [
            sa.Column("provider", sa.String(length=64), nullable=False),
            sa.Column("model", sa.String(length=200), nullable=False),
            sa.Column("request", sa.Text(), nullable=False),
            sa.Column("response", sa.Text(), nullable=False),
            sa.Column("output", sa.Text(), nullable=False),
        ],
    )
    _rekey_reuse(
        "tool_results",
        "input_hash",
        [
            sa.Column("function", sa.Text(), nullable=False),
            sa.Column("output", sa.Text(), nullable=False),
        ],
    )


def _rekey_reuse(table: str, key: str, columns: list[sa.Column[object]]) -> None:
    """Answers and tool results are keyed by (tenant, key): the primary key changes.
    PostgreSQL swaps the key's index; SQLite copies the table once."""
    if op.get_bind().dialect.name == "postgresql":
        op.add_column(table, _tenant())
        op.drop_constraint(f"{table}_pkey", table, type_="primary")
        op.create_primary_key(f"pk_{table}", table, ["tenant", key])
        return
    names = [key, *(c.name for c in columns), "created_at"]
    op.create_table(
        f"{table}_new",
        sa.Column(key, sa.String(length=64), nullable=False),
        *columns,
        sa.Column("created_at", sa.Float(), nullable=False),
        _tenant(),
        sa.PrimaryKeyConstraint("tenant", key, name=f"pk_{table}"),
    )
    listed = ", ".join(names)
    op.execute(
        sa.text(
            f"INSERT INTO {table}_new ({listed}, tenant) SELECT {listed}, 'default' FROM {table}"
        )
    )
    op.drop_table(table)
    op.rename_table(f"{table}_new", table)


def _end_duplicate_open_runs() -> None:
    """Only one run per workflow was ever meant to be open (R1); should an older one be
    left open beside a newer one (two processes admitting at once), it ends ``cancelled``
    so the store can hold the rule from now on."""
    op.execute(
        sa.text(
            f"UPDATE runs SET state = 'cancelled', ended_at = updated_at, "
            f"error = 'ended by the store upgrade to tenants: a newer run of the workflow was open' "
            f"WHERE state NOT IN ({_FINAL_SQL}) AND EXISTS (SELECT 1 FROM runs AS newer "
            f"WHERE newer.workflow = runs.workflow AND newer.state NOT IN ({_FINAL_SQL}) "
            f"AND (newer.created_at > runs.created_at OR "
            f"(newer.created_at = runs.created_at AND newer.id > runs.id)))"
        )
    )


def _rekey_effects() -> None:
    """E1 keys start with the tenant; an effect in flight remembers the key it was called
    with (see the module doc)."""
    with op.batch_alter_table("effects") as batch:
        batch.alter_column(
            "key",
            existing_type=sa.String(length=64),
            type_=sa.String(length=160),
            existing_nullable=False,
        )
    op.execute(
        sa.text(
            "UPDATE effects SET resolution = '{\"key_before_tenants\":\"' || key || '\"}' "
            "WHERE state IN ('started', 'unknown')"
        )
    )
    op.execute(sa.text("UPDATE effects SET key = 'default:' || key"))


def downgrade() -> None:
    """Back to one tenant: only ``default``'s answers, tool results and effects stay
    reusable under their old keys; the other tenants' rows are dropped from those tables."""
    for table, key in (("answers", "fingerprint"), ("tool_results", "input_hash")):
        op.execute(sa.text(f"DELETE FROM {table} WHERE tenant <> 'default'"))
        with op.batch_alter_table(table, recreate="always") as batch:
            batch.drop_constraint(f"pk_{table}", type_="primary")
            batch.drop_column("tenant")
            batch.create_primary_key(f"{table}_pkey", [key])
    op.execute(sa.text("DELETE FROM effects WHERE tenant <> 'default'"))
    op.execute(sa.text("UPDATE effects SET key = substr(key, 9)"))
    for name, table, cols in (
        ("ix_batches_workflow", "batches", ["workflow", "action", "state"]),
        ("ix_batch_items_unit", "batch_items", ["workflow", "action", "unit_key"]),
        ("ix_effects_workflow", "effects", ["workflow", "state"]),
        ("ix_approvals_unit", "approvals", ["workflow", "action", "unit_key"]),
        ("ix_approvals_state", "approvals", ["workflow", "state"]),
    ):
        op.drop_index(name, table_name=table)
        op.create_index(name, table, cols)
    op.drop_index("ux_runs_open", table_name="runs")
    op.drop_index("ix_runs_tenant_workflow", table_name="runs")
    op.create_index("ix_runs_workflow_created", "runs", ["workflow", "created_at"])
    for table in _CARRY:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("tenant")
