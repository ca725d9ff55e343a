"""Run leases: which replica runs a conversation's active run, until when.

Times are the database's (`now()` on PostgreSQL), so replicas' clocks need not agree.
Every change is one atomic statement: two replicas taking the same lease, or sweeping the
same lapsed one, queue on its row and exactly one gets it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from burrow.store.database import Database
from burrow.store.schema import run_leases

DEFAULT_LEASE_SECONDS = 12.0


@dataclass(frozen=True)
class Claim:
    """What taking a lease came to: ours (`holder` None), or held by `holder`."""

    holder: str | None
    # We took it from a previous holder that let it lapse (or from ourselves before a
    # restart): that run was cut off, and must be repaired before a new one starts.
    took_over: bool = False


class LeaseStore:
    def __init__(self, db: Database, replica: str, seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        self._db = db
        self.replica = replica
        self.seconds = seconds
        self._postgres = db.engine.dialect.name == "postgresql"

    def _now(self) -> Any:
        if self._postgres:
            return sa.func.now()
        return sa.literal(datetime.now(UTC), sa.DateTime(timezone=True))

    def _until(self) -> Any:
        if self._postgres:
            return sa.func.now() + sa.func.make_interval(0, 0, 0, 0, 0, 0, self.seconds)
        return sa.literal(
            datetime.now(UTC) + timedelta(seconds=self.seconds), sa.DateTime(timezone=True)
        )

    async def acquire(self, cid: str) -> Claim:
        """Take `cid`'s lease if it is free, lapsed, or already ours."""
        upsert = self._db.upsert(run_leases).values(
            conversation_id=cid, replica_id=self.replica, expires_at=self._until()
        )
        upsert = upsert.on_conflict_do_update(
            index_elements=[run_leases.c.conversation_id],
            set_={"replica_id": self.replica, "expires_at": self._until()},
            where=sa.or_(
                run_leases.c.expires_at < self._now(), run_leases.c.replica_id == self.replica
            ),
        ).returning(run_leases.c.conversation_id)
        before = sa.select(run_leases.c.replica_id).where(run_leases.c.conversation_id == cid)

        def take(conn: sa.Connection) -> Claim:
            previous = conn.execute(before).scalar_one_or_none()
            if conn.execute(upsert).first() is not None:
                return Claim(None, took_over=previous is not None)
            holder = conn.execute(before).scalar_one_or_none()
            return Claim(holder or "unknown")

        return await self._db.run(take)

    async def renew(self) -> set[str]:
        """Extend every lease this replica holds; the conversations it still holds."""
        query = (
            run_leases.update()
            .where(run_leases.c.replica_id == self.replica)
            .values(expires_at=self._until())
            .returning(run_leases.c.conversation_id)
        )
        return set(await self._db.run(lambda conn: conn.execute(query).scalars().all()))

    async def release(self, cid: str) -> None:
        query = run_leases.delete().where(
            run_leases.c.conversation_id == cid, run_leases.c.replica_id == self.replica
        )
        await self._db.run(lambda conn: conn.execute(query))

    async def claim_lapsed(self) -> list[str]:
        """Take every lease whose holder stopped renewing it; their conversations."""
        query = (
            run_leases.update()
            .where(run_leases.c.expires_at < self._now())
            .values(replica_id=self.replica, expires_at=self._until())
            .returning(run_leases.c.conversation_id)
        )
        return list(await self._db.run(lambda conn: conn.execute(query).scalars().all()))

    async def holder(self, cid: str) -> str | None:
        """The replica whose live lease covers `cid` (None: no live lease)."""
        query = sa.select(run_leases.c.replica_id).where(
            run_leases.c.conversation_id == cid, run_leases.c.expires_at >= self._now()
        )
        return await self._db.run(lambda conn: conn.execute(query).scalar_one_or_none())
