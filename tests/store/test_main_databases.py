"""A database made by Burrow before migrations (main at bdc22f9) is recognised as the
baseline, stamped, upgraded, and keeps every row; one that differs from it is refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest

from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import Database
from burrow.store.events import EventStore
from burrow.store.migrate import SchemaError, head_revision, open_database, read_state
from burrow.store.settings import SettingsStore
from tests.api.harness import serve_process
from tests.store.main_fixture import FIRST_MESSAGE, PASSWORD, TITLE, make_postgresql, make_sqlite


async def assert_main_rows_survive(db: Database) -> None:
    assert (await db.run(read_state)).revisions == (head_revision(),)
    alice = await AccountStore(db).authenticate("alice", PASSWORD)
    assert alice is not None, "main's password hash no longer verifies"
    [conversation] = await ConversationStore(db).owned_by(alice.id)
    assert conversation.title == TITLE
    assert (conversation.last_seq, conversation.usage.prompt_tokens, conversation.usage.cost) == (
        5,
        12,
        0.25,
    )
    events = await EventStore(db).read(conversation.id)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert events[0].data == {"content": FIRST_MESSAGE, "steering": False}
    assert events[-1].type == "run.finished"
    assert (await SettingsStore(db).all()) == {"model": "demo"}


async def test_a_sqlite_file_made_by_main_is_stamped_and_upgraded(tmp_path: Path) -> None:
    url = make_sqlite(tmp_path / "burrow.db")
    db = await open_database(url)
    try:
        await assert_main_rows_survive(db)
    finally:
        await db.close()


async def test_a_postgresql_database_made_by_main_is_stamped_and_upgraded(pg_url: str) -> None:
    await make_postgresql(pg_url)
    db = await open_database(pg_url)
    try:
        await assert_main_rows_survive(db)
    finally:
        await db.close()


def test_burrow_serve_upgrades_a_data_dir_made_by_main(tmp_path: Path) -> None:
    make_sqlite(tmp_path / "burrow.db")
    with serve_process(tmp_path, "demo") as (_, base), httpx.Client(base_url=base) as client:
        login = client.post("/api/auth/login", json={"username": "alice", "password": PASSWORD})
        assert login.status_code == 200, login.text
        [conversation] = client.get("/api/conversations").json()
        assert conversation["title"] == TITLE
        assert conversation["usage"] == {
            "prompt_tokens": 12,
            "completion_tokens": 3,
            "cost": 0.25,
            "cache_read_tokens": 0,  # a column the old main did not have
            "cache_write_tokens": 0,
        }
        events = client.get(
            f"/api/conversations/{conversation['id']}/events", params={"format": "json"}
        ).json()
        assert [e["seq"] for e in events] == [1, 2, 3, 4, 5]
        assert events[0]["data"]["content"] == FIRST_MESSAGE
    with sqlite3.connect(tmp_path / "burrow.db") as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (head_revision(),)
        ]


async def test_tables_that_differ_from_mains_are_refused_not_stamped(tmp_path: Path) -> None:
    path = tmp_path / "burrow.db"
    make_sqlite(path)
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE conversations DROP COLUMN cost")
    with pytest.raises(SchemaError) as refused:
        await open_database(f"sqlite+aiosqlite:///{path}")
    message = str(refused.value)
    assert "no schema version" in message and "missing column conversations.cost" in message
    assert "new database" in message  # says what to do
    with sqlite3.connect(path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert "alembic_version" not in tables
