"""Dispatch marks (S1): what may have been sent, per (run, action, shard); usage rows of
calls whose outcome is unknown (``usage.origin``).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dispatch_marks",
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("shard", sa.String(length=500), nullable=False),
        sa.Column("units", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "action", "shard"),
    )
    # ADD COLUMN of a nullable column: both dialects do it in place (no table copy).
    op.add_column("usage", sa.Column("origin", sa.String(length=8), nullable=True))
    op.create_index("ix_usage_unknown", "usage", ["origin", "status"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_usage_unknown", table_name="usage")
    with op.batch_alter_table("usage") as batch:
        batch.drop_column("origin")
    op.drop_table("dispatch_marks")
