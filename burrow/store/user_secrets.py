"""Each user's secrets: sealed values by environment variable name, never listed with values.

A conversation lists the names it uses (`conversations.secrets`); deleting a secret removes
its name from its owner's conversations in the same transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa

from burrow.store.database import Database
from burrow.store.records import utc
from burrow.store.schema import conversations, user_secrets
from burrow.store.secrets import SecretBox


@dataclass(frozen=True)
class SecretName:
    name: str
    updated_at: datetime


@dataclass(frozen=True)
class ChosenSecrets:
    owner_id: str
    chosen: tuple[str, ...]
    values: dict[str, str]  # every secret of the owner: name -> value


class UserSecretStore:
    def __init__(self, db: Database, box: SecretBox) -> None:
        self._db = db
        self._box = box

    async def names(self, owner_id: str) -> list[SecretName]:
        query = (
            sa.select(user_secrets.c.name, user_secrets.c.updated_at)
            .where(user_secrets.c.owner_id == owner_id)
            .order_by(user_secrets.c.name)
        )
        return await self._db.run(
            lambda conn: [SecretName(r.name, utc(r.updated_at)) for r in conn.execute(query)]
        )

    async def put(self, owner_id: str, name: str, value: str) -> SecretName:
        sealed = self._box.seal(value)
        ts = datetime.now(UTC)
        key = (user_secrets.c.owner_id == owner_id) & (user_secrets.c.name == name)

        def upsert(conn: sa.Connection) -> None:
            conn.execute(user_secrets.delete().where(key))
            conn.execute(
                user_secrets.insert().values(
                    owner_id=owner_id, name=name, value=sealed, updated_at=ts
                )
            )

        await self._db.run(upsert)
        return SecretName(name, ts)

    async def delete(self, owner_id: str, name: str) -> bool:
        """Forget the secret and unselect it everywhere; False when there was none."""
        key = (user_secrets.c.owner_id == owner_id) & (user_secrets.c.name == name)

        def remove(conn: sa.Connection) -> bool:
            if conn.execute(user_secrets.delete().where(key)).rowcount == 0:
                return False
            chosen = conn.execute(
                sa.select(conversations.c.id, conversations.c.secrets).where(
                    conversations.c.owner_id == owner_id,
                    conversations.c.secrets.contains(json.dumps(name), autoescape=True),
                )
            )
            for row in list(chosen):
                names = [n for n in json.loads(row.secrets) if n != name]
                conn.execute(
                    conversations.update()
                    .where(conversations.c.id == row.id)
                    .values(secrets=json.dumps(names))
                )
            return True

        return await self._db.run(remove)

    async def values(self, owner_id: str) -> dict[str, str]:
        """Every secret of `owner_id`, decrypted: name -> value."""
        query = sa.select(user_secrets.c.name, user_secrets.c.value).where(
            user_secrets.c.owner_id == owner_id
        )
        rows = await self._db.run(lambda conn: list(conn.execute(query)))
        return {r.name: self._box.open(r.value) for r in rows}

    async def of_conversation(self, cid: str) -> ChosenSecrets | None:
        """The conversation's owner, its chosen names and every value of that owner, in one
        query (it runs before each command); None when the conversation is gone."""
        query = (
            sa.select(
                conversations.c.owner_id,
                conversations.c.secrets,
                user_secrets.c.name,
                user_secrets.c.value,
            )
            .select_from(conversations)
            .outerjoin(user_secrets, user_secrets.c.owner_id == conversations.c.owner_id)
            .where(conversations.c.id == cid)
        )
        rows = await self._db.run(lambda conn: list(conn.execute(query)))
        if not rows:
            return None
        values = {r.name: self._box.open(r.value) for r in rows if r.name is not None}
        return ChosenSecrets(rows[0].owner_id, tuple(json.loads(rows[0].secrets)), values)
