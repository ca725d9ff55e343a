"""The schema's version: Alembic migrations bring any database to this code's schema.

A database Burrow opens is in one of five states:
- at head: nothing to do. That is every start but the first after an upgrade, so it costs
  one query and never imports Alembic (a quarter of a second of imports);
- empty: every migration runs, the baseline first (no `create_all`: one path to a schema);
- made before migrations (Burrow's tables, no version): its tables are compared with the
  baseline and, when they match, stamped with it and upgraded; otherwise refused;
- behind: upgraded, or refused with the command to run (`BURROW_AUTO_MIGRATE=false`);
- ahead (a revision this code does not know, written by a newer Burrow): refused.

Upgrades run in `Database.run_schema_change`, one transaction that excludes every other
migrator (PostgreSQL: an advisory lock; SQLite: BEGIN IMMEDIATE), and the state is read
again under it, so replicas that start together migrate once.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from burrow.store.database import Database, connect

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).with_name("migrations")
VERSIONS = MIGRATIONS / "versions"
BASELINE = "0001"
VERSION_TABLE = "alembic_version"
UPGRADE_COMMAND = "burrow db upgrade"
# Revision files are `NNNN_slug.py` holding revision "NNNN" (tests/store/test_migrations.py
# holds them to it), so the head is the highest number, found without importing Alembic.
_REVISION_FILE = re.compile(r"^(\d{4})_\w+\.py$")


class SchemaError(RuntimeError):
    """This code cannot use the database's schema as it is; the message says what to do."""


def _known_ids(versions: Sequence[Path] = (VERSIONS,)) -> set[str]:
    return {m[1] for d in versions for name in os.listdir(d) if (m := _REVISION_FILE.match(name))}


def head_revision(versions: Sequence[Path] = (VERSIONS,)) -> str:
    """The newest revision this code knows."""
    return max(_known_ids(versions))


@dataclass(frozen=True)
class SchemaState:
    revisions: tuple[str, ...]  # the rows of alembic_version: () when it is absent or empty
    tables: frozenset[str]  # every table of the database's default schema

    def describe(self) -> str:
        if self.revisions:
            return f"at revision {', '.join(self.revisions)}"
        if self.tables & BASELINE_TABLES:
            return "made before migrations (no schema version)"
        return "empty"


# The tables of the baseline revision: a database holding any of them without a version was
# made by Burrow before migrations. (Fixed forever, like the baseline.)
BASELINE_TABLES = frozenset(
    {"users", "conversations", "events", "settings", "approvals", "grants", "sessions"}
)


def read_state(conn: sa.Connection) -> SchemaState:
    tables = frozenset(sa.inspect(conn).get_table_names())
    revisions: tuple[str, ...] = ()
    if VERSION_TABLE in tables:
        query = sa.text(f"SELECT version_num FROM {VERSION_TABLE} ORDER BY version_num")
        revisions = tuple(conn.execute(query).scalars())
    return SchemaState(revisions, tables)


async def ensure_schema(
    db: Database, *, upgrade: bool = True, versions: Sequence[Path] = (VERSIONS,)
) -> bool:
    """Bring the database to this code's head revision, or raise `SchemaError` saying why
    not and what to do. `upgrade=False` only checks (BURROW_AUTO_MIGRATE=false). True when
    it was not at head, so that Alembic ran."""
    head = head_revision(versions)
    if (await db.run(read_state)).revisions == (head,):
        return False
    if upgrade:
        await db.run_schema_change(lambda conn: upgrade_to_head(conn, versions))
    else:
        await db.run(lambda conn: _refuse_unless_at_head(conn, versions))
    return True


async def open_database(url: str, *, migrate: bool = True) -> Database:
    """Connect, then bring the schema to this code's revision (`migrate`) or only check
    that it is there; `SchemaError` says what to do otherwise."""
    db = connect(url)
    try:
        await ensure_schema(db, upgrade=migrate)
    except BaseException:
        await db.close()
        raise
    return db


async def prepare_database(url: str, *, upgrade: bool = True) -> bool:
    """`ensure_schema` on a connection of its own (`burrow serve`, before it listens)."""
    db = connect(url)
    try:
        return await ensure_schema(db, upgrade=upgrade)
    finally:
        await db.close()


def upgrade_to_head(conn: sa.Connection, versions: Sequence[Path] = (VERSIONS,)) -> None:
    """Run the migrations from the database's revision to head, on `conn`, in its transaction."""
    from alembic import command

    config = alembic_config(conn, versions)
    scripts = _scripts(config)
    state = read_state(conn)  # again: another replica may have upgraded while we waited
    head = _checked_head(state, scripts)
    if state.revisions == (head,):
        return
    if not state.revisions and state.tables & BASELINE_TABLES:
        _verify_baseline(conn, scripts)
        command.stamp(config, BASELINE)
    command.upgrade(config, "head")


def _refuse_unless_at_head(conn: sa.Connection, versions: Sequence[Path]) -> None:
    state = read_state(conn)
    head = _checked_head(state, _scripts(alembic_config(conn, versions)))
    if state.revisions != (head,):
        raise SchemaError(
            f"The database is {state.describe()} and this Burrow needs schema revision "
            f"{head}. Back it up, then run `{UPGRADE_COMMAND}` with the same "
            "BURROW_DATABASE_URL or --data-dir (or start with BURROW_AUTO_MIGRATE=true)."
        )


def _checked_head(state: SchemaState, scripts: ScriptDirectory) -> str:
    """The head revision, after refusing a database at a revision this code does not know."""
    heads = scripts.get_heads()
    if len(heads) != 1:
        raise SchemaError(
            f"The migrations have {len(heads)} heads ({', '.join(heads)}): two branches each "
            "added a revision. Renumber one to follow the other (down_revision)."
        )
    known = {script.revision for script in scripts.walk_revisions()}
    for revision in state.revisions:
        if revision not in known:
            raise SchemaError(
                f"The database is at schema revision {revision!r}, which this Burrow does not "
                f"know (its newest is {heads[0]!r}): a newer Burrow has migrated it. Run that "
                "newer version, or restore the backup taken before it upgraded the database."
            )
    return heads[0]


def _verify_baseline(conn: sa.Connection, scripts: ScriptDirectory) -> None:
    baseline = scripts.get_revision(BASELINE)
    assert baseline is not None
    differences = schema_diff(conn, baseline.module.metadata)
    if differences:
        raise SchemaError(
            "The database has Burrow's tables but no schema version, and they differ from the "
            f"schema Burrow had before migrations: {'; '.join(differences)}. Restore it from a "
            "backup, or point BURROW_DATABASE_URL / --data-dir at a new database."
        )


def schema_diff(conn: sa.Connection, metadata: sa.MetaData) -> list[str]:
    """How the database's tables differ from `metadata`'s, as Alembic's autogenerate sees
    them (empty when they match). Tables that are not in `metadata` are not compared."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    def ours(_obj: Any, name: str | None, kind: str, _reflected: bool, _other: Any) -> bool:
        return kind != "table" or name in metadata.tables

    context = MigrationContext.configure(conn, opts={"include_object": ours, "compare_type": True})
    return [_describe(op) for op in _flatten(compare_metadata(context, metadata))]


def _flatten(diff: list[Any]) -> list[tuple[Any, ...]]:
    # Changes to one column come as a list of tuples; the others as one tuple each.
    return [op for item in diff for op in (item if isinstance(item, list) else [item])]


def _describe(op: tuple[Any, ...]) -> str:
    """One difference, from the database's side: "missing column users.email"."""
    verb, _, what = op[0].partition("_")
    if verb == "modify":  # (kind, schema, table, column, existing, database's, expected)
        return f"{op[2]}.{op[3]} has {what} {op[5]!r}, expected {op[6]!r}"
    target = op[-1]
    name = target if isinstance(target, sa.Column) else getattr(target, "name", None) or target
    return f"{'missing' if verb == 'add' else 'unexpected'} {what} {name}"


async def describe(db: Database) -> str:
    """`burrow db current`: where the database is, against this code's head."""
    state, head = await db.run(read_state), head_revision()
    verdict = "up to date" if state.revisions == (head,) else f"run `{UPGRADE_COMMAND}`"
    if state.revisions and not set(state.revisions) <= _known_ids():
        verdict = "newer than this Burrow"
    return f"The database is {state.describe()}; this Burrow's head is {head}: {verdict}."


async def write_revision(
    message: str, *, metadata: sa.MetaData | None = None, directory: Path = VERSIONS
) -> Path:
    """`burrow db revision`: autogenerate the next revision into `directory`, from how
    `metadata` (schema.py's) differs from what the migrations make, computed on a scratch
    SQLite database brought to head. Batch operations, so it runs on SQLite too."""

    with tempfile.TemporaryDirectory() as scratch:
        db = await open_database(f"sqlite+aiosqlite:///{scratch}/scratch.db")
        try:
            return await db.run_schema_change(
                lambda conn: _autogenerate(conn, message, metadata, directory)
            )
        finally:
            await db.close()


def _autogenerate(
    conn: sa.Connection, message: str, metadata: sa.MetaData | None, directory: Path
) -> Path:
    from alembic import command

    def refuse_empty(_context: Any, _revision: Any, directives: list[Any]) -> None:
        if directives[0].upgrade_ops.is_empty():
            raise SchemaError(
                "schema.py and the migrations already agree: there is nothing to write. "
                "Change burrow/store/schema.py first."
            )

    versions = (VERSIONS,) if directory == VERSIONS else (VERSIONS, directory)
    config = alembic_config(conn, versions)
    config.attributes["process_revision_directives"] = refuse_empty
    if metadata is not None:
        config.attributes["target_metadata"] = metadata
    ruff = shutil.which("ruff", path=Path(sys.executable).parent) or shutil.which("ruff")
    if ruff:  # Alembic writes single quotes; `make lint` wants the house format
        hooks = {"hooks": "ruff", "ruff.type": "exec", "ruff.executable": ruff}
        hooks["ruff.options"] = "format REVISION_SCRIPT_FILENAME"
        for name, value in hooks.items():
            config.set_section_option("post_write_hooks", name, value)
    rev_id = f"{int(head_revision(versions)) + 1:04d}"
    script = command.revision(
        config, message, autogenerate=True, rev_id=rev_id, version_path=str(directory)
    )
    assert script is not None and not isinstance(script, list)
    return Path(script.path)


def alembic_config(conn: sa.Connection, versions: Sequence[Path] = (VERSIONS,)) -> Config:
    """Alembic's configuration without an alembic.ini: the scripts inside this package,
    `conn` for `migrations/env.py`."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("path_separator", "os")
    config.set_main_option("version_locations", os.pathsep.join(str(v) for v in versions))
    config.attributes["connection"] = conn
    return config


def _scripts(config: Config) -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(config)
