"""Conversations: creation, ownership-checked lookup, listing, update, delete."""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa

from burrow.llm.base import Usage
from burrow.store.database import Database
from burrow.store.records import Conversation, utc
from burrow.store.schema import conversations


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def now() -> datetime:
    return datetime.now(UTC)


def _conversation(row: Any) -> Conversation:
    return Conversation(
        id=row.id,
        owner_id=row.owner_id,
        title=row.title,
        profile=row.profile,
        approval_mode=row.approval_mode,
        created_at=utc(row.created_at),
        updated_at=utc(row.updated_at),
        status=row.status,
        sandbox_status=row.sandbox_status,
        last_seq=row.last_seq,
        usage=Usage(
            prompt_tokens=row.prompt_tokens,
            completion_tokens=row.completion_tokens,
            cache_read_tokens=row.cache_read_tokens,
            cache_write_tokens=row.cache_write_tokens,
            cost=row.cost,
        ),
        secrets=tuple(json.loads(row.secrets)),
        model=row.model,
        budget=json.loads(row.budget or "{}"),
        network=row.network,
        environment=row.environment,
        automation_id=row.automation_id,
    )


class _Keep:
    """The default of an update field: leave the stored value as it is."""


KEEP = _Keep()


class ConversationStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(
        self,
        owner_id: str,
        title: str,
        profile: str = "default",
        *,
        model: str | None = None,
        approval_mode: str = "ask",
        network: str | None = None,
        environment: str | None = None,
    ) -> Conversation:
        ts = now()
        cid = new_id("c")
        await self._db.run(
            lambda conn: conn.execute(
                conversations.insert().values(
                    id=cid,
                    owner_id=owner_id,
                    title=title,
                    profile=profile,
                    approval_mode=approval_mode,
                    model=model,
                    network=network,
                    environment=environment,
                    created_at=ts,
                    updated_at=ts,
                    status="idle",
                    sandbox_status="none",
                    last_seq=0,
                    prompt_tokens=0,
                    completion_tokens=0,
                    cost=0.0,
                    cache_read_tokens=0,
                    cache_write_tokens=0,
                    secrets="[]",
                )
            )
        )
        found = await self.get(cid)
        assert found is not None
        return found

    async def get(self, cid: str, owner_id: str | None = None) -> Conversation | None:
        """The conversation, or None when it does not exist or is not `owner_id`'s."""
        query = sa.select(conversations).where(conversations.c.id == cid)
        if owner_id is not None:
            query = query.where(conversations.c.owner_id == owner_id)
        row = await self._db.run(lambda conn: conn.execute(query).first())
        return _conversation(row) if row else None

    async def owner_of(self, cid: str) -> str | None:
        """Who owns the conversation (for per-user quotas); None when it does not exist."""
        query = sa.select(conversations.c.owner_id).where(conversations.c.id == cid)
        owner: str | None = await self._db.run(lambda conn: conn.execute(query).scalar())
        return owner

    async def ids_of(self, owner_id: str) -> list[str]:
        """Every conversation id of the owner (per-user disk quota: all, not a page)."""
        query = sa.select(conversations.c.id).where(conversations.c.owner_id == owner_id)
        return await self._db.run(lambda conn: list(conn.execute(query).scalars()))

    async def network_of(self, cid: str) -> Literal["none", "egress"] | None:
        """The sandbox's network policy (None: the server's default)."""
        query = sa.select(conversations.c.network).where(conversations.c.id == cid)
        chosen = await self._db.run(lambda conn: conn.execute(query).scalar())
        return "egress" if chosen == "egress" else "none" if chosen == "none" else None

    async def environment_of(self, cid: str) -> str | None:
        """The environment its sandbox starts from (None: the host's system)."""
        query = sa.select(conversations.c.environment).where(conversations.c.id == cid)
        chosen: str | None = await self._db.run(lambda conn: conn.execute(query).scalar())
        return chosen

    async def owned_by(self, owner_id: str, limit: int = 200) -> list[Conversation]:
        query = (
            sa.select(conversations)
            .where(conversations.c.owner_id == owner_id)
            .order_by(conversations.c.updated_at.desc(), conversations.c.id.desc())
            .limit(limit)
        )
        return await self._db.run(lambda conn: [_conversation(r) for r in conn.execute(query)])

    async def with_status(self, status: str) -> list[Conversation]:
        query = sa.select(conversations).where(conversations.c.status == status)
        return await self._db.run(lambda conn: [_conversation(r) for r in conn.execute(query)])

    async def update(
        self,
        cid: str,
        *,
        title: str | None = None,
        approval_mode: str | None = None,
        secrets: list[str] | None = None,
        model: str | _Keep | None = KEEP,
        budget: dict[str, float] | None = None,
        network: str | None = None,
        profile: str | None = None,
    ) -> None:
        """Change what is given; `model=None` goes back to the server's model, `budget`
        replaces the stored overrides as a whole."""
        # Not updated_at: the list is ordered by activity, and a setting is not activity.
        values: dict[str, object] = {}
        if profile is not None:
            values["profile"] = profile
        if not isinstance(model, _Keep):
            values["model"] = model
        if budget is not None:
            values["budget"] = json.dumps(budget, sort_keys=True)
        if title is not None:
            values["title"] = title
        if approval_mode is not None:
            values["approval_mode"] = approval_mode
        if secrets is not None:
            values["secrets"] = json.dumps(sorted(set(secrets)))
        if network is not None:
            values["network"] = network
        if not values:
            return
        query = conversations.update().where(conversations.c.id == cid).values(**values)
        await self._db.run(lambda conn: conn.execute(query))

    async def set_status(self, cid: str, status: str) -> None:
        query = conversations.update().where(conversations.c.id == cid).values(status=status)
        await self._db.run(lambda conn: conn.execute(query))

    async def delete(self, cid: str) -> None:
        # Events go with the row through ON DELETE CASCADE.
        query = conversations.delete().where(conversations.c.id == cid)
        await self._db.run(lambda conn: conn.execute(query))
