"""automation runs: the branch and pull request of each run an automation started (the
pull-request loop finds its conversation by them), and an automation's pull request settings

Revision 0013, after 0012; written 2026-12-07.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision: str | None = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "automation_runs",
        sa.Column("conversation_id", sa.String(length=40), nullable=False),
        sa.Column("automation_id", sa.String(length=40), nullable=False),
        sa.Column("repository", sa.String(length=200), nullable=True),
        sa.Column("branch", sa.String(length=255), nullable=True),
        sa.Column("pull_number", sa.Integer(), nullable=True),
        sa.Column("pull_url", sa.Text(), nullable=True),
        sa.Column("commit", sa.String(length=64), nullable=True),
        sa.Column("result_status", sa.String(length=20), nullable=False),
        sa.Column("result_detail", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["automation_id"], ["automations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("conversation_id"),
    )
    with op.batch_alter_table("automation_runs", schema=None) as batch_op:
        batch_op.create_index("ix_automation_runs_automation", ["automation_id"], unique=False)
        batch_op.create_index("ix_automation_runs_branch", ["repository", "branch"], unique=False)
        batch_op.create_index(
            "ix_automation_runs_pull", ["repository", "pull_number"], unique=False
        )

    with op.batch_alter_table("automations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pull_request", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("automations", schema=None) as batch_op:
        batch_op.drop_column("pull_request")

    with op.batch_alter_table("automation_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_automation_runs_pull")
        batch_op.drop_index("ix_automation_runs_branch")
        batch_op.drop_index("ix_automation_runs_automation")

    op.drop_table("automation_runs")
