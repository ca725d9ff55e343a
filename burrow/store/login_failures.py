"""Failed password checks shared by replicas: the login throttle's memory on PostgreSQL.

Keys are stored as SHA-256 digests. Each write also deletes rows past the window, so the
table holds at most one window of failures, and no more than the throttle let through.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from burrow.store.database import Database
from burrow.store.schema import login_failures


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _since(window: float) -> Any:
    return sa.func.now() - sa.func.make_interval(0, 0, 0, 0, 0, 0, window)


class LoginFailureStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def ages(self, keys: Sequence[str], window: float) -> dict[str, list[float]]:
        """Seconds since each failure of each key within `window`, youngest first."""
        digests = {_digest(k): k for k in keys}
        age = sa.func.extract("epoch", sa.func.now() - login_failures.c.at)
        query = (
            sa.select(login_failures.c.key, age)
            .where(login_failures.c.key.in_(digests), login_failures.c.at > _since(window))
            .order_by(login_failures.c.at.desc())
        )
        found: dict[str, list[float]] = {k: [] for k in keys}

        def read(conn: sa.Connection) -> None:
            for digest, seconds in conn.execute(query):
                found[digests[digest]].append(float(seconds))

        await self._db.run(read)
        return found

    async def record(self, keys: Sequence[str], window: float) -> None:
        """Note a failure of each key; forget everyone's failures older than `window`."""
        rows = [{"key": _digest(k), "at": sa.func.now()} for k in keys]

        def write(conn: sa.Connection) -> None:
            conn.execute(login_failures.delete().where(login_failures.c.at < _since(window)))
            for row in rows:
                conn.execute(login_failures.insert().values(**row))

        await self._db.run(write)

    async def clear(self, key: str) -> None:
        query = login_failures.delete().where(login_failures.c.key == _digest(key))
        await self._db.run(lambda conn: conn.execute(query))
