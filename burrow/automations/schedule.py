"""The schedule trigger: once a minute, each automation whose cron matches that minute (in
the server's local timezone) fires, with the payload `{"schedule": {"slot": "<ISO>"}}`.

Each (automation, minute) is claimed in the database first (`automation_ticks`), so with
several replicas on one PostgreSQL a tick fires once, on whichever replica claims it. A
minute the server was down for is not caught up later: a schedule says when work should
start, and a late start of a missed nightly job is the operator's call (fire it by HTTP)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from burrow.automations import cron
from burrow.automations.runner import AutomationRunner, QueueFull, Skipped
from burrow.runs.workspace.git.repo_import import RepoSource
from burrow.store.automations import Automation

log = logging.getLogger(__name__)

RepoOf = Callable[[Automation], Awaitable[RepoSource | None]]


def local_now() -> datetime:
    return datetime.now().astimezone()


def due(automation: Automation, minute: datetime) -> bool:
    """Whether one of its schedules matches `minute` (an aware datetime, seconds zero)."""
    before = minute - timedelta(minutes=1)
    for trigger in automation.triggers:
        if "schedule" in trigger and cron.parse(trigger["schedule"]).next_after(before) == minute:
            return True
    return False


class Scheduler:
    def __init__(
        self,
        runner: AutomationRunner,
        replica_id: str,
        repo_of: RepoOf,
        clock: Callable[[], datetime] = local_now,
    ) -> None:
        self._runner = runner
        self._replica_id = replica_id
        self._repo_of = repo_of
        self._clock = clock
        self._task: asyncio.Task[None] | None = None

    async def tick(self, now: datetime | None = None) -> list[str]:
        """Fire what is due in `now`'s minute; the ids of the conversations it started."""
        minute = (now or self._clock()).replace(second=0, microsecond=0)
        started = []
        for automation in await self._runner.store.scheduled():
            if not due(automation, minute):
                continue
            if not await self._runner.store.claim_tick(automation.id, minute, self._replica_id):
                continue  # another replica (or an earlier tick here) fires this one
            try:
                repo = await self._repo_of(automation)
                payload = {"schedule": {"slot": minute.isoformat()}}
                fired = await self._runner.fire(automation, payload, repo)
                started.append(fired.conversation_id)
            except (Skipped, QueueFull):
                log.info(
                    "automation %s: tick %s skipped, its run still goes", automation.id, minute
                )
            except Exception:  # one automation's trouble (a deleted secret) spares the rest
                log.warning("automation %s: tick %s failed", automation.id, minute, exc_info=True)
        return started

    async def _forever(self) -> None:
        for _ in iter(int, 1):
            now = self._clock()
            nxt = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
            await asyncio.sleep((nxt - now).total_seconds())
            try:
                await self.tick(nxt)
            except Exception:  # the database away for a moment: try again next minute
                log.warning("the automation scheduler's tick failed", exc_info=True)

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._forever())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
