"""Opening the database: SQLite (WAL) by default, PostgreSQL through asyncpg at scale.

`Database.run` executes a function of a plain (sync) SQLAlchemy Connection inside one
transaction, so the store's SQL is written once for both dialects. On SQLite it runs on a
single dedicated thread with the stdlib driver: one thread hop per transaction instead of
one per statement, which is what makes thousands of journal appends a second possible.
On PostgreSQL it runs through the async engine (asyncpg) with `run_sync`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from burrow.store.datadir import create_private_file
from burrow.store.schema import metadata

T = TypeVar("T")


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")  # durable across app crashes under WAL
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


class Database:
    def __init__(self, engine: AsyncEngine, sync_engine: sa.Engine | None) -> None:
        self.engine = engine
        self._sync_engine = sync_engine
        self._thread = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite")
            if sync_engine is not None
            else None
        )

    async def run(self, fn: Callable[[sa.Connection], T]) -> T:
        """Run `fn(connection)` in one transaction and return its result."""
        if self._sync_engine is not None and self._thread is not None:
            engine = self._sync_engine

            def in_thread() -> T:
                with engine.begin() as conn:
                    return fn(conn)

            return await asyncio.get_running_loop().run_in_executor(self._thread, in_thread)
        async with self.engine.begin() as conn:
            return await conn.run_sync(fn)

    async def close(self) -> None:
        await self.engine.dispose()
        if self._sync_engine is not None and self._thread is not None:
            self._thread.submit(self._sync_engine.dispose).result()
            self._thread.shutdown(wait=True)


async def open_database(url: str) -> Database:
    """Create the engines, apply connection pragmas and create missing tables."""
    kwargs: dict[str, Any] = {}
    sync_engine = None
    if url.startswith("sqlite"):
        # One writer at a time is SQLite's model; a generous busy timeout makes concurrent
        # writers queue instead of failing with "database is locked".
        kwargs["connect_args"] = {"timeout": 30}
        sync_url = url.replace("+aiosqlite", "", 1)
        database = sa.make_url(sync_url).database
        if database and database != ":memory:" and not database.startswith("file:"):
            # Created 0600 first: SQLite gives its WAL and shared-memory files the same mode.
            create_private_file(Path(database))
        sync_engine = sa.create_engine(
            sync_url, connect_args={"timeout": 30, "check_same_thread": False}
        )
        sa.event.listen(sync_engine, "connect", _sqlite_pragmas)
    engine = create_async_engine(url, **kwargs)
    if sync_engine is not None:
        sa.event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    return Database(engine, sync_engine)
