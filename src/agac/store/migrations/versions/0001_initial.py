"""The initial schema: runs, snapshots, records, outcomes, answers, tool results,
usage ledger, events and leases.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "answers",
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("response", sa.Text(), nullable=False),
        sa.Column("output", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("fingerprint"),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=True),
        sa.Column("unit_key", sa.Text(), nullable=True),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_events_run", "events", ["run_id", "id"], unique=False)
    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("token", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "outcomes",
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("unit_key", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("reason", sa.String(length=40), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("origin", sa.String(length=12), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=True),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "action", "unit_key"),
    )
    op.create_index("ix_outcomes_seq", "outcomes", ["run_id", "seq"], unique=False)
    op.create_table(
        "records",
        sa.Column("snapshot_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("file", sa.Text(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=True),
        sa.Column("reason", sa.String(length=40), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("snapshot_id", "seq"),
    )
    op.create_index("ix_records_key", "records", ["snapshot_id", "key"], unique=False)
    op.create_table(
        "run_actions",
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "action"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("workflow", sa.String(length=200), nullable=False),
        sa.Column("workflow_path", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("retry_of", sa.String(length=32), nullable=True),
        sa.Column("config", sa.Text(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("snapshot_id", sa.String(length=64), nullable=False),
        sa.Column("fresh", sa.Boolean(), nullable=False),
        sa.Column("options", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_runs_workflow_created", "runs", ["workflow", "created_at"], unique=False)
    op.create_table(
        "snapshots",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("files", sa.Text(), nullable=False),
        sa.Column("record_count", sa.Integer(), nullable=False),
        sa.Column("complete", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "tool_results",
        sa.Column("input_hash", sa.String(length=64), nullable=False),
        sa.Column("function", sa.Text(), nullable=False),
        sa.Column("output", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("input_hash"),
    )
    op.create_table(
        "usage",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("unit_key", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("tier", sa.String(length=8), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("cache_write_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_usage_run", "usage", ["run_id", "action"], unique=False)
    op.create_index("ix_usage_unit", "usage", ["run_id", "unit_key"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_usage_unit", table_name="usage")
    op.drop_index("ix_usage_run", table_name="usage")
    op.drop_table("usage")
    op.drop_table("tool_results")
    op.drop_table("snapshots")
    op.drop_index("ix_runs_workflow_created", table_name="runs")
    op.drop_table("runs")
    op.drop_table("run_actions")
    op.drop_index("ix_records_key", table_name="records")
    op.drop_table("records")
    op.drop_index("ix_outcomes_seq", table_name="outcomes")
    op.drop_table("outcomes")
    op.drop_table("leases")
    op.drop_index("ix_events_run", table_name="events")
    op.drop_table("events")
    op.drop_table("answers")
