"""events: a run's conversation by its id

Revision 0010, after 0009; written 2026-12-04 02:30:00. A partial index (one row per run,
its run.started): an A2A task id is a run id, and tasks/get finds its conversation by it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    started = sa.text("type = 'run.started'")
    op.create_index(
        "ix_events_run_started",
        "events",
        ["run_id"],
        sqlite_where=started,
        postgresql_where=started,
    )


def downgrade() -> None:
    op.drop_index("ix_events_run_started", table_name="events")
