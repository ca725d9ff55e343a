"""The schedule trigger under a controllable clock, through a real server's services: a
tick fires once across two schedulers on one database, and a tick that would overlap the
automation's previous run skips or queues as configured.

The schedules are on 1 January 04:xx, so the server's own scheduler (on the real clock)
never fires them while a test runs."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from burrow.automations.repos import repo_source
from burrow.automations.runner import AutomationRunner
from burrow.automations.schedule import Scheduler
from tests.api.harness import RunningServer, running_server
from tests.api.test_automation_fire import made, scripted

MINUTE = datetime(2027, 1, 1, 4, 30).astimezone()  # the server's local time


def second_scheduler(srv: RunningServer) -> Scheduler:
    """Another replica's: its own runner and id, the same database."""
    svc = srv.services
    runner = AutomationRunner(svc.db, svc.conversations)
    return Scheduler(runner, "replica-b", lambda a: repo_source(svc.secrets, a))


async def started_by(srv: RunningServer, aid: str) -> list[dict[str, Any]]:
    listed = (await srv.client.get("/api/conversations")).json()
    return [c for c in listed if c["automation_id"] == aid]


async def test_a_tick_fires_once_across_two_schedulers_on_one_database(tmp_path: Path) -> None:
    async with running_server(tmp_path, scripted) as srv:
        aid, _ = await made(srv.client, triggers=[{"schedule": "30 4 1 1 *"}])
        ours, theirs = srv.services.scheduler, second_scheduler(srv)
        assert ours is not None
        fired = await asyncio.gather(*(s.tick(MINUTE) for s in (ours, theirs, ours, theirs)))
        assert sorted(len(f) for f in fired) == [0, 0, 0, 1]
        assert await ours.tick(MINUTE + timedelta(seconds=30)) == []  # same minute: claimed
        assert await theirs.tick(MINUTE + timedelta(minutes=1)) == []  # not due
        [conversation] = await started_by(srv, aid)
        events = await srv.events(conversation["id"])
        message = next(e for e in events if e["type"] == "user.message")
        assert message["data"]["content"] == "Triage "  # a schedule has no issue: empty
        next_year = MINUTE.replace(year=2028)
        assert len(await theirs.tick(next_year)) == 1
        assert len(await started_by(srv, aid)) == 2


async def test_an_overlapping_tick_skips_or_queues_as_configured(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: scripted(delay=0.2)) as srv:
        scheduler = srv.services.scheduler
        assert scheduler is not None
        every_minute = [{"schedule": "* 4 1 1 *"}]
        skipping, _ = await made(srv.client, name="s", concurrency="skip", triggers=every_minute)
        queueing, _ = await made(srv.client, name="q", concurrency="queue", triggers=every_minute)
        first = await scheduler.tick(MINUTE)
        assert len(first) == 2
        second = await scheduler.tick(MINUTE + timedelta(minutes=1))  # both still running
        assert len(second) == 1  # the queueing one's, waiting; the skipping one skipped
        assert len(await started_by(srv, skipping)) == 1
        [later] = second
        queued = [c["id"] for c in await started_by(srv, queueing)]
        assert len(queued) == 2 and later in queued
        started = await srv.wait_for(later, lambda e: e["type"] == "run.started")
        await srv.run_finished(later, started["run_id"])


async def test_the_tick_claim_holds_on_postgresql_too(tmp_path: Path, pg_url: str) -> None:
    async with running_server(tmp_path, scripted, database_url=pg_url) as srv:
        aid, _ = await made(srv.client, triggers=[{"schedule": "30 4 1 1 *"}])
        ours, theirs = srv.services.scheduler, second_scheduler(srv)
        assert ours is not None
        fired = await asyncio.gather(*(s.tick(MINUTE) for s in (ours, theirs) * 3))
        assert sorted(len(f) for f in fired) == [0, 0, 0, 0, 0, 1]
        assert len(await started_by(srv, aid)) == 1
        # A replayed GitHub delivery is refused by the same kind of claim.
        store = srv.services.automations
        assert store is not None
        keep = timedelta(days=1)
        claims = await asyncio.gather(*(store.store.first_delivery("d-1", keep) for _ in range(4)))
        assert sorted(claims) == [False, False, False, True]
