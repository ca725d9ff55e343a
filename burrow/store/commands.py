"""A person's actions for a run's owner replica (runs/conversations/actions.py): the
durable half of routing a request to another replica.

The asker inserts a row and NOTIFYs the owner in one transaction; the owner writes the
result and NOTIFYs the asker in another. A notification can be lost (a LISTEN connection
reconnecting): the rows are the truth, and both sides look at them again.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from burrow.store.database import Database
from burrow.store.notify import COMMANDS, notify
from burrow.store.schema import run_commands


@dataclass(frozen=True)
class Command:
    id: str
    conversation_id: str
    origin: str
    kind: str
    body: dict[str, Any]


class CommandStore:
    def __init__(self, db: Database, replica: str) -> None:
        self._db = db
        self.replica = replica
        self._postgres = db.engine.dialect.name == "postgresql"

    async def post(self, cid: str, target: str, kind: str, body: dict[str, Any]) -> str:
        """Ask `target` to apply a command to `cid`; its id."""
        command_id = f"cmd_{secrets.token_hex(8)}"
        row = {
            "id": command_id,
            "conversation_id": cid,
            "target": target,
            "origin": self.replica,
            "kind": kind,
            "body": json.dumps(body),
            "created_at": datetime.now(UTC),
        }

        def write(conn: sa.Connection) -> None:
            conn.execute(run_commands.insert(), row)
            if self._postgres:
                notify(conn, COMMANDS, f"run {target} {command_id}")

        await self._db.run(write)
        return command_id

    async def take(self, command_id: str) -> Command | None:
        """A command addressed to this replica and not answered yet."""
        query = sa.select(run_commands).where(
            run_commands.c.id == command_id,
            run_commands.c.target == self.replica,
            run_commands.c.result.is_(None),
        )
        row = await self._db.run(lambda conn: conn.execute(query).first())
        if row is None:
            return None
        return Command(row.id, row.conversation_id, row.origin, row.kind, json.loads(row.body))

    async def pending(self) -> list[str]:
        """Ids of the commands addressed to this replica that wait for a result."""
        query = sa.select(run_commands.c.id).where(
            run_commands.c.target == self.replica, run_commands.c.result.is_(None)
        )
        return list(await self._db.run(lambda conn: conn.execute(query).scalars().all()))

    async def answer(self, command: Command, result: dict[str, Any]) -> None:
        query = (
            run_commands.update()
            .where(run_commands.c.id == command.id, run_commands.c.result.is_(None))
            .values(result=json.dumps(result))
        )

        def write(conn: sa.Connection) -> None:
            if conn.execute(query).rowcount and self._postgres:
                notify(conn, COMMANDS, f"done {command.origin} {command.id}")

        await self._db.run(write)

    async def result(self, command_id: str) -> dict[str, Any] | None:
        query = sa.select(run_commands.c.result).where(run_commands.c.id == command_id)
        found = await self._db.run(lambda conn: conn.execute(query).scalar_one_or_none())
        return None if found is None else dict(json.loads(found))

    async def withdraw(self, command_id: str) -> bool:
        """Take back an unanswered command (its target died); False: it was answered."""
        query = run_commands.delete().where(
            run_commands.c.id == command_id, run_commands.c.result.is_(None)
        )
        return bool(await self._db.run(lambda conn: conn.execute(query).rowcount))

    async def forget(self, command_id: str) -> None:
        query = run_commands.delete().where(run_commands.c.id == command_id)
        await self._db.run(lambda conn: conn.execute(query))

    async def prune(self, older_than: float) -> int:
        """Drop commands nobody came back for (their asker died while waiting)."""
        cutoff = datetime.now(UTC) - timedelta(seconds=older_than)
        query = run_commands.delete().where(run_commands.c.created_at < cutoff)
        return int(await self._db.run(lambda conn: conn.execute(query).rowcount))
