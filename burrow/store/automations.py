"""Automations (DESIGN.md §9), each one its owner's: every lookup takes the owner, so
another user's automation is as good as absent. The fire token is stored as a SHA-256."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from burrow.store.database import Database
from burrow.store.records import utc
from burrow.store.schema import (
    automation_runs,
    automation_ticks,
    automations,
    conversations,
    github_deliveries,
)


@dataclass(frozen=True)
class Automation:
    id: str
    owner_id: str
    name: str
    prompt: str
    approval_mode: str
    budget: dict[str, float]
    result: str
    triggers: list[dict[str, Any]] = field(default_factory=list)
    repo: dict[str, Any] | None = None
    environment: str | None = None
    model: str | None = None
    attempts: int | None = None
    concurrency: str = "queue"  # a trigger during a run: "queue" after it, or "skip"
    pull_request: dict[str, Any] | None = None  # {secret?, base?} for result pull_request
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class AutomationRun:
    """What became of one conversation an automation started (`automation_runs`)."""

    conversation_id: str
    automation_id: str
    result_status: str  # pending | none | pushed | opened | updated | failed | skipped
    result_detail: str | None = None
    repository: str | None = None  # "owner/name", lower case
    branch: str | None = None
    pull_number: int | None = None
    pull_url: str | None = None
    commit: str | None = None
    updated_at: datetime | None = None


def _run(row: Any) -> AutomationRun:
    return AutomationRun(
        conversation_id=row.conversation_id,
        automation_id=row.automation_id,
        result_status=row.result_status,
        result_detail=row.result_detail,
        repository=row.repository,
        branch=row.branch,
        pull_number=row.pull_number,
        pull_url=row.pull_url,
        commit=row.commit,
        updated_at=utc(row.updated_at),
    )


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return f"bat_{secrets.token_urlsafe(32)}"


def _automation(row: Any) -> Automation:
    return Automation(
        id=row.id,
        owner_id=row.owner_id,
        name=row.name,
        prompt=row.prompt,
        approval_mode=row.approval_mode,
        budget=json.loads(row.budget),
        result=row.result,
        triggers=json.loads(row.triggers),
        repo=None if row.repo is None else json.loads(row.repo),
        environment=row.environment,
        model=row.model,
        attempts=row.attempts,
        concurrency=row.concurrency,
        pull_request=None if row.pull_request is None else json.loads(row.pull_request),
        created_at=utc(row.created_at),
        updated_at=utc(row.updated_at),
    )


def _columns(a: Automation) -> dict[str, Any]:
    return {
        "name": a.name,
        "prompt": a.prompt,
        "approval_mode": a.approval_mode,
        "budget": json.dumps(a.budget),
        "result": a.result,
        "triggers": json.dumps(a.triggers),
        "repo": None if a.repo is None else json.dumps(a.repo),
        "environment": a.environment,
        "model": a.model,
        "attempts": a.attempts,
        "concurrency": a.concurrency,
        "pull_request": None if a.pull_request is None else json.dumps(a.pull_request),
    }


class AutomationStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, automation: Automation) -> tuple[Automation, str]:
        """The stored automation and its fire token, which is shown this once."""
        ts = datetime.now(UTC)
        token = new_token()
        stored = replace(automation, id=f"a_{secrets.token_hex(8)}", created_at=ts, updated_at=ts)
        await self._db.run(
            lambda conn: conn.execute(
                automations.insert().values(
                    id=stored.id,
                    owner_id=stored.owner_id,
                    token_hash=token_hash(token),
                    created_at=ts,
                    updated_at=ts,
                    **_columns(stored),
                )
            )
        )
        return stored, token

    async def get(self, owner_id: str, aid: str) -> Automation | None:
        query = sa.select(automations).where(
            automations.c.id == aid, automations.c.owner_id == owner_id
        )
        row = await self._db.run(lambda conn: conn.execute(query).first())
        return _automation(row) if row else None

    async def by_token(self, aid: str, token: str) -> Automation | None:
        """The automation when `token` is its fire token (compared in constant time)."""
        query = sa.select(automations).where(automations.c.id == aid)
        row = await self._db.run(lambda conn: conn.execute(query).first())
        if row is None or not hmac.compare_digest(row.token_hash, token_hash(token)):
            return None
        return _automation(row)

    async def of_owner(self, owner_id: str) -> list[Automation]:
        query = (
            sa.select(automations)
            .where(automations.c.owner_id == owner_id)
            .order_by(automations.c.created_at, automations.c.id)
        )
        return await self._db.run(lambda conn: [_automation(r) for r in conn.execute(query)])

    async def count(self, owner_id: str) -> int:
        query = (
            sa.select(sa.func.count())
            .select_from(automations)
            .where(automations.c.owner_id == owner_id)
        )
        return await self._db.run(lambda conn: int(conn.execute(query).scalar_one()))

    async def update(self, automation: Automation) -> Automation | None:
        ts = datetime.now(UTC)
        query = (
            automations.update()
            .where(automations.c.id == automation.id, automations.c.owner_id == automation.owner_id)
            .values(updated_at=ts, **_columns(automation))
        )
        changed = await self._db.run(lambda conn: conn.execute(query).rowcount)
        return replace(automation, updated_at=ts) if changed else None

    async def delete(self, owner_id: str, aid: str) -> bool:
        query = automations.delete().where(
            automations.c.id == aid, automations.c.owner_id == owner_id
        )
        return await self._db.run(lambda conn: conn.execute(query).rowcount > 0)

    async def scheduled(self) -> list[Automation]:
        """Every user's automations with a schedule trigger (for the scheduler)."""
        query = sa.select(automations).where(automations.c.triggers.contains('"schedule"'))
        return await self._db.run(lambda conn: [_automation(r) for r in conn.execute(query)])

    async def claim_tick(self, aid: str, slot: datetime, replica_id: str) -> bool:
        """True for the one caller, across replicas, that takes `slot` of `aid`'s schedule.
        The insert is the claim: a second one breaks the primary key and claims nothing."""
        values = {"automation_id": aid, "slot": slot.astimezone(UTC), "replica_id": replica_id}

        def claim(conn: sa.Connection) -> bool:
            # A nested transaction, so the refused insert leaves the outer one usable.
            try:
                with conn.begin_nested():
                    conn.execute(automation_ticks.insert().values(**values))
            except sa.exc.IntegrityError:
                return False
            return True

        return await self._db.run(claim)

    async def with_github(self) -> list[Automation]:
        """Every user's automations with a GitHub trigger (the webhook filters them)."""
        query = sa.select(automations).where(automations.c.triggers.contains('"github"'))
        return await self._db.run(lambda conn: [_automation(r) for r in conn.execute(query)])

    async def first_delivery(self, delivery_id: str, keep: timedelta) -> bool:
        """True the first time `delivery_id` is seen; deliveries older than `keep` are
        forgotten (GitHub redelivers within days, not months)."""
        ts = datetime.now(UTC)

        def take(conn: sa.Connection) -> bool:
            conn.execute(
                github_deliveries.delete().where(github_deliveries.c.received_at < ts - keep)
            )
            try:
                with conn.begin_nested():
                    conn.execute(
                        github_deliveries.insert().values(delivery_id=delivery_id, received_at=ts)
                    )
            except sa.exc.IntegrityError:
                return False
            return True

        return await self._db.run(take)

    async def by_id(self, aid: str) -> Automation | None:
        """Any user's automation (for the pull-request loop, which found it by its run)."""
        query = sa.select(automations).where(automations.c.id == aid)
        row = await self._db.run(lambda conn: conn.execute(query).first())
        return _automation(row) if row else None

    async def mark(self, cid: str, aid: str) -> None:
        """Record that automation `aid` started conversation `cid`, its result pending."""
        query = conversations.update().where(conversations.c.id == cid).values(automation_id=aid)
        record = automation_runs.insert().values(
            conversation_id=cid, automation_id=aid, result_status="pending",
            updated_at=datetime.now(UTC),
        )  # fmt: skip

        def both(conn: sa.Connection) -> None:
            conn.execute(query)
            conn.execute(record)

        await self._db.run(both)

    async def set_result(self, cid: str, status: str, **values: Any) -> None:
        """The run's result (`status`, and any of detail, repository, branch, pull_number,
        pull_url, commit); fields not given keep their value."""
        if "detail" in values:
            values["result_detail"] = values.pop("detail")
        query = (
            automation_runs.update()
            .where(automation_runs.c.conversation_id == cid)
            .values(result_status=status, updated_at=datetime.now(UTC), **values)
        )
        await self._db.run(lambda conn: conn.execute(query))

    async def run_of(self, cid: str) -> AutomationRun | None:
        return await self._one_run(automation_runs.c.conversation_id == cid)

    async def run_by_pull(self, aid: str, repository: str, number: int) -> AutomationRun | None:
        """The run of `aid` that opened pull request `number` on `repository`."""
        return await self._one_run(
            automation_runs.c.automation_id == aid,
            automation_runs.c.repository == repository.lower(),
            automation_runs.c.pull_number == number,
        )

    async def run_by_branch(self, aid: str, repository: str, branch: str) -> AutomationRun | None:
        """The run of `aid` that pushed `branch` to `repository`."""
        return await self._one_run(
            automation_runs.c.automation_id == aid,
            automation_runs.c.repository == repository.lower(),
            automation_runs.c.branch == branch,
        )

    async def _one_run(self, *where: sa.ColumnElement[bool]) -> AutomationRun | None:
        query = sa.select(automation_runs).where(*where)
        row = await self._db.run(lambda conn: conn.execute(query).first())
        return _run(row) if row else None

    async def results_of(self, aid: str) -> list[AutomationRun]:
        """Each run's result, newest conversation first."""
        query = (
            sa.select(automation_runs)
            .join(conversations, conversations.c.id == automation_runs.c.conversation_id)
            .where(automation_runs.c.automation_id == aid)
            .order_by(conversations.c.created_at.desc())
        )
        return await self._db.run(lambda conn: [_run(r) for r in conn.execute(query)])

    async def runs_of(self, aid: str) -> list[str]:
        """The conversations it started, newest first."""
        query = (
            sa.select(conversations.c.id)
            .where(conversations.c.automation_id == aid)
            .order_by(conversations.c.created_at.desc())
        )
        return await self._db.run(lambda conn: list(conn.execute(query).scalars()))
