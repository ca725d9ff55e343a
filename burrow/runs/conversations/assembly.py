"""Run assembly: what one run of a conversation is made of, built into an `AgentRun`.

The conversation's settings as they are when the run starts decide it: its profile (system
prompt, tools, skills, model), its model (provider, prices, window, vision), its budget,
its MCP servers' tools, and the hooks in their order. A model changed later is the next
run's; a budget changed later reaches the run at its next check (`BudgetHook.budget`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple, Protocol

from burrow.llm.base import Message, ModelError, Pricer, Pricing, Provider, StreamEvent, ToolSpec
from burrow.llm.catalog import DEFAULT_CONTEXT_WINDOW, ModelInfo
from burrow.runs.conversations.leases import RunOwnership
from burrow.runs.journal import events as ev
from burrow.runs.journal.journal import Journal, Subscription
from burrow.runs.loop.context import ModelContext
from burrow.runs.loop.hooks.approvals import ApprovalGate, Approvals
from burrow.runs.loop.hooks.attachments import Attachments
from burrow.runs.loop.hooks.base import Checklist, Hook, PreviewOpened, SystemPrompt
from burrow.runs.loop.hooks.budget import Budget, BudgetHook
from burrow.runs.loop.hooks.compaction import CompactionPolicy, Compactor, compact
from burrow.runs.loop.hooks.guard import LoopGuard
from burrow.runs.loop.hooks.instructions import ProjectInstructions
from burrow.runs.loop.hooks.plans import PlanMode
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
from burrow.runs.workspace.sandboxes import SandboxPool
from burrow.sandbox.masking import SecretMask
from burrow.store.conversations import ConversationStore
from burrow.store.events import ConversationGone
from burrow.store.profiles import Profile
from burrow.store.records import Conversation, NewEvent
from burrow.tools.base import ShellState, Tool, ToolLimits

log = logging.getLogger(__name__)


class ModelChooser(Protocol):
    """Builds what a conversation's own `model` needs (model_choice.py's ModelSettings)."""

    def provider_for(self, model: str | None) -> Provider: ...

    def pricing_for(self, model: str | None) -> Pricer: ...

    def describe(self, model: str | None) -> ModelInfo: ...


class ToolSource(Protocol):
    """Tools a conversation gets beyond the built-in ones (its MCP servers'), looked up at
    the start of each run; what could not be had comes back as {server: message}, which
    the assembly journals as `mcp.warning` (the event vocabulary is this layer's, not the
    tools')."""

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
    ownership: RunOwnership | None = None  # several replicas: who runs what (None: one process)
    # A conversation's secret mask (secrets.py), applied to every model request.
    request_mask: Callable[[str], Awaitable[SecretMask]] | None = None

    def compaction(self, model: str | None) -> CompactionPolicy:
        return CompactionPolicy(self.context_window(model), self.compact_at)


@dataclass(frozen=True)
class ConversationModel:
    """What a conversation's model brings to a run: its provider, prices and abilities."""

    provider: Provider
    pricing: Pricer
    compaction: CompactionPolicy
    vision: bool


class AssembledRun(NamedTuple):
    run: AgentRun
    budget: BudgetHook  # the run's budget check, which a PATCHed budget reaches


class RunAssembly:
    def __init__(
        self,
        journal: Journal,
        conversations: ConversationStore,
        sandboxes: SandboxPool,
        tools: Mapping[str, Tool],
        provider: Callable[[], Provider],
        approvals: ApprovalGate,
        checkpoints: Checkpoints,
        options: RuntimeOptions,
    ) -> None:
        self._journal = journal
        self._conversations = conversations
        self._sandboxes = sandboxes
        self.tools = tools
        self._provider = provider
        self._approvals = approvals
        self._checkpoints = checkpoints
        self._options = options
        self._shells: dict[str, ShellState] = {}  # a conversation's shell outlives its runs

    async def build(
        self, cid: str, run_id: str, context: ModelContext, feed: Subscription
    ) -> AssembledRun:
        options = self._options
        conversation = await self._conversations.get(cid)
        if conversation is None:
            raise ConversationGone(cid)
        profile = await self._profile(conversation)
        if profile is not None and profile.model and not conversation.model:
            conversation = replace(conversation, model=profile.model)  # explicit wins
        model = self.model(conversation)
        budget = BudgetHook(
            options.budget.overridden(conversation.budget), spent_before=conversation.usage.cost
        )
        bare = lambda: self._sandboxes.get(cid)  # noqa: E731
        env = RunEnv(
            journal=self._journal,
            provider=model.provider,
            tools=await self._tools(cid, run_id),
            sandbox=lambda: self._sandboxes.commands(cid),  # secrets in, masked out
            shell=self._shells.setdefault(cid, ShellState()),
            limits=options.limits,
            pricing=model.pricing,
            preview_url=options.preview_url,
        )
        system_prompt = options.loop.system_prompt
        if profile is not None and profile.system_prompt:
            system_prompt = profile.system_prompt
        skills = Skills(
            options.skills_dir,
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
            SystemPrompt(system_prompt),
            instructions,
            Approvals(self._approvals),
            PreviewOpened(),
            Checklist(),
            PlanMode(self._approvals),
            LoopGuard(),  # fresh for each run: it counts per run
            skills,
            # After the hooks that read the sandbox (AGENTS.md, skills), whose small reads
            # beside it would wait on the sandbox's CPU: it runs beside the model's first
            # call, and the first tool call waits for what is left of it.
            CheckpointAtStart(self._checkpoints, _checkpoint_failed),
            # The budget before attachments: a stopped run need not wake the sandbox.
            budget,
            Attachments(context, bare, vision=model.vision),
            # Last: it measures the request as the hooks before it shaped it.
            Compactor(model.provider, model.compaction, model.pricing),
        ]
        if options.max_subagents > 0:
            subagents = Subagents(
                SubagentSetup(
                    env,
                    system_prompt,
                    # A subagent's calls pass the same allowlist, gate and budget.
                    lambda: [
                        *allowlist,
                        instructions,  # the parent's: AGENTS.md read once per run
                        skills,
                        Approvals(self._approvals),
                        PreviewOpened(),
                        Checklist(),
                        LoopGuard(),
                        budget,
                    ],
                    options.max_subagents,
                )
            )
            hooks.insert(len(allowlist), subagents)
            env.tools = subagents.tools(env.tools)
        env.hooks = hooks
        return AssembledRun(AgentRun(env, cid, run_id, context, feed), budget)

    def model(self, conversation: Conversation) -> ConversationModel:
        models, chosen, options = self._options.models, conversation.model, self._options
        if models is None:
            return ConversationModel(
                self._masked(conversation.id, LazyProvider(self._provider)),
                options.pricing,
                options.compaction(chosen),
                vision=False,
            )
        return ConversationModel(
            self._masked(conversation.id, LazyProvider(lambda: models.provider_for(chosen))),
            models.pricing_for(chosen),
            options.compaction(chosen),
            vision=models.describe(chosen).vision,
        )

    async def compaction(self, conversation: Conversation, context: ModelContext) -> list[NewEvent]:
        """The events of compacting `context` now, as asked (`POST …/compact`): all but the
        latest turn summarized by the conversation's model. Raises NothingToCompact, or the
        summary call's ModelError."""
        model = self.model(conversation)
        system = Message(role="system", content=self._options.loop.system_prompt)
        events, _ = await compact(
            context,
            model.provider,
            model.compaction,
            model.pricing,
            overhead=estimate([system], [tool.spec for tool in self.tools.values()]),
            run_id=None,
            keep_tokens=0,
        )
        return events

    def forget(self, cid: str) -> None:
        """The conversation was deleted."""
        self._shells.pop(cid, None)

    async def _tools(self, cid: str, run_id: str) -> Mapping[str, Tool]:
        """The built-in tools and what the tool sources add (never replacing one)."""
        if not self._options.tool_sources:
            return self.tools
        tools = dict(self.tools)
        for source in self._options.tool_sources:
            found, warnings = await source.tools_for(cid, run_id)
            for name, tool in found.items():
                tools.setdefault(name, tool)
            if warnings:
                await self._journal.append(
                    cid,
                    *(ev.make(ev.McpWarning(server=s, message=m)) for s, m in warnings.items()),
                )
        return tools

    def _masked(self, cid: str, provider: Provider) -> Provider:
        """The one provider every request of the conversation goes through (its runs,
        subagents, compactions), masking the whole request on its way out."""
        mask = self._options.request_mask
        if mask is None:
            return provider
        return MaskedProvider(provider, lambda: mask(cid))

    async def _profile(self, conversation: Conversation) -> Profile | None:
        name, profiles = conversation.profile, self._options.profiles
        if name == DEFAULT_PROFILE or profiles is None:
            return None
        found = await profiles.find(conversation.owner_id, name)
        if found is None:
            raise ProfileMissing(name)
        return found


def _checkpoint_failed(cid: str, run_id: str, exc: Exception) -> None:
    log.warning("no checkpoint at the start of run %s of %s: %s", run_id, cid, exc)


class LazyProvider:
    """Builds the provider on the first model call, so a missing key fails the run with
    its message (journaled, visible) instead of failing the HTTP request."""

    def __init__(self, factory: Callable[[], Provider]) -> None:
        self._factory = factory
        self._provider: Provider | None = None
        self.name = "lazy"

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        if self._provider is None:
            try:
                self._provider = self._factory()
            except ModelError:
                raise
            except ValueError as exc:
                raise ModelError(str(exc)) from exc
        async for item in self._provider.stream(messages, tools, max_tokens):
            yield item
