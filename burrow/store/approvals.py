"""The approval audit trail and the grants that "allow for this session" leaves behind."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from burrow.store.database import Database
from burrow.store.records import utc
from burrow.store.schema import approvals, grants


def arguments_digest(arguments: dict[str, Any] | str) -> str:
    """A digest of the call's arguments that ignores key order and spacing.

    Invalid JSON (kept as text) is hashed as text, so it never matches a valid `{}`.
    """
    if isinstance(arguments, str):
        canonical = "text:" + arguments
    else:
        canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class ApprovalRecord:
    request_id: str
    conversation_id: str
    call_id: str
    tool: str
    arguments_digest: str
    risk: str
    reason: str
    decision: str | None
    requested_at: datetime
    resolved_at: datetime | None


@dataclass(frozen=True)
class Grant:
    conversation_id: str
    tool: str
    arguments_digest: str
    request_id: str
    decision: str
    granted_at: datetime


class ApprovalStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record_request(
        self,
        request_id: str,
        cid: str,
        call_id: str,
        tool: str,
        digest: str,
        risk: str,
        reason: str,
    ) -> None:
        query = approvals.insert().values(
            request_id=request_id,
            conversation_id=cid,
            call_id=call_id,
            tool=tool,
            arguments_digest=digest,
            risk=risk,
            reason=reason,
            decision=None,
            requested_at=datetime.now(UTC),
        )
        await self._db.run(lambda conn: conn.execute(query))

    async def resolve(self, request_id: str, decision: str) -> ApprovalRecord | None:
        """Record the answer (once) and, for allow_session, the grant. None if unknown or
        already answered."""

        def write(conn: sa.Connection) -> ApprovalRecord | None:
            now = datetime.now(UTC)
            updated = conn.execute(
                approvals.update()
                .where(approvals.c.request_id == request_id, approvals.c.decision.is_(None))
                .values(decision=decision, resolved_at=now)
            )
            if updated.rowcount != 1:
                return None
            row = conn.execute(
                sa.select(approvals).where(approvals.c.request_id == request_id)
            ).one()
            if decision == "allow_session":
                key = (
                    (grants.c.conversation_id == row.conversation_id)
                    & (grants.c.tool == row.tool)
                    & (grants.c.arguments_digest == row.arguments_digest)
                )
                conn.execute(grants.delete().where(key))
                conn.execute(
                    grants.insert().values(
                        conversation_id=row.conversation_id,
                        tool=row.tool,
                        arguments_digest=row.arguments_digest,
                        request_id=request_id,
                        decision=decision,
                        granted_at=now,
                    )
                )
            return _record(row)

        return await self._db.run(write)

    async def get(self, request_id: str) -> ApprovalRecord | None:
        query = sa.select(approvals).where(approvals.c.request_id == request_id)
        row = await self._db.run(lambda conn: conn.execute(query).first())
        return _record(row) if row else None

    async def grant_for(self, cid: str, tool: str, digest: str) -> Grant | None:
        query = sa.select(grants).where(
            grants.c.conversation_id == cid,
            grants.c.tool == tool,
            grants.c.arguments_digest == digest,
        )
        row = await self._db.run(lambda conn: conn.execute(query).first())
        if row is None:
            return None
        return Grant(
            row.conversation_id,
            row.tool,
            row.arguments_digest,
            row.request_id,
            row.decision,
            utc(row.granted_at),
        )


def _record(row: Any) -> ApprovalRecord:
    return ApprovalRecord(
        request_id=row.request_id,
        conversation_id=row.conversation_id,
        call_id=row.call_id,
        tool=row.tool,
        arguments_digest=row.arguments_digest,
        risk=row.risk,
        reason=row.reason,
        decision=row.decision,
        requested_at=utc(row.requested_at),
        resolved_at=utc(row.resolved_at) if row.resolved_at else None,
    )
