"""Server-side settings (name -> value), changed from the settings page."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from burrow.store.database import Database
from burrow.store.schema import settings


class SettingsStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def all(self) -> dict[str, str | None]:
        def fetch(conn: sa.Connection) -> dict[str, str | None]:
            return {r.name: r.value for r in conn.execute(sa.select(settings))}

        return await self._db.run(fetch)

    async def put(self, values: dict[str, str | None]) -> None:
        def upsert(conn: sa.Connection) -> None:
            now = datetime.now(UTC)
            for name, value in values.items():
                conn.execute(settings.delete().where(settings.c.name == name))
                conn.execute(settings.insert().values(name=name, value=value, updated_at=now))

        await self._db.run(upsert)
