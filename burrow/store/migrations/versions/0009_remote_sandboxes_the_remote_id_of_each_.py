"""remote sandboxes: the remote id of each sandbox

Revision 0009, after 0008; written 2026-11-30 19:19:08.940367.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "remote_sandboxes",
        sa.Column("sandbox_id", sa.String(length=200), nullable=False),
        sa.Column("remote_id", sa.String(length=200), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sandbox_id"),
    )


def downgrade() -> None:
    op.drop_table("remote_sandboxes")
