"""Every usage field of a call, and the provider's request id (issue 28): ``usage`` gains
``reasoning_tokens`` (a part of ``output_tokens``), ``server_tools`` (the provider's billed
tool uses as JSON, ``{"web_search": 2}``) and ``request_id``. Rows stored before have no
reasoning tokens, no tool uses and no request id.

Revision ID: 0012
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD COLUMN with a constant default or NULL: in place on both dialects.
    op.add_column(
        "usage", sa.Column("reasoning_tokens", sa.Integer(), server_default="0", nullable=False)
    )
    op.add_column("usage", sa.Column("server_tools", sa.Text(), nullable=True))
    op.add_column("usage", sa.Column("request_id", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("usage") as batch:
        batch.drop_column("request_id")
        batch.drop_column("server_tools")
        batch.drop_column("reasoning_tokens")
