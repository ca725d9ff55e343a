"""Schema migrations: schema.py and the migrations agree (the authoring check), a database
from a newer Burrow is refused, replicas starting together migrate once, and a later
revision that adds a column works on SQLite without losing rows."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import sys
import time
from asyncio.subprocess import PIPE
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory

from burrow.store.database import Database
from burrow.store.migrate import (
    VERSIONS,
    SchemaError,
    alembic_config,
    ensure_schema,
    head_revision,
    open_database,
    read_state,
    schema_diff,
    write_revision,
)
from burrow.store.schema import metadata
from tests.conftest import pg_database
from tests.store.main_fixture import make_postgresql, make_sqlite


@pytest.fixture(params=["sqlite", "postgresql"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """An empty database: a SQLite file, or a PostgreSQL database of its own."""
    async with contextlib.AsyncExitStack() as stack:
        if request.param == "sqlite":
            yield f"sqlite+aiosqlite:///{tmp_path / 'burrow.db'}"
        else:
            yield await stack.enter_async_context(pg_database())


def with_column(column: sa.Column[object]) -> sa.MetaData:
    """schema.py's metadata plus one column on conversations: a change without migration."""
    changed = sa.MetaData()
    for table in metadata.tables.values():
        table.to_metadata(changed)
    changed.tables["conversations"].append_column(column)
    return changed


async def test_schema_py_is_what_the_migrations_make(engine: Database) -> None:
    """The authoring check: a column added to schema.py without a migration fails here."""
    assert await engine.run(lambda conn: schema_diff(conn, metadata)) == []


async def test_the_authoring_check_sees_a_column_without_migration(engine: Database) -> None:
    changed = with_column(sa.Column("pinned_note", sa.String(200), nullable=True))
    differences = await engine.run(lambda conn: schema_diff(conn, changed))
    assert differences == ["missing column conversations.pinned_note"]


def test_revision_files_are_numbered_as_the_start_up_check_expects() -> None:
    """`head_revision` reads file names, not Alembic: NNNN_slug.py holds revision NNNN, one
    head, each revision after the one before."""
    scripts = ScriptDirectory.from_config(alembic_config(None))  # type: ignore[arg-type]
    files = sorted(path.name[:4] for path in VERSIONS.glob("*.py"))
    assert len(files) == len(set(files)), f"two revisions share a number: {files}"
    assert scripts.get_heads() == [head_revision()]
    for script in scripts.walk_revisions():
        assert Path(script.path).name.startswith(f"{script.revision}_"), script.path
        if script.down_revision is not None:
            assert int(script.revision) == int(str(script.down_revision)) + 1


async def test_a_database_from_a_newer_burrow_is_refused(url: str) -> None:
    db = await open_database(url)
    await db.run(
        lambda conn: conn.execute(sa.text("UPDATE alembic_version SET version_num='0042'"))
    )
    await db.close()
    with pytest.raises(SchemaError) as refused:
        await open_database(url)
    message = str(refused.value)
    assert "schema revision '0042'" in message and "does not know" in message
    assert f"newest is '{head_revision()}'" in message
    assert "Run that newer version" in message  # what to do


async def test_with_auto_migrate_off_a_database_behind_is_refused_with_the_command(
    tmp_path: Path,
) -> None:
    url = make_sqlite(tmp_path / "burrow.db")
    with pytest.raises(SchemaError, match="run `burrow db upgrade`"):
        await open_database(url, migrate=False)
    with sqlite3.connect(tmp_path / "burrow.db") as conn:  # untouched
        assert not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name='alembic_version'"
        ).fetchall()


@pytest.mark.parametrize("made_by_main", [False, True], ids=["empty", "made-by-main"])
async def test_replicas_starting_together_migrate_once(url: str, made_by_main: bool) -> None:
    """Six engines in one process open one database at once: on PostgreSQL the advisory
    lock, on SQLite BEGIN IMMEDIATE, lets one migrate; the others then see head. (It also
    keeps Alembic's process-global context from being entered twice at once.)"""
    if made_by_main:
        if url.startswith("sqlite"):
            make_sqlite(Path(url.removeprefix("sqlite+aiosqlite:///")))
        else:
            await make_postgresql(url)
    opened = await asyncio.gather(*(open_database(url) for _ in range(6)))
    try:
        state = await opened[0].run(read_state)
        assert state.revisions == (head_revision(),)
        count = sa.text("SELECT count(*) FROM events")
        assert await opened[-1].run(lambda conn: conn.execute(count).scalar()) == (
            5 if made_by_main else 0
        )
    finally:
        await asyncio.gather(*(db.close() for db in opened))


# One replica's start: everything imported, then the schema step at an agreed instant.
REPLICA = """
import asyncio, sys, time
import alembic.command, alembic.script, alembic.autogenerate
from burrow.store.migrate import prepare_database
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
asyncio.run(prepare_database(sys.argv[1]))
"""


@pytest.mark.parametrize("made_by_main", [False, True], ids=["empty", "made-by-main"])
async def test_replica_processes_starting_together_migrate_once(
    url: str, made_by_main: bool
) -> None:
    """Four `burrow serve` schema steps in four processes, released at the same instant:
    the lock is between processes, as between replicas."""
    if made_by_main:
        if url.startswith("sqlite"):
            make_sqlite(Path(url.removeprefix("sqlite+aiosqlite:///")))
        else:
            await make_postgresql(url)
    start = str(time.time() + 5)  # after the imports, even on a loaded machine
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    replicas = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", REPLICA, url, start, stderr=PIPE, env=environment
        )
        for _ in range(4)
    ]
    async with asyncio.timeout(90):
        errors = [(await replica.communicate())[1].decode() for replica in replicas]
    assert [replica.returncode for replica in replicas] == [0] * 4, "\n".join(errors)
    db = await open_database(url, migrate=False)
    try:
        assert (await db.run(read_state)).revisions == (head_revision(),)
    finally:
        await db.close()


ADD_MODEL = """
import sqlalchemy as sa
from alembic import op

revision = "{revision}"
down_revision = "{down}"


def upgrade() -> None:
    # recreate="always": the copy-drop-rename that every SQLite change but ADD COLUMN needs
    with op.batch_alter_table("conversations", recreate="always") as batch:
        batch.add_column(sa.Column("pinned_note", sa.String(200), nullable=True))
"""


async def test_a_batch_migration_rebuilds_a_parent_table_on_sqlite_keeping_its_children(
    tmp_path: Path,
) -> None:
    """What later issues do: a column on conversations. SQLite rebuilds the table; with
    foreign keys on, dropping the old one would cascade into events and delete them."""
    path = tmp_path / "burrow.db"
    url = make_sqlite(path)
    extra = tmp_path / "versions"
    extra.mkdir()
    revision = f"{int(head_revision()) + 1:04d}"
    (extra / f"{revision}_add_pinned_note.py").write_text(
        ADD_MODEL.format(revision=revision, down=head_revision())
    )
    db = await open_database(url)  # main's file, now at head
    try:
        await ensure_schema(db, versions=(VERSIONS, extra))
        assert (await db.run(read_state)).revisions == (revision,)
        changed = with_column(sa.Column("pinned_note", sa.String(200), nullable=True))
        assert await db.run(lambda conn: schema_diff(conn, changed)) == []
    finally:
        await db.close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA foreign_keys=ON")
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (5,)
        assert conn.execute("SELECT title, pinned_note FROM conversations").fetchall() == [
            ("Made before migrations", None)
        ]
        with pytest.raises(sqlite3.IntegrityError):  # the foreign keys still hold
            conn.execute("INSERT INTO events VALUES ('c_none', 1, 'x', 't', NULL, '{}')")
        conn.execute("DELETE FROM conversations")  # and still cascade
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (0,)


async def test_burrow_db_revision_writes_a_batch_migration_that_upgrades(
    tmp_path: Path,
) -> None:
    """The authoring workflow: change schema.py, autogenerate, upgrade a database."""
    changed = with_column(sa.Column("pinned_note", sa.String(200), nullable=True))
    extra = tmp_path / "versions"
    extra.mkdir()
    written = await write_revision(
        "conversations: add pinned_note", metadata=changed, directory=extra
    )
    revision = f"{int(head_revision()) + 1:04d}"
    assert written.name == f"{revision}_conversations_add_pinned_note.py"
    source = written.read_text()
    assert 'batch_alter_table("conversations"' in source and "add_column" in source
    url = make_sqlite(tmp_path / "burrow.db")
    db = await open_database(url)
    try:
        await ensure_schema(db, versions=(VERSIONS, extra))
        assert await db.run(lambda conn: schema_diff(conn, changed)) == []
    finally:
        await db.close()


async def test_burrow_db_revision_refuses_when_there_is_nothing_to_write(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="nothing to write"):
        await write_revision("no change", directory=tmp_path)
    assert os.listdir(tmp_path) == []  # nothing half-written
