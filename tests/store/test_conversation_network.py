"""The conversations' `network` column (migration 0006): rows from before it have none (the
server's default applies), new ones store their policy, an update changes it."""

from __future__ import annotations

from pathlib import Path

from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import Database
from burrow.store.migrate import open_database
from tests.store.main_fixture import PASSWORD, make_postgresql, make_sqlite


async def check_network_column(db: Database) -> None:
    conversations = ConversationStore(db)
    alice = await AccountStore(db).authenticate("alice", PASSWORD)
    assert alice is not None
    [older] = await conversations.owned_by(alice.id)
    assert older.network is None  # made before the column: BURROW_SANDBOX_NETWORK decides
    assert await conversations.network_of(older.id) is None
    made = await conversations.create(alice.id, "closed", network="none")
    assert await conversations.network_of(made.id) == "none"
    await conversations.update(made.id, network="egress")
    assert await conversations.network_of(made.id) == "egress"
    await conversations.update(made.id, title="renamed")  # other updates leave it be
    assert (await conversations.get(made.id)).network == "egress"  # type: ignore[union-attr]
    assert await conversations.network_of("c_missing") is None


async def test_sqlite_rows_before_the_migration_keep_the_default(tmp_path: Path) -> None:
    db = await open_database(make_sqlite(tmp_path / "burrow.db"))
    try:
        await check_network_column(db)
    finally:
        await db.close()


async def test_postgresql_rows_before_the_migration_keep_the_default(pg_url: str) -> None:
    await make_postgresql(pg_url)
    db = await open_database(pg_url)
    try:
        await check_network_column(db)
    finally:
        await db.close()
