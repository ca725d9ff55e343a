"""Databases as Burrow made them before migrations (main at bdc22f9), from the dumps in
fixtures/ (written by that version's own code: fixtures/make_main_fixture.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg

FIXTURES = Path(__file__).parent / "fixtures"
PASSWORD = "main-fixture-password"  # alice's, in both dumps
TITLE = "Made before migrations"
FIRST_MESSAGE = "héllo from main \u2603"


def make_sqlite(path: Path) -> str:
    """A SQLite file as main left it; returns its URL."""
    with sqlite3.connect(path) as conn:
        conn.executescript((FIXTURES / "main-bdc22f9.sqlite.sql").read_text())
    return f"sqlite+aiosqlite:///{path}"


async def make_postgresql(url: str) -> None:
    """Load main's PostgreSQL dump into the (empty) database at `url`."""
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        await conn.execute((FIXTURES / "main-bdc22f9.postgresql.sql").read_text())
    finally:
        await conn.close()
