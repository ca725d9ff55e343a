"""users: disabled (admins disable accounts, DESIGN.md §8)

Revision 0004, after 0003; written 2026-11-30 12:20:43.852290.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # sa.false(), not "0": PostgreSQL refuses an integer default for a boolean.
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("disabled", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("disabled")
