"""Each check's verdict kept with its unit (The quality loop: checks): ``outcomes.checks``
holds a JSON object of check name → passed (true/false) for an llm action with
``checks:``; NULL for every other unit and every unit written before.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD COLUMN with NULL: in place on both dialects.
    op.add_column("outcomes", sa.Column("checks", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outcomes") as batch:
        batch.drop_column("checks")
