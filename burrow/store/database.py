"""Opening the database: SQLite (WAL) by default, PostgreSQL through asyncpg at scale.

`Database.run` executes a function of a plain (sync) SQLAlchemy Connection inside one
transaction, so the store's SQL is written once for both dialects. On SQLite it runs on a
single dedicated thread with the stdlib driver: one thread hop per transaction instead of
one per statement, which is what makes thousands of journal appends a second possible.
On PostgreSQL it runs through the async engine (asyncpg) with `run_sync`.
`Database.run_schema_change` is the same for migrations, excluding every other migrator.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa

from burrow.store.datadir import create_private_file

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")

# pg_advisory_xact_lock's key for schema changes (any fixed 64-bit number; "burrow" in ASCII).
SCHEMA_LOCK = 0x627572726F77


SQLITE_BUSY_TIMEOUT = 30.0  # seconds a write waits for another process's lock


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    _enable_wal(cur)
    cur.execute("PRAGMA synchronous=NORMAL")  # durable across app crashes under WAL
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _enable_wal(cur: Any, attempts: int = 100) -> None:
    """Switch to WAL. The switch takes the database exclusively for a moment, and SQLite
    answers "database is locked" at once instead of waiting (its busy handler is not asked)
    when processes opening a database made without WAL race for it: retry briefly."""
    for attempt in range(attempts):
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except Exception as exc:  # the driver's OperationalError, adapted or not
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.02)


class StorageTrouble(Exception):
    """The database could not write for a reason outside Burrow: another process holds it
    locked past the busy timeout, or the disk under it is full. Nothing of the failed
    write was kept (its transaction rolled back); the message says what to do."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "busy" or "full"


def storage_trouble(exc: BaseException) -> StorageTrouble | None:
    """What a driver error means for the user, when it is one of the known outside causes
    (SQLite's "database is locked" and "database or disk is full")."""
    text = str(getattr(exc, "orig", None) or exc).lower()
    if "database is locked" in text or "database is busy" in text:
        return StorageTrouble(
            "busy",
            "The database is locked by another process (a backup or a sqlite3 shell?) and "
            "stayed locked past the busy timeout; the change was not saved. Try again shortly.",
        )
    if "disk is full" in text or "no space left" in text:
        return StorageTrouble(
            "full",
            "The disk under the data directory is full; the change was not saved. Free some space "
            "and try again.",
        )
    return None


class Database:
    """On SQLite, `engine` is the stdlib driver's (sync) engine, run on the one thread; on
    PostgreSQL, the async engine. Either says its `dialect`."""

    def __init__(self, engine: sa.Engine | AsyncEngine) -> None:
        self.engine = engine
        self._sync_engine = engine if isinstance(engine, sa.Engine) else None
        self._async_engine = None if isinstance(engine, sa.Engine) else engine
        self._thread = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite")
            if self._sync_engine is not None
            else None
        )

    def upsert(self, table: sa.Table) -> Any:
        """The dialect's own INSERT, which has ON CONFLICT: SQLite's or PostgreSQL's (a SQLite
        server never imports the latter)."""
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects import postgresql

            return postgresql.insert(table)
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)

    async def run(self, fn: Callable[[sa.Connection], T]) -> T:
        """Run `fn(connection)` in one transaction and return its result."""
        if self._sync_engine is not None and self._thread is not None:
            engine = self._sync_engine

            def in_thread() -> T:
                with engine.begin() as conn:
                    return fn(conn)

            return await asyncio.get_running_loop().run_in_executor(self._thread, in_thread)
        assert self._async_engine is not None
        async with self._async_engine.begin() as conn:
            return await conn.run_sync(fn)

    async def run_schema_change(self, fn: Callable[[sa.Connection], T]) -> T:
        """Run `fn(connection)` in one transaction that no other process's schema change
        overlaps; the second of two waits, then sees the first's result."""
        if self._sync_engine is not None and self._thread is not None:
            engine = self._sync_engine
            return await asyncio.get_running_loop().run_in_executor(
                self._thread, lambda: _sqlite_schema_change(engine, fn)
            )
        assert self._async_engine is not None
        async with self._async_engine.begin() as conn:
            await conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
            return await conn.run_sync(fn)

    async def close(self) -> None:
        if self._async_engine is not None:
            await self._async_engine.dispose()
        if self._sync_engine is not None and self._thread is not None:
            self._thread.submit(self._sync_engine.dispose).result()
            self._thread.shutdown(wait=True)


def _sqlite_schema_change(engine: sa.Engine, fn: Callable[[sa.Connection], T]) -> T:
    """SQLite's way: foreign keys off, because rebuilding a table (Alembic's batch mode:
    copy, drop, rename) drops it, and with them on that DROP deletes its children's rows
    through ON DELETE CASCADE; they are checked before commit instead. The pragma cannot
    change inside a transaction, so it is set first; BEGIN IMMEDIATE then takes the write
    lock, which makes other processes' schema changes (and writes) wait."""
    with engine.connect() as conn:
        try:
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            result = fn(conn)
            broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise RuntimeError(
                    f"The schema change left rows whose foreign key points nowhere (table, "
                    f"rowid, parent, key): {broken[:5]}; nothing was committed."
                )
            conn.commit()
            return result
        finally:
            conn.invalidate()  # never hand back a connection with foreign keys off


def connect(url: str) -> Database:
    """Create the engine and apply connection pragmas; the schema is not looked at."""
    if not url.startswith("sqlite"):
        # SQLAlchemy's asyncio extension (and its ORM, a tenth of a second of imports) only
        # for PostgreSQL: SQLite runs on the stdlib driver.
        from sqlalchemy.ext.asyncio import create_async_engine

        return Database(create_async_engine(url))
    # One writer at a time is SQLite's model; a generous busy timeout makes concurrent
    # writers queue instead of failing with "database is locked" (`?timeout=` in the URL
    # sets another, in seconds).
    busy_timeout = float(str(sa.make_url(url).query.get("timeout", SQLITE_BUSY_TIMEOUT)))
    sync_url = url.replace("+aiosqlite", "", 1)
    database = sa.make_url(sync_url).database
    if database and database != ":memory:" and not database.startswith("file:"):
        # Created 0600 first: SQLite gives its WAL and shared-memory files the same mode.
        create_private_file(Path(database))
    engine = sa.create_engine(
        sync_url, connect_args={"timeout": busy_timeout, "check_same_thread": False}
    )
    sa.event.listen(engine, "connect", _sqlite_pragmas)
    return Database(engine)
