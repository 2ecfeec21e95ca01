"""The upstream provider a router sent a call to (Providers, part 2: OpenRouter's
``provider``): ``usage.served_by``, NULL for every call not routed and every call written
before.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD COLUMN with NULL: in place on both dialects.
    op.add_column("usage", sa.Column("served_by", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("usage") as batch:
        batch.drop_column("served_by")
