"""Fan-out, join and item keys (docs/workflow-reference.md, Fan-out and join): one row per fanned-out parent and its item
count, so that counts of item units are known from the store.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fanouts",
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("parent_key", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "action", "parent_key"),
    )
    op.create_index("ix_fanouts_seq", "fanouts", ["run_id", "seq"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_fanouts_seq", table_name="fanouts")
    op.drop_table("fanouts")
