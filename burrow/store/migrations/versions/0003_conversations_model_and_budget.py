"""conversations: model and budget (per-conversation settings, DESIGN.md §8)

Revision 0003, after 0002; written 2026-11-30 11:34:57.984613.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("model", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("budget", sa.Text(), server_default="{}", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("budget")
        batch_op.drop_column("model")
