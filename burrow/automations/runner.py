"""Starting an automation's run: a normal conversation, marked with the automation's id,
whose first message is the prompt rendered from the trigger's payload; or a follow-up
run in a conversation it started (the pull-request loop). When a run ends, `on_done` acts
on its result (push, pull request) while the automation's next run still waits.

One run of an automation at a time on this server: a trigger that comes while the
previous run still goes is skipped or queued (`concurrency`). The queue is this process's
(bounded, lost on restart); a run going on another replica is seen in the database
(`status` of the automation's conversations) and counts as going for `skip`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from burrow.automations.template import render
from burrow.runs.conversations.service import Conversations, SettingsChange
from burrow.runs.workspace.git.repo_import import RepoSource
from burrow.store.automations import Automation, AutomationStore
from burrow.store.database import Database
from burrow.store.schema import conversations

log = logging.getLogger(__name__)

MAX_QUEUED = 10  # per automation: a flood of triggers waits for at most this many runs
POLL_SECONDS = 0.25  # how often a queued trigger looks whether the run before it ended
GOING = ("running", "waiting_approval")


class Skipped(Exception):
    """The previous run still goes and the automation skips triggers meanwhile."""


class QueueFull(Exception):
    """MAX_QUEUED triggers already wait for this automation."""


@dataclass(frozen=True)
class Fired:
    conversation_id: str
    run_id: str | None  # None: queued behind the run going; it starts when that one ends


async def _poll_until(going: Callable[[], Awaitable[bool]]) -> None:
    """Until `going()` is false. Polled, not awaited on an event: a run on another replica
    ends in the database, not in this process."""
    for _ in iter(int, 1):  # forever
        if not await going():
            return
        await asyncio.sleep(POLL_SECONDS)


class AutomationRunner:
    def __init__(self, db: Database, conversations: Conversations) -> None:
        self._db = db
        self._conversations = conversations
        self.store = AutomationStore(db)
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._waiting: defaultdict[str, int] = defaultdict(int)
        self._tasks: set[asyncio.Task[None]] = set()
        # What to do with a run's result once it ended (burrow/automations/results.py).
        self.on_done: Callable[[Automation, str], Awaitable[None]] | None = None

    async def going_elsewhere(self, aid: str) -> bool:
        query = sa.select(sa.func.count()).where(
            conversations.c.automation_id == aid, conversations.c.status.in_(GOING)
        )
        return bool(await self._db.run(lambda conn: conn.execute(query).scalar_one()))

    async def fire(
        self, automation: Automation, payload: Any, repo: RepoSource | None = None
    ) -> Fired:
        """Start (or queue) a run; raises Skipped or QueueFull, creating nothing then."""
        prompt = render(automation.prompt, payload)
        return await self._start(automation, lambda: self._conversation(automation, repo), prompt)

    async def follow_up(self, automation: Automation, cid: str, message: str) -> Fired:
        """A further run in `cid` (a conversation `automation` started) with `message`:
        the pull-request loop's. Queued or skipped like a trigger's run."""

        async def same() -> str:
            await self.store.set_result(cid, "pending", detail=None)  # this run's is to come
            return cid

        return await self._start(automation, same, message)

    async def _start(
        self, automation: Automation, conversation: Callable[[], Awaitable[str]], prompt: str
    ) -> Fired:
        aid = automation.id
        lock = self._locks[aid]
        # Taken at once when free (no await between the look and the take), so two fires
        # at the same moment never both start: the second sees it held.
        mine = not lock.locked()
        if mine:
            await lock.acquire()
        try:
            busy = not mine or await self.going_elsewhere(aid)
            if busy and automation.concurrency == "skip":
                raise Skipped(aid)
            if busy and self._waiting[aid] >= MAX_QUEUED:
                raise QueueFull(aid)
            cid = await conversation()
            if not busy:
                run_id = await self._send(automation, cid, prompt)
        except BaseException:
            if mine:
                lock.release()
            raise
        if not busy:
            self._spawn(self._hold_until_done(automation, lock, cid))
            return Fired(cid, run_id)
        if mine:
            lock.release()  # the run going is another replica's: wait for it in the queue
        self._waiting[aid] += 1
        self._spawn(self._queued(automation, lock, cid, prompt))
        return Fired(cid, None)

    async def _conversation(self, a: Automation, repo: RepoSource | None) -> str:
        created = await self._conversations.create(
            a.owner_id,
            a.name[:200],
            model=a.model,
            approval_mode=a.approval_mode,
            repo=repo,
            environment=a.environment,
        )
        await self._conversations.update(created, SettingsChange(budget=a.budget))
        await self.store.mark(created.id, a.id)
        return created.id

    async def _send(self, a: Automation, cid: str, prompt: str) -> str:
        if a.approval_mode == "ask":  # pauses at an approval; the owner answers it
            run_id, _ = await self._conversations.send(cid, prompt)
        else:  # nobody watches: a call that would need an approval is refused
            run_id, _ = await self._conversations.send_unattended(cid, prompt)
        return run_id

    async def _wait_idle(self, cid: str) -> None:
        await _poll_until(lambda: self._conversations.busy(cid))

    async def _hold_until_done(self, a: Automation, lock: asyncio.Lock, cid: str) -> None:
        try:
            await self._wait_idle(cid)
            await self._done(a, cid)  # still holding: the next run waits for the push
        finally:
            lock.release()

    async def _done(self, a: Automation, cid: str) -> None:
        if self.on_done is not None:
            await self.on_done(a, cid)

    async def _queued(self, a: Automation, lock: asyncio.Lock, cid: str, prompt: str) -> None:
        try:
            async with lock:
                self._waiting[a.id] -= 1
                await _poll_until(lambda: self.going_elsewhere(a.id))
                await self._send(a, cid, prompt)
                await self._wait_idle(cid)
                await self._done(a, cid)
        except asyncio.CancelledError:
            raise
        except Exception:  # the conversation was deleted meanwhile, say: nothing to run
            log.warning(
                "automation %s: its queued run in %s did not start", a.id, cid, exc_info=True
            )

    def _spawn(self, work: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
