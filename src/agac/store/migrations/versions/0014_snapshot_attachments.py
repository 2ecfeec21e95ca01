"""The files a run's records attach (issue 22): ``snapshot_attachments`` holds, per input
snapshot, each attached file's path, SHA-256, size and media type as they were at
admission — never its bytes. Snapshots stored before have no attachments.

Revision ID: 0014
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "snapshot_attachments",
        sa.Column("snapshot_id", sa.String(64), primary_key=True),
        sa.Column("path", sa.Text(), primary_key=True),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("media_type", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("snapshot_attachments")
