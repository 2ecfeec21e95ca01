"""Approvals (A1-A3): proposals awaiting a decision, and the decisions taken.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("workflow", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("unit_key", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("subject", sa.String(length=64), nullable=False),
        sa.Column("parent", sa.String(length=32), nullable=True),
        sa.Column("arguments", sa.Text(), nullable=False),
        sa.Column("policy_version", sa.String(length=200), nullable=False),
        sa.Column("approvers", sa.Text(), nullable=False),
        sa.Column("proposed_by", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("decided_by", sa.Text(), nullable=True),
        sa.Column("decided_at", sa.Float(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("decision_signature", sa.String(length=64), nullable=True),
        sa.Column("used_by", sa.String(length=32), nullable=True),
        sa.Column("used_at", sa.Float(), nullable=True),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("signature", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_approvals_unit", "approvals", ["workflow", "action", "unit_key"], unique=False
    )
    op.create_index("ix_approvals_state", "approvals", ["workflow", "state"], unique=False)
    op.create_index("ix_approvals_run", "approvals", ["run_id", "state"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_approvals_run", table_name="approvals")
    op.drop_index("ix_approvals_state", table_name="approvals")
    op.drop_index("ix_approvals_unit", table_name="approvals")
    op.drop_table("approvals")
