"""The conversation runtime: schedules runs, routes steering, interrupts, and repairs.

At most one run per conversation is active. A message sent while one is active is
journaled as steering and picked up by that run before its next model call. What a run is
made of is assembly.py's; whose run it is, with several replicas, is leases.py's.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from burrow.llm.base import Provider
from burrow.runs.conversations.assembly import RunAssembly, RuntimeOptions
from burrow.runs.conversations.contexts import Contexts
from burrow.runs.conversations.leases import RunLeases
from burrow.runs.journal import events as ev
from burrow.runs.journal.closing import ending
from burrow.runs.journal.events import EventType, RunStatus
from burrow.runs.journal.journal import Journal
from burrow.runs.loop.hooks.approvals import ApprovalGate
from burrow.runs.loop.hooks.budget import BudgetHook
from burrow.runs.loop.hooks.profiles import ProfileMissing
from burrow.runs.loop.loop import AgentRun
from burrow.runs.workspace.checkpoints import Checkpoints
from burrow.runs.workspace.quotas import OwnerTally, RunQuotaExceeded
from burrow.runs.workspace.sandboxes import SandboxPool
from burrow.store.conversations import ConversationStore
from burrow.store.events import ConversationGone
from burrow.store.records import Event
from burrow.telemetry import logs
from burrow.tools.base import Tool

log = logging.getLogger(__name__)

RESTARTED = "The server restarted during this run. Send a message to continue."
LAPSED = (
    "The server replica running this run stopped answering; another one closed it. "
    "Send a message to continue."
)


@dataclass
class _Active:
    run_id: str
    task: asyncio.Task[None] | None = None
    run: AgentRun | None = None
    budget: BudgetHook | None = None  # the run's budget check, once assembled
    stopping: bool = False  # interrupted: it is closing its calls and will not continue
    done: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )  # set after the run's last event and its follow-up decision


class RunActive(Exception):
    """The conversation has a run going; what was asked must wait for it to end."""


class Runtime:
    def __init__(
        self,
        journal: Journal,
        conversations: ConversationStore,
        sandboxes: SandboxPool,
        tools: Mapping[str, Tool],
        provider: Callable[[], Provider],
        approvals: ApprovalGate,
        options: RuntimeOptions | None = None,
    ) -> None:
        self.journal = journal
        self.conversations = conversations
        self.sandboxes = sandboxes
        self.approvals = approvals
        self.options = options = options or RuntimeOptions()
        self.checkpoints = Checkpoints(
            sandboxes.get,
            max_file_bytes=options.checkpoint_max_file_bytes,
            max_count=options.checkpoint_max_count,
            max_bytes=options.checkpoint_max_bytes,
        )
        self.assembly = RunAssembly(
            journal, conversations, sandboxes, tools, provider, approvals, self.checkpoints, options
        )
        self.leases = RunLeases(options.ownership, journal)
        self._contexts = Contexts(journal)
        self._active: dict[str, _Active] = {}
        self._ending: dict[str, _Active] = {}  # ended runs finishing their bookkeeping
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._closing = False
        self._runs = OwnerTally(conversations.owner_of)  # runs starting or going, by owner

    def active_run(self, cid: str) -> str | None:
        """The run going in this process (another replica's: `busy`)."""
        active = self._active.get(cid)
        return active.run_id if active else None

    async def busy(self, cid: str) -> bool:
        """Whether a run goes in the conversation, here or on another replica.

        A run whose run.finished is journaled does not: a client that saw it end may fork or
        restore at once. What it has left (the follow-up decision, giving its lease back) is
        waited out, and a follow-up run it starts for a message sent as it ended is one.
        """
        ending = self._ending.get(cid)
        active = self._active.get(cid)
        if active is not None and active.run is not None and active.run.ended:
            ending = active  # not yet in _ending: its task has not resumed since the write
        if ending is not None:
            await asyncio.shield(ending.done)
        return await self._going(cid)

    async def _going(self, cid: str) -> bool:
        return cid in self._active or await self.leases.holder(cid) is not None

    async def send(
        self,
        cid: str,
        content: str,
        attachments: Sequence[str] = (),
        approval_mode: str | None = None,
    ) -> tuple[str, int]:
        """Journal a user message and start a run, or steer the active one. -> (run_id, seq)

        A message sent while a run is being stopped waits for it to end and starts the next
        run: what comes after Stop is a new request, not steering of what was stopped.
        """
        while True:
            stopping = self._active.get(cid)
            if stopping is not None and stopping.stopping:
                await asyncio.wait({stopping.done})
                continue
            async with self._locks[cid]:
                active = self._active.get(cid)
                if active is not None and active.stopping:
                    continue  # stopped while we waited for the lock
                message = ev.UserMessage(
                    content=content,
                    steering=active is not None,
                    attachments=list(attachments) or None,
                )
                if active is not None:
                    [event] = await self.journal.append(cid, ev.make(message, active.run_id))
                    return active.run_id, event.seq
                await self._admit_run(cid)
                run_id = f"r_{secrets.token_hex(8)}"
                try:
                    # A lease taken over from a replica that died comes with its cut-off
                    # run: repaired first, so its run.finished precedes this run.started.
                    if await self.leases.take(cid):
                        await self._repair(cid, LAPSED)
                    # The message and the start of its run go out in one commit.
                    event, _ = await self.journal.append(
                        cid, ev.make(message, run_id), ev.make(ev.RunStarted(run_id=run_id), run_id)
                    )
                except BaseException:
                    self._runs.release(cid)
                    await self.leases.give_back(cid)
                    raise
                if approval_mode is not None:  # this message's run only (plan mode)
                    self.approvals.set_run_mode(run_id, approval_mode)
                self._start(cid, run_id, announced=True)
                return run_id, event.seq

    async def lease_lost(self, cid: str) -> None:
        """Another replica took this conversation's lease (ours lapsed: this process
        stalled past it) and repaired the run: stop ours."""
        log.error("lost the run lease of %s to another replica; stopping its run here", cid)
        # Still held while it stops: its closing appends are fenced, and refused.
        await self.interrupt(cid)
        self.leases.lost(cid)

    async def take_over(self, cid: str) -> None:
        """Repair the run of a replica whose lease lapsed (the lease upkeep claimed it)."""
        async with self._locks[cid]:
            self.leases.claimed(cid)
            if cid in self._active:
                return  # a message here started a new run, which repaired it first
            try:
                await self._repair(cid, LAPSED)
            finally:
                await self.leases.give_back(cid)

    async def _admit_run(self, cid: str) -> None:
        """Count a new run against its owner's cap, or raise `RunQuotaExceeded`."""
        limit = self.options.max_runs_per_user
        if not limit:
            return
        owner = await self._runs.owner(cid)
        if owner is None:
            return  # deleted meanwhile: the append says so
        if len(self._runs.held_by(owner)) >= limit:
            raise RunQuotaExceeded(limit)
        self._runs.hold(cid, owner)

    def _start(self, cid: str, run_id: str, *, announced: bool = False) -> None:
        active = _Active(run_id)
        self._active[cid] = active
        run = self._run(cid, active, announced)
        # The run's ids go with its task: whatever is logged in it carries them.
        active.task = asyncio.create_task(
            run, name=f"run {run_id}", context=logs.run_context(cid, run_id)
        )

    async def _run(self, cid: str, active: _Active, announced: bool) -> None:
        try:
            with self.journal.subscribe(cid) as feed:
                try:
                    if self.options.before_run is not None:
                        await self.options.before_run(cid)
                    context = await self._contexts.load(cid)
                    active.run, active.budget = await self.assembly.build(
                        cid, active.run_id, context, feed
                    )
                except (Exception, asyncio.CancelledError) as exc:
                    await self._abort(cid, active.run_id, announced, exc)
                    return
                await active.run.execute(announced=announced)
                self._contexts.keep(cid, active.run.context)
        finally:
            self._ending[cid] = active
            try:
                await self._after_run(cid, active)
            finally:
                active.done.set_result(None)
                if self._ending.get(cid) is active:
                    del self._ending[cid]

    async def _abort(self, cid: str, run_id: str, announced: bool, exc: BaseException) -> None:
        """The run could not even begin: still end it, so run.started stays paired."""
        status: RunStatus = "failed"
        error: str | None = str(exc)
        if isinstance(exc, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            status, error = "canceled", None
        elif not isinstance(exc, ProfileMissing):
            log.exception("run %s of %s could not start", run_id, cid)
            error = f"Internal error: {type(exc).__name__}: {exc}"
        if announced:
            finished = ev.RunFinished(status=status, error=error, usage=ev.Usage())
            await self.journal.append(cid, ev.make(finished, run_id))

    def budget_changed(self, cid: str, overrides: dict[str, float]) -> None:
        """A PATCHed budget reaches the conversation's active run at its next check."""
        active = self._active.get(cid)
        if active is not None and active.budget is not None:
            active.budget.budget = self.options.budget.overridden(overrides)

    async def compact(self, cid: str) -> Event:
        """Compact the conversation now (`POST …/compact`); its context.compacted event.

        Raises RunActive while a run goes (its own compaction happens when it needs one),
        NothingToCompact, or the summary call's ModelError. A message sent meanwhile
        waits for the compaction, then starts its run on the compacted context.
        """
        if await self.busy(cid):  # waits out a run that just ended, which needs the lock
            raise RunActive(cid)
        async with self._locks[cid]:
            if await self._going(cid):
                raise RunActive(cid)
            conversation = await self.conversations.get(cid)
            if conversation is None:
                raise ConversationGone(cid)
            context = await self._contexts.load(cid)
            try:
                written = await self.journal.append(
                    cid, *await self.assembly.compaction(conversation, context)
                )
                for event in written:
                    context.apply(event)
                return written[-1]
            finally:
                self._contexts.keep(cid, context)

    async def _after_run(self, cid: str, active: _Active) -> None:
        async with self._locks[cid]:
            if self._active.get(cid) is active:
                del self._active[cid]
            self.approvals.unattended(active.run_id, False)  # an A2A run's mark ends with it
            try:
                if self._closing or active.run is None or active.stopping:
                    return  # after Stop, steering the stopped run had is not answered
                # A message that arrived while the run was ending is answered by a new run:
                # the same turn, so it keeps the ended run's place under the owner's cap.
                later = await self.journal.read(cid, active.run.context.last_seq)
                if any(e.type == EventType.USER_MESSAGE for e in later):
                    self._start(cid, f"r_{secrets.token_hex(8)}")
            finally:
                if cid not in self._active:
                    self._runs.release(cid)
                    await self.leases.give_back(cid)

    async def interrupt(self, cid: str) -> bool:
        """Cancel the active run; it still closes its tool calls and ends as canceled."""
        active = self._active.get(cid)
        if active is None or active.task is None:
            return False
        active.stopping = True
        active.task.cancel()
        await asyncio.wait({active.done})
        return True

    async def delete(self, cid: str) -> None:
        await self.interrupt(cid)
        self.journal.close_subscribers(cid)
        await self.conversations.delete(cid)
        for source in self.options.tool_sources:
            await source.forget(cid)
        await self.sandboxes.destroy(cid)
        self.assembly.forget(cid)
        self._contexts.forget(cid)
        self.approvals.mode_changed(cid, None)
        self._locks.pop(cid, None)
        self._runs.forget(cid)

    async def recover(self) -> int:
        """Close runs that a crash or restart left open; returns how many were repaired.
        With several replicas, a run whose lease another live replica holds is its own."""
        repaired = 0
        for status in ("running", "waiting_approval"):
            for conversation in await self.conversations.with_status(status):
                cid = conversation.id
                async with self._locks[cid]:
                    if not await self.leases.take_if_free(cid):
                        continue
                    try:
                        await self._repair(cid)
                    finally:
                        await self.leases.give_back(cid)
                repaired += 1
        return repaired

    async def _repair(self, cid: str, reason: str = RESTARTED) -> None:
        work, closing = ending(await self.journal.read(cid), reason)
        for request_id in work.approvals:
            await self.approvals.abandon(request_id)
        if closing:
            await self.journal.append(cid, *closing)
        else:  # the row said running but every run was closed: only the status is stale
            await self.conversations.set_status(cid, "idle")
        log.warning("repaired %d open run(s) of %s: %s", len(work.runs), cid, reason)

    async def shutdown(self) -> None:
        self._closing = True
        tasks = [a.task for a in self._active.values() if a.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        for source in self.options.tool_sources:
            await source.close()
        await self.sandboxes.close()
