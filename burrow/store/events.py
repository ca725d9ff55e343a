"""The journal's rows: gap-free numbering inside one transaction, and reads after a seq."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from burrow.store.records import Event, NewEvent, ProjectionChange
from burrow.store.schema import conversations, events


class ConversationGone(LookupError):
    """The conversation was deleted; nothing more can be appended to it."""


def timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class EventStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def append(
        self, cid: str, batch: Sequence[NewEvent], change: ProjectionChange
    ) -> list[Event]:
        """Number and insert `batch` after the conversation's last seq, in one transaction.

        Reserving the numbers with an UPDATE ... RETURNING on the conversation row makes
        concurrent writers (other replicas on PostgreSQL) queue on that row lock, so seqs
        stay gap-free and unique without a table lock.
        """
        ts = timestamp()
        values: dict[str, object] = {
            "last_seq": conversations.c.last_seq + len(batch),
            "updated_at": datetime.now(UTC),
            "prompt_tokens": conversations.c.prompt_tokens + change.prompt_tokens,
            "completion_tokens": conversations.c.completion_tokens + change.completion_tokens,
            "cost": conversations.c.cost + change.cost,
        }
        if change.status is not None:
            values["status"] = change.status
        if change.sandbox_status is not None:
            values["sandbox_status"] = change.sandbox_status
        async with self._engine.begin() as conn:
            last = (
                await conn.execute(
                    conversations.update()
                    .where(conversations.c.id == cid)
                    .values(**values)
                    .returning(conversations.c.last_seq)
                )
            ).scalar_one_or_none()
            if last is None:
                raise ConversationGone(cid)
            first = last - len(batch) + 1
            stored = [
                Event(
                    conversation_id=cid,
                    seq=first + i,
                    type=e.type,
                    ts=ts,
                    run_id=e.run_id,
                    data_json=json.dumps(e.data, ensure_ascii=False, separators=(",", ":")),
                )
                for i, e in enumerate(batch)
            ]
            await conn.execute(
                events.insert(),
                [
                    {
                        "conversation_id": cid,
                        "seq": e.seq,
                        "type": e.type,
                        "ts": e.ts,
                        "run_id": e.run_id,
                        "data": e.data_json,
                    }
                    for e in stored
                ],
            )
        return stored

    async def read(self, cid: str, after: int = 0, limit: int | None = None) -> list[Event]:
        query = (
            sa.select(events)
            .where(events.c.conversation_id == cid, events.c.seq > after)
            .order_by(events.c.seq)
        )
        if limit is not None:
            query = query.limit(limit)
        async with self._engine.connect() as conn:
            rows = await conn.execute(query)
            return [
                Event(
                    conversation_id=cid,
                    seq=r.seq,
                    type=r.type,
                    ts=r.ts,
                    run_id=r.run_id,
                    data_json=r.data,
                )
                for r in rows
            ]
