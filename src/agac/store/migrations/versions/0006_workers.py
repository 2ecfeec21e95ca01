"""Scale-out workers: shard claims, worker heartbeats, global rate windows.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "shards",
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("shard", sa.String(length=500), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=True),
        sa.Column("file", sa.Text(), nullable=False),
        sa.Column("lo", sa.Integer(), nullable=False),
        sa.Column("hi", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=8), nullable=False),
        sa.Column("ready_at", sa.Float(), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=True),
        sa.Column("claims", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "shard"),
    )
    op.create_index("ix_shards_ready", "shards", ["state", "ready_at"], unique=False)
    op.create_table(
        "workers",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=12), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("heartbeat_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "rate_limits",
        sa.Column("key", sa.String(length=300), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "rate_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("key", sa.String(length=300), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_rate_events_key_at", "rate_events", ["key", "at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_rate_events_key_at", table_name="rate_events")
    op.drop_table("rate_events")
    op.drop_table("rate_limits")
    op.drop_table("workers")
    op.drop_index("ix_shards_ready", table_name="shards")
    op.drop_table("shards")
