"""Batch mode: provider batches owned by their shard, and their items.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "batch_items",
        sa.Column("batch_key", sa.String(length=160), nullable=False),
        sa.Column("custom_id", sa.String(length=64), nullable=False),
        sa.Column("workflow", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("unit_key", sa.Text(), nullable=False),
        sa.Column("file", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=40), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("batch_key", "custom_id"),
    )
    op.create_index(
        "ix_batch_items_unit", "batch_items", ["workflow", "action", "unit_key"], unique=False
    )
    op.create_table(
        "batches",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("workflow", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("file", sa.Text(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("provider_batch_id", sa.Text(), nullable=True),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("raw_status", sa.String(length=64), nullable=True),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("collected_by", sa.String(length=32), nullable=True),
        sa.Column("request_count", sa.Integer(), nullable=False),
        sa.Column("meta", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("submitted_at", sa.Float(), nullable=True),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("deadline_at", sa.Float(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_batches_workflow", "batches", ["workflow", "action", "state"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_batches_workflow", table_name="batches")
    op.drop_table("batches")
    op.drop_index("ix_batch_items_unit", table_name="batch_items")
    op.drop_table("batch_items")
