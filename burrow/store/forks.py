"""A conversation copied into a new one: its settings and a prefix of its journal.

One transaction writes the new row and its events, so a fork is either whole or absent.
The row is copied column by column (whatever settings a conversation has, the fork has
them too) except what is the new conversation's own: its id, title, times, status, sandbox
and usage, which is the sum of the usage events it was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa

from burrow.store.conversations import new_id
from burrow.store.database import Database
from burrow.store.events import ConversationGone
from burrow.store.records import Event, ProjectionChange
from burrow.store.schema import conversations, events


class ForkStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def copy(
        self, source: str, title: str, journal: Sequence[Event], change: ProjectionChange
    ) -> str:
        """A new conversation like `source`, holding `journal` renumbered from seq 1 (the
        events keep their type, time, run and data); `change` is what the journal's events
        do to a conversation row (runs/journal/journal.py's projection). -> its id"""
        cid = new_id("c")
        now = datetime.now(UTC)

        def write(conn: sa.Connection) -> str:
            row = conn.execute(sa.select(conversations).where(conversations.c.id == source))
            found = row.mappings().first()
            if found is None:
                raise ConversationGone(source)
            values = dict(found)
            values.update(
                id=cid,
                title=title,
                created_at=now,
                updated_at=now,
                # At rest, as its journal left it ("failed" after a failed run); open runs
                # are closed by the caller's next append.
                status=change.status if change.status == "failed" else "idle",
                sandbox_status="none",
                last_seq=len(journal),
                prompt_tokens=change.usage.prompt_tokens,
                completion_tokens=change.usage.completion_tokens,
                cache_read_tokens=change.usage.cache_read_tokens,
                cache_write_tokens=change.usage.cache_write_tokens,
                cost=change.usage.cost,
            )
            conn.execute(conversations.insert().values(**values))
            if journal:
                conn.execute(
                    events.insert(),
                    [
                        {
                            "conversation_id": cid,
                            "seq": seq,
                            "type": e.type,
                            "ts": e.ts,
                            "run_id": e.run_id,
                            "data": e.data_json,
                        }
                        for seq, e in enumerate(journal, start=1)
                    ],
                )
            return cid

        return await self._db.run(write)
