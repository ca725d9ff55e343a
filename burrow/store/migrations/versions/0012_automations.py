"""automations: unattended work's definitions, their claimed schedule ticks, the GitHub
deliveries taken, and the
conversations each one started

Revision 0012, after 0011; written 2026-12-07.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "automations",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("owner_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("repo", sa.Text(), nullable=True),
        sa.Column("environment", sa.String(length=32), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("approval_mode", sa.String(length=20), nullable=False),
        sa.Column("budget", sa.Text(), nullable=False),
        sa.Column("result", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=True),
        sa.Column("triggers", sa.Text(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("concurrency", sa.String(length=10), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("automations", schema=None) as batch_op:
        batch_op.create_index("ix_automations_owner", ["owner_id"], unique=False)
    op.create_table(
        "automation_ticks",
        sa.Column("automation_id", sa.String(length=40), nullable=False),
        sa.Column("slot", sa.DateTime(timezone=True), nullable=False),
        sa.Column("replica_id", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(["automation_id"], ["automations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("automation_id", "slot"),
    )
    op.create_table(
        "github_deliveries",
        sa.Column("delivery_id", sa.String(length=100), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("delivery_id"),
    )
    with op.batch_alter_table("github_deliveries", schema=None) as batch_op:
        batch_op.create_index("ix_github_deliveries_received", ["received_at"], unique=False)
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("automation_id", sa.String(length=40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("automation_id")
    op.drop_table("automation_ticks")
    with op.batch_alter_table("github_deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_github_deliveries_received")
    op.drop_table("github_deliveries")
    with op.batch_alter_table("automations", schema=None) as batch_op:
        batch_op.drop_index("ix_automations_owner")
    op.drop_table("automations")
