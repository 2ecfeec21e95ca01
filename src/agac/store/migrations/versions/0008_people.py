"""People: users, their groups, API tokens and web sessions (T1).

Revision ID: 0008
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("tenants", sa.Text(), nullable=False),
        sa.Column("admin", sa.Boolean(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "user_groups",
        sa.Column("group_name", sa.String(length=200), nullable=False),
        sa.Column("user_name", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("group_name", "user_name"),
    )
    op.create_index("ix_user_groups_user", "user_groups", ["user_name"], unique=False)
    op.create_table(
        "tokens",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user_name", sa.String(length=200), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.Column("last_used_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_tokens_user", "tokens", ["user_name"], unique=False)
    op.create_table(
        "sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("user_name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("last_seen_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id_hash"),
    )
    op.create_index("ix_sessions_user", "sessions", ["user_name"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_sessions_user", table_name="sessions")
    op.drop_table("sessions")
    op.drop_index("ix_tokens_user", table_name="tokens")
    op.drop_table("tokens")
    op.drop_index("ix_user_groups_user", table_name="user_groups")
    op.drop_table("user_groups")
    op.drop_table("users")
