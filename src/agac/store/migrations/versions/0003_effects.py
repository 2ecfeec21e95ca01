"""Effects (E1, E2): one row per idempotency key, its intent, receipt or resolution.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "effects",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("workflow", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("unit_key", sa.Text(), nullable=False),
        sa.Column("function", sa.Text(), nullable=False),
        sa.Column("idempotent", sa.Boolean(), nullable=False),
        sa.Column("compensate", sa.Text(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("arguments", sa.Text(), nullable=False),
        sa.Column("receipt", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("resolution", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_effects_workflow", "effects", ["workflow", "state"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_effects_workflow", table_name="effects")
    op.drop_table("effects")
