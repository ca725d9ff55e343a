"""The journal's rows: gap-free numbering inside one transaction, and reads after a seq."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

from burrow.store.database import Database
from burrow.store.notify import EVENTS, notify
from burrow.store.records import Event, NewEvent, ProjectionChange
from burrow.store.schema import conversations, events, run_leases
from burrow.store.secrets import Redactor


class ConversationGone(LookupError):
    """The conversation was deleted; nothing more can be appended to it."""


class LeaseLost(RuntimeError):
    """This replica's run lease of the conversation is gone (another replica took it over
    and repaired the run): what it would append now would follow that repair."""


def timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# Built once: composing SQLAlchemy statements costs more than running them on SQLite.
_RESERVE_SEQS = (
    conversations.update()
    .where(conversations.c.id == sa.bindparam("p_cid"))
    .values(
        last_seq=conversations.c.last_seq + sa.bindparam("p_count", type_=sa.Integer),
        updated_at=sa.func.coalesce(
            sa.bindparam("p_now", type_=sa.DateTime(timezone=True)), conversations.c.updated_at
        ),
        prompt_tokens=conversations.c.prompt_tokens + sa.bindparam("p_prompt", type_=sa.BigInteger),
        completion_tokens=conversations.c.completion_tokens
        + sa.bindparam("p_completion", type_=sa.BigInteger),
        cache_read_tokens=conversations.c.cache_read_tokens
        + sa.bindparam("p_cache_read", type_=sa.BigInteger),
        cache_write_tokens=conversations.c.cache_write_tokens
        + sa.bindparam("p_cache_write", type_=sa.BigInteger),
        cost=conversations.c.cost + sa.bindparam("p_cost", type_=sa.Float),
        status=sa.func.coalesce(sa.bindparam("p_status", type_=sa.String), conversations.c.status),
        sandbox_status=sa.func.coalesce(
            sa.bindparam("p_sandbox", type_=sa.String), conversations.c.sandbox_status
        ),
    )
    .returning(conversations.c.last_seq)
)
_INSERT_EVENTS = events.insert()
# The same reservation, only while `p_replica` still holds the conversation's run lease:
# a replica that stalled past its lease cannot write after the one that took it over.
_RESERVE_SEQS_FENCED = _RESERVE_SEQS.where(
    sa.exists().where(
        run_leases.c.conversation_id == sa.bindparam("p_cid"),
        run_leases.c.replica_id == sa.bindparam("p_replica"),
    )
)
_EXISTS = sa.select(conversations.c.id).where(conversations.c.id == sa.bindparam("p_cid"))

# What an event adds to its data on the wire (seq, type, ts, run_id and the JSON around them).
ENVELOPE_BYTES = 128


class _byte_length(FunctionElement[int]):
    """Length in bytes of a text column: `octet_length` where the database has it."""

    type = sa.Integer()
    inherit_cache = True


@compiles(_byte_length)
def _octet_length(
    element: _byte_length, compiler: sa.sql.compiler.SQLCompiler, **kw: object
) -> str:
    return f"octet_length({compiler.process(element.clauses, **kw)})"


@compiles(_byte_length, "sqlite")
def _sqlite_byte_length(
    element: _byte_length, compiler: sa.sql.compiler.SQLCompiler, **kw: object
) -> str:
    return f"length(CAST({compiler.process(element.clauses, **kw)} AS BLOB))"


class EventStore:
    def __init__(
        self, db: Database, redactor: Redactor | None = None, *, announce_as: str | None = None
    ) -> None:
        self._db = db
        self._redactor = redactor or Redactor()
        # With replicas (PostgreSQL): each commit NOTIFYs the others, signed with this
        # replica's id so it can ignore its own (it published them in-process already).
        # Other databases have no NOTIFY (nor several replicas).
        postgres = db.engine.dialect.name == "postgresql"
        self._announce_as = announce_as if postgres else None

    async def append(
        self,
        cid: str,
        batch: Sequence[NewEvent],
        change: ProjectionChange,
        fence: str | None = None,
    ) -> list[Event]:
        """Number and insert `batch` after the conversation's last seq, in one transaction;
        with `fence` (a replica id), only while that replica holds the run lease.

        Reserving the numbers with an UPDATE ... RETURNING on the conversation row makes
        concurrent writers (other replicas on PostgreSQL) queue on that row lock, so seqs
        stay gap-free and unique without a table lock.
        """
        ts = timestamp()
        params = {
            "p_cid": cid,
            "p_count": len(batch),
            "p_now": datetime.now(UTC) if change.activity else None,
            "p_prompt": change.usage.prompt_tokens,
            "p_completion": change.usage.completion_tokens,
            "p_cache_read": change.usage.cache_read_tokens,
            "p_cache_write": change.usage.cache_write_tokens,
            "p_cost": change.usage.cost,
            "p_status": change.status,
            "p_sandbox": change.sandbox_status,
        }

        redact = self._redactor.apply
        replica = self._announce_as

        def write(conn: sa.Connection) -> list[Event]:
            if fence is None:
                last = conn.execute(_RESERVE_SEQS, params).scalar_one_or_none()
            else:
                reserve = _RESERVE_SEQS_FENCED
                last = conn.execute(reserve, {**params, "p_replica": fence}).scalar_one_or_none()
                if last is None and conn.execute(_EXISTS, {"p_cid": cid}).first() is not None:
                    raise LeaseLost(cid)
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
                    data_json=redact(json.dumps(e.data, ensure_ascii=False, separators=(",", ":"))),
                )
                for i, e in enumerate(batch)
            ]
            conn.execute(
                _INSERT_EVENTS,
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
            if replica is not None:
                notify(conn, EVENTS, f"{cid} {first} {last} {replica}")
            return stored

        return await self._db.run(write)

    async def read(
        self, cid: str, after: int = 0, limit: int | None = None, max_bytes: int | None = None
    ) -> list[Event]:
        """Events after seq `after`, in order: at most `limit` of them and, with `max_bytes`,
        only as many as fit in that many bytes of `data` (always at least one, so a reader
        paging on the last seq it got never stalls)."""
        where = (events.c.conversation_id == cid, events.c.seq > after)
        sizes = sa.select(events.c.seq, _byte_length(events.c.data)).where(*where)
        sizes = sizes.order_by(events.c.seq).limit(limit)

        def fetch(conn: sa.Connection) -> list[Event]:
            query = sa.select(events).where(*where).order_by(events.c.seq).limit(limit)
            if max_bytes is not None:
                # Sizes first, so a page never loads more rows than it returns.
                last, total = None, 0
                for seq, size in conn.execute(sizes):
                    total += (size or 0) + ENVELOPE_BYTES
                    if last is not None and total > max_bytes:
                        break
                    last = seq
                if last is None:
                    return []
                query = query.where(events.c.seq <= last)
            return [_event(cid, r) for r in conn.execute(query)]

        return await self._db.run(fetch)

    async def run_start(self, run_id: str) -> tuple[str, int] | None:
        """The conversation a run was in and the seq of its run.started, or None (by
        ix_events_run_started)."""
        query = (
            sa.select(events.c.conversation_id, events.c.seq)
            .where(events.c.run_id == run_id, events.c.type == "run.started")
            .limit(1)
        )

        def fetch(conn: sa.Connection) -> tuple[str, int] | None:
            row = conn.execute(query).first()
            return None if row is None else (row[0], row[1])

        return await self._db.run(fetch)

    async def last_of(self, cids: Sequence[str], types: Sequence[str]) -> dict[str, Event]:
        """Each conversation's latest event of one of `types` (conversations with none are
        left out). One indexed backward scan per conversation, stopping at the first hit."""

        def fetch(conn: sa.Connection) -> dict[str, Event]:
            found = {}
            for cid in cids:
                row = conn.execute(
                    sa.select(events)
                    .where(events.c.conversation_id == cid, events.c.type.in_(types))
                    .order_by(events.c.seq.desc())
                    .limit(1)
                ).first()
                if row is not None:
                    found[cid] = _event(cid, row)
            return found

        return await self._db.run(fetch)


def _event(cid: str, row: Any) -> Event:
    return Event(
        conversation_id=cid,
        seq=row.seq,
        type=row.type,
        ts=row.ts,
        run_id=row.run_id,
        data_json=row.data,
    )
