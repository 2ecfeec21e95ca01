"""The turns of a tool loop (Tools per record): one row per model turn that called tools
and per tool result, keyed by (run, action, unit, step).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "turns",
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("unit_key", sa.Text(), nullable=False),
        sa.Column("step", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("tenant", sa.String(length=64), server_default="default", nullable=False),
        sa.PrimaryKeyConstraint("run_id", "action", "unit_key", "step"),
    )


def downgrade() -> None:
    op.drop_table("turns")
