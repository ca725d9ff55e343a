"""The conversation runtime: starts runs, routes steering, interrupts, and repairs.

At most one run per conversation is active. A message sent while one is active is
journaled as steering and picked up by that run before its next model call.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from burrow.llm.base import (
    Message,
    ModelError,
    Pricer,
    Pricing,
    Provider,
    StreamEvent,
    ToolSpec,
)
from burrow.llm.catalog import DEFAULT_CONTEXT_WINDOW, ModelInfo
from burrow.runs.journal import events as ev
from burrow.runs.journal.closing import ending
from burrow.runs.journal.events import EventType, RunStatus
from burrow.runs.journal.journal import Journal, Subscription
from burrow.runs.loop.context import ModelContext
from burrow.runs.loop.hooks.approvals import ApprovalGate, Approvals
from burrow.runs.loop.hooks.attachments import Attachments
from burrow.runs.loop.hooks.base import Hook, PreviewOpened, SystemPrompt
from burrow.runs.loop.hooks.budget import Budget, BudgetHook
from burrow.runs.loop.hooks.compaction import CompactionPolicy, Compactor, compact
from burrow.runs.loop.hooks.guard import LoopGuard
from burrow.runs.loop.hooks.instructions import ProjectInstructions
from burrow.runs.loop.hooks.profiles import (
    DEFAULT_PROFILE,
    ProfileLookup,
    ProfileMissing,
    ToolAllowlist,
)
from burrow.runs.loop.hooks.skills import Skills
from burrow.runs.loop.hooks.subagents import DEFAULT_MAX_SUBAGENTS, Subagents, SubagentSetup
from burrow.runs.loop.loop import AgentRun, LoopConfig, RunEnv
from burrow.runs.loop.masked_requests import MaskedProvider
from burrow.runs.loop.window import estimate
from burrow.runs.workspace.checkpoints import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_COUNT,
    DEFAULT_MAX_FILE_BYTES,
    CheckpointAtStart,
    Checkpoints,
)
from burrow.runs.workspace.quotas import RunQuotaExceeded
from burrow.runs.workspace.sandboxes import SandboxPool
from burrow.sandbox.masking import SecretMask
from burrow.store.conversations import ConversationStore
from burrow.store.events import ConversationGone
from burrow.store.leases import Claim
from burrow.store.profiles import Profile
from burrow.store.records import Conversation, Event
from burrow.telemetry import logs
from burrow.tools.base import ShellState, Tool, ToolLimits

log = logging.getLogger(__name__)

RESTARTED = "The server restarted during this run. Send a message to continue."
LAPSED = (
    "The server replica running this run stopped answering; another one closed it. "
    "Send a message to continue."
)
CONTEXT_CACHE_SIZE = 256  # model contexts of recently active conversations kept in memory


@dataclass
class _Active:
    run_id: str
    task: asyncio.Task[None] | None = None
    run: AgentRun | None = None
    stopping: bool = False  # interrupted: it is closing its calls and will not continue
    done: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )  # set after the run's last event and its follow-up decision


class ModelChooser(Protocol):
    """Builds what a conversation's own `model` needs (models.py's ModelSettings)."""

    def provider_for(self, model: str | None) -> Provider: ...

    def pricing_for(self, model: str | None) -> Pricer: ...

    def describe(self, model: str | None) -> ModelInfo: ...


class RunOwnership(Protocol):
    """Which replica runs a conversation's run (runs/conversations/replicas.py: a lease row with a
    heartbeat). None in RuntimeOptions: one process, every run is this one's."""

    async def acquire(self, cid: str) -> Claim: ...

    async def release(self, cid: str) -> None: ...

    async def holder(self, cid: str) -> str | None:
        """The replica whose live lease covers `cid` (None: none)."""
        ...

    @property
    def replica(self) -> str:
        """This replica's id."""
        ...


class ToolSource(Protocol):
    """Tools a conversation gets beyond the built-in ones (its MCP servers'), looked up at
    the start of each run; what could not be had comes back as {server: message}, which the
    runtime journals as `mcp.warning` (the event vocabulary is this layer's, not the tools')."""

    async def tools_for(self, cid: str, run_id: str) -> tuple[dict[str, Tool], dict[str, str]]: ...

    async def forget(self, cid: str) -> None:
        """The conversation was deleted."""
        ...

    async def close(self) -> None:
        """Server shutdown."""
        ...


@dataclass
class RuntimeOptions:
    limits: ToolLimits = field(default_factory=ToolLimits)
    pricing: Pricer = field(default_factory=Pricing)
    loop: LoopConfig = field(default_factory=LoopConfig)
    budget: Budget = field(default_factory=Budget)  # each run's limits
    preview_url: Callable[[str, int], str] | None = None  # (cid, port) -> preview address
    max_runs_per_user: int = 0  # runs going at once per conversation owner; 0: no cap
    models: ModelChooser | None = None  # None: every run uses `provider` and `pricing`
    # Tokens the model accepts in one request, by the conversation's model (None: the
    # server's); BURROW_CONTEXT_WINDOW overrides it.
    context_window: Callable[[str | None], int] = lambda _model: DEFAULT_CONTEXT_WINDOW
    compact_at: float = 0.8  # share of the window past which a request compacts first
    checkpoint_max_file_bytes: int = DEFAULT_MAX_FILE_BYTES  # larger files are not checkpointed
    # Awaited before a run begins (a repository still being cloned into the workspace).
    before_run: Callable[[str], Awaitable[None]] | None = None
    tool_sources: Sequence[ToolSource] = ()  # MCP servers
    max_subagents: int = DEFAULT_MAX_SUBAGENTS  # `task` calls per run; 0: no task tool
    profiles: ProfileLookup | None = None  # where conversations' profiles are found
    skills_dir: Path | None = None  # the administrator's skills (<data-dir>/skills)
    checkpoint_max_count: int = DEFAULT_MAX_COUNT  # the oldest past these are pruned
    checkpoint_max_bytes: int = DEFAULT_MAX_BYTES
    ownership: RunOwnership | None = None  # several replicas: who runs what
    # A conversation's secret mask (runs/conversations/secrets.py), applied to every model request.
    request_mask: Callable[[str], Awaitable[SecretMask]] | None = None

    def compaction(self, model: str | None) -> CompactionPolicy:
        return CompactionPolicy(self.context_window(model), self.compact_at)


class RunActive(Exception):
    """The conversation has a run going; what was asked must wait for it to end."""


class RunElsewhere(Exception):
    """Another replica holds the conversation's run lease: ask that one (commands.py)."""

    def __init__(self, cid: str, holder: str) -> None:
        super().__init__(f"the run of {cid} belongs to replica {holder}")
        self.holder = holder


@dataclass(frozen=True)
class _Model:
    """What a conversation's model brings to a run: its provider, prices and abilities."""

    provider: Provider
    pricing: Pricer
    compaction: CompactionPolicy
    vision: bool


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
        self.tools = tools
        self._provider = provider
        self.approvals = approvals
        self.options = options or RuntimeOptions()
        self._active: dict[str, _Active] = {}
        self._shells: dict[str, ShellState] = {}
        self._contexts: dict[str, ModelContext] = {}  # insertion order = recency
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._closing = False
        self._owners: dict[str, str] = {}  # cid -> owner, as learned (owners never change)
        self._run_owners: dict[str, str] = {}  # cid -> owner, while a run is starting or going
        self._budgets: dict[str, BudgetHook] = {}  # cid -> the active run's budget check
        self._leased: set[str] = set()  # conversations whose run lease this replica holds
        self._leasing: set[str] = set()  # ... and those whose lease it is taking right now
        if self.options.ownership is not None:
            # What this replica appends to a conversation whose lease it holds is fenced
            # by that lease: once another replica took it over, nothing more gets in.
            replica = self.options.ownership.replica
            journal.fence = lambda cid: replica if cid in self._leased else None
        self.checkpoints = Checkpoints(
            self.sandboxes.get,
            max_file_bytes=self.options.checkpoint_max_file_bytes,
            max_count=self.options.checkpoint_max_count,
            max_bytes=self.options.checkpoint_max_bytes,
        )

    def active_run(self, cid: str) -> str | None:
        """The run going in this process (another replica's: `busy`)."""
        active = self._active.get(cid)
        return active.run_id if active else None

    async def busy(self, cid: str) -> bool:
        """Whether a run goes in the conversation, here or on another replica."""
        if cid in self._active:
            return True
        ownership = self.options.ownership
        return ownership is not None and await ownership.holder(cid) is not None

    async def send(
        self, cid: str, content: str, attachments: Sequence[str] = ()
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
                if active is not None:
                    [event] = await self.journal.append(
                        cid,
                        ev.make(
                            ev.UserMessage(
                                content=content,
                                steering=True,
                                attachments=list(attachments) or None,
                            ),
                            active.run_id,
                        ),
                    )
                    return active.run_id, event.seq
                await self._admit_run(cid)
                run_id = f"r_{secrets.token_hex(8)}"
                try:
                    await self._own(cid)
                    # The message and the start of its run go out in one commit.
                    event, _ = await self.journal.append(
                        cid,
                        ev.make(
                            ev.UserMessage(
                                content=content,
                                steering=False,
                                attachments=list(attachments) or None,
                            ),
                            run_id,
                        ),
                        ev.make(ev.RunStarted(run_id=run_id), run_id),
                    )
                except BaseException:
                    self._run_owners.pop(cid, None)
                    await self._disown(cid)
                    raise
                self._start(cid, run_id, announced=True)
                return run_id, event.seq

    async def _own(self, cid: str) -> None:
        """Take the conversation's run lease (several replicas), or raise RunElsewhere.
        A lease taken over from a replica that died comes with its cut-off run: that run
        is repaired first, so its run.finished precedes the new run.started."""
        ownership = self.options.ownership
        if ownership is None or cid in self._leased:
            return
        self._leasing.add(cid)  # before the row exists: the lease upkeep must not drop it
        try:
            claim = await ownership.acquire(cid)
        finally:
            self._leasing.discard(cid)
        if claim.holder is not None:
            raise RunElsewhere(cid, claim.holder)
        self._leased.add(cid)
        if claim.took_over:
            await self._repair(cid, LAPSED)

    async def _disown(self, cid: str) -> None:
        if self.options.ownership is not None and cid in self._leased:
            self._leased.discard(cid)
            await self.options.ownership.release(cid)

    def leased(self, *, taking: bool = False) -> set[str]:
        """The conversations whose lease this replica holds (the heartbeat renews them);
        `taking`: with those whose lease it is taking at this moment."""
        return self._leased | self._leasing if taking else set(self._leased)

    async def lease_lost(self, cid: str) -> None:
        """Another replica took this conversation's lease (ours lapsed: this process
        stalled past it) and repaired the run: stop ours."""
        log.error("lost the run lease of %s to another replica; stopping its run here", cid)
        # Still in `_leased` while it stops: its closing appends are fenced, and refused.
        await self.interrupt(cid)
        self._leased.discard(cid)

    async def take_over(self, cid: str) -> None:
        """Repair the run of a replica whose lease lapsed (this one claimed the lease)."""
        async with self._locks[cid]:
            self._leased.add(cid)
            if cid in self._active:
                return  # a message here started a new run, which repaired it first
            try:
                await self._repair(cid, LAPSED)
            finally:
                await self._disown(cid)

    async def _admit_run(self, cid: str) -> None:
        """Count a new run against its owner's cap, or raise `RunQuotaExceeded`. The count
        and the reservation happen together, with no await between them: concurrent sends
        to several conversations cannot all slip under the cap."""
        limit = self.options.max_runs_per_user
        if not limit:
            return
        owner = self._owners.get(cid)
        if owner is None:
            owner = await self.conversations.owner_of(cid)
            if owner is None:
                return  # deleted meanwhile: the append says so
            self._owners[cid] = owner
        if sum(1 for o in self._run_owners.values() if o == owner) >= limit:
            raise RunQuotaExceeded(limit)
        self._run_owners[cid] = owner

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
                    active.run = await self._prepare(cid, active.run_id, feed)
                except (Exception, asyncio.CancelledError) as exc:
                    await self._abort(cid, active.run_id, announced, exc)
                    return
                await active.run.execute(announced=announced)
                self._keep_context(cid, active.run.context)
        finally:
            try:
                await self._after_run(cid, active)
            finally:
                active.done.set_result(None)

    async def _abort(self, cid: str, run_id: str, announced: bool, exc: BaseException) -> None:
        """The run could not even begin: still end it, so run.started stays paired."""
        if isinstance(exc, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            status: RunStatus = "canceled"
            error: str | None = None
        elif isinstance(exc, ProfileMissing):
            status, error = "failed", str(exc)
        else:
            log.exception("run %s of %s could not start", run_id, cid)
            status, error = "failed", f"Internal error: {type(exc).__name__}: {exc}"
        if announced:
            finished = ev.RunFinished(status=status, error=error, usage=ev.Usage())
            await self.journal.append(cid, ev.make(finished, run_id))

    async def _prepare(self, cid: str, run_id: str, feed: Subscription) -> AgentRun:
        if self.options.before_run is not None:
            await self.options.before_run(cid)
        context = await self._context(cid)
        conversation = await self.conversations.get(cid)
        if conversation is None:
            raise ConversationGone(cid)
        # The conversation's settings as they are when the run starts: a model changed
        # later is the next run's; a budget changed later applies at the next check.
        profile = await self._profile(conversation)
        if profile is not None and profile.model and not conversation.model:
            conversation = replace(conversation, model=profile.model)  # explicit wins
        model = self._model(conversation)
        budget = BudgetHook(
            self.options.budget.overridden(conversation.budget),
            spent_before=conversation.usage.cost,
        )
        self._budgets[cid] = budget
        bare = lambda: self.sandboxes.get(cid)  # noqa: E731
        env = RunEnv(
            journal=self.journal,
            provider=model.provider,
            tools=await self._tools(cid, run_id),
            sandbox=lambda: self.sandboxes.commands(cid),  # secrets in, masked out
            shell=self._shells.setdefault(cid, ShellState()),
            limits=self.options.limits,
            pricing=model.pricing,
            preview_url=self.options.preview_url,
        )
        system_prompt = self.options.loop.system_prompt
        if profile is not None and profile.system_prompt:
            system_prompt = profile.system_prompt
        skills = Skills(
            self.options.skills_dir,
            bare,
            None if profile is None or profile.skills is None else frozenset(profile.skills),
        )
        env.tools = skills.tools(env.tools)
        # First: a tool the profile does not allow is refused before anyone is asked.
        allowlist: list[Hook] = []
        if profile is not None and profile.tools is not None:
            allowlist = [ToolAllowlist(profile.name, frozenset(profile.tools))]
        instructions = ProjectInstructions(bare)
        hooks: list[Hook] = [
            *allowlist,
            *self._hooks(cid, system_prompt, instructions),
            skills,
            # The budget before attachments: a stopped run need not wake the sandbox.
            budget,
            Attachments(context, bare, vision=model.vision),
            # Last: it measures the request as the hooks before it shaped it.
            Compactor(model.provider, model.compaction, model.pricing),
        ]
        if self.options.max_subagents > 0:
            subagents = Subagents(
                SubagentSetup(
                    env,
                    system_prompt,
                    # A subagent's calls pass the same allowlist, gate and budget.
                    lambda: [
                        *allowlist,
                        instructions,  # the parent's: AGENTS.md read once per run
                        skills,
                        Approvals(self.approvals),
                        PreviewOpened(),
                        LoopGuard(),
                        budget,
                    ],
                    self.options.max_subagents,
                )
            )
            hooks.insert(len(allowlist), subagents)
            env.tools = subagents.tools(env.tools)
        env.hooks = hooks
        return AgentRun(env, cid, run_id, context, feed)

    async def _tools(self, cid: str, run_id: str) -> Mapping[str, Tool]:
        """The built-in tools and what the tool sources add (never replacing one)."""
        if not self.options.tool_sources:
            return self.tools
        tools = dict(self.tools)
        for source in self.options.tool_sources:
            found, warnings = await source.tools_for(cid, run_id)
            for name, tool in found.items():
                tools.setdefault(name, tool)
            if warnings:
                await self.journal.append(
                    cid,
                    *(ev.make(ev.McpWarning(server=s, message=m)) for s, m in warnings.items()),
                )
        return tools

    def _model(self, conversation: Conversation) -> _Model:
        models, chosen = self.options.models, conversation.model
        if models is None:
            return _Model(
                self._masked(conversation.id, _LazyProvider(self._provider)),
                self.options.pricing,
                self.options.compaction(chosen),
                vision=False,
            )
        return _Model(
            self._masked(conversation.id, _LazyProvider(lambda: models.provider_for(chosen))),
            models.pricing_for(chosen),
            self.options.compaction(chosen),
            vision=models.describe(chosen).vision,
        )

    def _masked(self, cid: str, provider: Provider) -> Provider:
        """The one provider every request of the conversation goes through (its runs,
        subagents, compactions), masking the whole request on its way out."""
        mask = self.options.request_mask
        if mask is None:
            return provider
        return MaskedProvider(provider, lambda: mask(cid))

    async def _context(self, cid: str) -> ModelContext:
        # The projection of earlier runs is kept, so a run only reads what is new.
        context = self._contexts.pop(cid, None) or ModelContext()
        for event in await self.journal.read(cid, context.last_seq):
            context.apply(event)
        return context

    async def _profile(self, conversation: Conversation) -> Profile | None:
        name, profiles = conversation.profile, self.options.profiles
        if name == DEFAULT_PROFILE or profiles is None:
            return None
        found = await profiles.find(conversation.owner_id, name)
        if found is None:
            raise ProfileMissing(name)
        return found

    def _hooks(self, cid: str, system_prompt: str, instructions: ProjectInstructions) -> list[Hook]:
        """The hooks every run has, fresh for each run (the guard counts per run)."""
        return [
            SystemPrompt(system_prompt),
            instructions,
            CheckpointAtStart(self.checkpoints, _checkpoint_failed),
            Approvals(self.approvals),
            PreviewOpened(),
            LoopGuard(),
        ]

    def budget_changed(self, cid: str, overrides: dict[str, float]) -> None:
        """A PATCHed budget reaches the conversation's active run at its next check."""
        hook = self._budgets.get(cid)
        if hook is not None:
            hook.budget = self.options.budget.overridden(overrides)

    async def compact(self, cid: str) -> Event:
        """Compact the conversation now (`POST …/compact`); its context.compacted event.

        Raises RunActive while a run goes (its own compaction happens when it needs one),
        NothingToCompact, or the summary call's ModelError. A message sent meanwhile
        waits for the compaction, then starts its run on the compacted context.
        """
        async with self._locks[cid]:
            if await self.busy(cid):
                raise RunActive(cid)
            conversation = await self.conversations.get(cid)
            if conversation is None:
                raise ConversationGone(cid)
            model = self._model(conversation)
            context = await self._context(cid)
            try:
                specs = [tool.spec for tool in self.tools.values()]
                system = Message(role="system", content=self.options.loop.system_prompt)
                events, _ = await compact(
                    context,
                    model.provider,
                    model.compaction,
                    model.pricing,
                    overhead=estimate([system], specs),
                    run_id=None,
                    keep_tokens=0,  # asked for: all but the latest turn
                )
                written = await self.journal.append(cid, *events)
                for event in written:
                    context.apply(event)
                return written[-1]
            finally:
                self._keep_context(cid, context)

    def _keep_context(self, cid: str, context: ModelContext) -> None:
        self._contexts[cid] = context
        while len(self._contexts) > CONTEXT_CACHE_SIZE:  # least recently used goes first
            del self._contexts[next(iter(self._contexts))]

    async def _after_run(self, cid: str, active: _Active) -> None:
        async with self._locks[cid]:
            if self._active.get(cid) is active:
                del self._active[cid]
                self._budgets.pop(cid, None)
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
                    self._run_owners.pop(cid, None)
                    await self._disown(cid)

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
        self._shells.pop(cid, None)
        self._contexts.pop(cid, None)
        self.approvals.mode_changed(cid, None)
        self._locks.pop(cid, None)
        self._owners.pop(cid, None)

    async def recover(self) -> int:
        """Close runs that a crash or restart left open; returns how many were repaired.
        With several replicas, a run whose lease another live replica holds is its own."""
        repaired = 0
        for status in ("running", "waiting_approval"):
            for conversation in await self.conversations.with_status(status):
                cid = conversation.id
                async with self._locks[cid]:
                    ownership = self.options.ownership
                    if ownership is not None and cid not in self._leased:
                        self._leasing.add(cid)
                        try:
                            claim = await ownership.acquire(cid)
                        finally:
                            self._leasing.discard(cid)
                        if claim.holder is not None:
                            continue
                        self._leased.add(cid)
                    try:
                        await self._repair(cid)
                    finally:
                        await self._disown(cid)
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


def _checkpoint_failed(cid: str, run_id: str, exc: Exception) -> None:
    log.warning("no checkpoint at the start of run %s of %s: %s", run_id, cid, exc)


class _LazyProvider:
    """Builds the provider on the first model call, so a missing key fails the run with
    its message (journaled, visible) instead of failing the HTTP request."""

    def __init__(self, factory: Callable[[], Provider]) -> None:
        self._factory = factory
        self._provider: Provider | None = None
        self.name = "lazy"

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncIterator[StreamEvent]:
        if self._provider is None:
            try:
                self._provider = self._factory()
            except ModelError:
                raise
            except ValueError as exc:
                raise ModelError(str(exc)) from exc
        async for item in self._provider.stream(messages, tools):
            yield item
