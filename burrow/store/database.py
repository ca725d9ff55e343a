"""Opening the database: SQLite (WAL) by default, PostgreSQL through asyncpg at scale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from burrow.store.schema import metadata


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def is_sqlite(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "sqlite"


async def open_database(url: str) -> AsyncEngine:
    """Create the engine, apply connection pragmas and create missing tables."""
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        # One writer at a time is SQLite's model; a generous busy timeout makes concurrent
        # writers queue instead of failing with "database is locked".
        kwargs["connect_args"] = {"timeout": 30}
    engine = create_async_engine(url, **kwargs)
    if is_sqlite(engine):

        @sa.event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")  # durable across app crashes under WAL
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    return engine
