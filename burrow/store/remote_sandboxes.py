"""Which remote sandbox serves each of Burrow's sandboxes (the e2b backend's `RemoteIds`).

One row per sandbox id, written when the backend creates a remote sandbox and forgotten when
it destroys it. Every replica reads the same row, so a conversation's sandbox is found by its
id on whichever host of the fleet it lives — not by asking the hosts to list their sandboxes.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from burrow.store.database import Database
from burrow.store.schema import remote_sandboxes


class RemoteSandboxStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, sandbox_id: str) -> str | None:
        query = sa.select(remote_sandboxes.c.remote_id).where(
            remote_sandboxes.c.sandbox_id == sandbox_id
        )
        return await self._db.run(lambda conn: conn.execute(query).scalar_one_or_none())

    async def put(self, sandbox_id: str, remote_id: str) -> None:
        now = datetime.now(UTC)
        upsert = self._db.upsert(remote_sandboxes).values(
            sandbox_id=sandbox_id, remote_id=remote_id, updated_at=now
        )
        upsert = upsert.on_conflict_do_update(
            index_elements=[remote_sandboxes.c.sandbox_id],
            set_={"remote_id": remote_id, "updated_at": now},
        )
        await self._db.run(lambda conn: conn.execute(upsert))

    async def forget(self, sandbox_id: str) -> None:
        delete = sa.delete(remote_sandboxes).where(remote_sandboxes.c.sandbox_id == sandbox_id)
        await self._db.run(lambda conn: conn.execute(delete))
