"""The application's one door: everything the API does to or asks of a conversation.

Routes translate HTTP into these calls and the errors below into status codes; they never
reach the runtime, its sandbox pool, checkpoints, approvals or journal themselves. A
settings change is one call here that keeps every cache in step (the approval gate's mode,
the active run's budget, a sandbox that must boot with a new network, the `model.changed`
announcement), where it used to be three updates at the edge.

`__all__` also lists the application layer's errors and views the API may name: this
module is all of the layer that `burrow/api` imports (tests/test_layers.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from burrow.runs.conversations.actions import Actions
from burrow.runs.conversations.forks import NoCheckpoint, RunNotFound, fork
from burrow.runs.conversations.leases import RunElsewhere
from burrow.runs.conversations.model_choice import ModelSettings, ModelView, ProviderView
from burrow.runs.conversations.runtime import RunActive, Runtime
from burrow.runs.conversations.secrets import (
    MAX_NAME,
    MAX_VALUE,
    ConversationSecrets,
    SecretRefused,
)
from burrow.runs.journal import events as ev
from burrow.runs.journal.journal import DirectWrite
from burrow.runs.loop.hooks.approvals import PlanDecision
from burrow.runs.loop.hooks.profiles import DEFAULT_PROFILE, ProfileLookup
from burrow.runs.loop.window import context_used
from burrow.runs.workspace.access import WorkspaceAccess
from burrow.runs.workspace.checkpoints import Checkpoint
from burrow.runs.workspace.git.repo_import import RepoImports, RepoSource
from burrow.sandbox.backend import NetworkPolicy
from burrow.store.conversations import ConversationStore
from burrow.store.events import ConversationGone
from burrow.store.forks import ForkStore
from burrow.store.profiles import Profile
from burrow.store.records import Conversation, Event

__all__ = [
    "MAX_NAME",
    "MAX_VALUE",
    "Conversations",
    "ModelView",
    "NoCheckpoint",
    "ProviderView",
    "RunActive",
    "RunElsewhere",
    "RunNotFound",
    "SecretRefused",
    "SettingRefused",
    "SettingsChange",
]

KEEP: Any = object()  # a SettingsChange field left as it is


class SettingRefused(ValueError):
    """A setting the server cannot take (400 `code`), with what to send instead."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SettingsChange:
    """One PATCH of a conversation: a field left None stays as it is."""

    title: str | None = None
    profile: str | None = None  # "default": none; its approval mode applies unless given
    approval_mode: str | None = None
    secrets: list[str] | None = None
    model: str | None = None  # `[provider:]model`; "": back to the server's model
    budget: Mapping[str, float | None] | None = None  # given fields; None: the server's
    network: str | None = None  # between runs only


class Conversations:
    def __init__(
        self,
        store: ConversationStore,
        runtime: Runtime,
        commands: Actions,
        imports: RepoImports,
        secrets: ConversationSecrets,
        models: ModelSettings,
        profiles: ProfileLookup,
        forks: ForkStore,
        default_network: NetworkPolicy,
    ) -> None:
        self._store = store
        self._runtime = runtime
        self._journal = runtime.journal
        self._commands = commands
        self._imports = imports
        self._secrets = secrets
        self._models = models
        self._profiles = profiles
        self._forks = forks
        self._default_network = default_network
        self.workspace = WorkspaceAccess(runtime.sandboxes, runtime.checkpoints, imports)

    # What a conversation is

    async def get(self, cid: str, owner_id: str | None = None) -> Conversation | None:
        """The conversation, or None when it does not exist or is not `owner_id`'s."""
        return await self._store.get(cid, owner_id)

    async def owned_by(self, owner_id: str) -> list[Conversation]:
        return await self._store.owned_by(owner_id)

    async def network_of(self, cid: str) -> NetworkPolicy:
        """The network policy the conversation's sandbox gets (its own, or the default)."""
        return await self._store.network_of(cid) or self._default_network

    async def context_use(
        self, conversations: Sequence[Conversation]
    ) -> dict[str, tuple[int, int]]:
        """Per conversation: (tokens its context holds, tokens its model accepts)."""
        used = await context_used(self._journal, [c.id for c in conversations])
        window = self._runtime.options.context_window
        return {c.id: (used.get(c.id, 0), window(c.model)) for c in conversations}

    async def create(
        self,
        owner_id: str,
        title: str,
        profile: str = DEFAULT_PROFILE,
        *,
        model: str | None = None,
        approval_mode: str | None = None,
        network: str | None = None,
        repo: RepoSource | None = None,
        environment: str | None = None,
    ) -> Conversation:
        """A new conversation; with `repo`, its clone starts in the background
        (`workspace.import` events) and its first run waits for it."""
        chosen = self.checked_model(model) if model is not None else None
        found = await self._profile(owner_id, profile)
        created = await self._store.create(
            owner_id,
            title,
            found.name if found else DEFAULT_PROFILE,
            model=chosen,
            # Explicit fields win over the profile's.
            approval_mode=approval_mode or (found and found.approval_mode) or "ask",
            # Stored, not looked up later: a conversation keeps its policy when the default moves.
            network=network or self._default_network,
            environment=environment,
        )
        if repo is not None:
            self._imports.start(created.id, repo)
        return created

    async def update(self, conversation: Conversation, change: SettingsChange) -> Conversation:
        """Apply one settings change, with everything it implies; raises SettingRefused,
        RunActive (a network change while a run goes) or ConversationGone."""
        cid = conversation.id
        if change.secrets is not None:
            unknown = await self._secrets.unknown(conversation.owner_id, change.secrets)
            if unknown:
                raise SettingRefused(
                    "unknown_secrets",
                    f"No secret named {', '.join(unknown)}: set it first "
                    "(PUT /api/secrets/{name}).",
                )
        if change.network is not None and conversation.status in ("running", "waiting_approval"):
            raise RunActive(cid)
        model: Any = KEEP
        if change.model is not None:
            model = self.checked_model(change.model) if change.model.strip() else None
        budget = None
        if change.budget is not None:
            merged = {**conversation.budget, **change.budget}
            budget = {k: v for k, v in merged.items() if v is not None}
        approval_mode = change.approval_mode
        if change.profile is not None:
            found = await self._profile(conversation.owner_id, change.profile)
            if found is not None and approval_mode is None:  # explicit fields win
                approval_mode = found.approval_mode
        await self._store.update(
            cid,
            title=change.title,
            approval_mode=approval_mode,
            secrets=change.secrets,
            network=change.network,
            profile=change.profile,
            budget=budget,
            **({} if model is KEEP else {"model": model}),
        )
        if approval_mode is not None:
            self._runtime.approvals.mode_changed(cid, approval_mode)
        if change.network is not None and change.network != (
            conversation.network or self._default_network
        ):
            # A sandbox's network is set when it boots: an idle one is hibernated now (files
            # kept, services started again on wake) and wakes with the new policy on next
            # use; one running a command (a terminal's job) takes it at its next start.
            await self._runtime.sandboxes.hibernate(
                cid, f"network changed to {change.network}; files kept, wakes with it on next use"
            )
        if model is not KEEP and model != conversation.model:
            shown = model or self._models.config.model or ""  # the next run uses it
            await self._journal.append(cid, ev.make(ev.ModelChanged(model=shown)))
        if budget is not None:  # the run going now applies it at its next check
            self._runtime.budget_changed(cid, budget)
        return await self._current(cid)

    async def delete(self, cid: str) -> None:
        await self._imports.forget(cid)
        await self._commands.interrupt(cid)  # a run on another replica stops first
        await self._runtime.delete(cid)
        self._secrets.forget(cid)

    async def fork(self, source: Conversation, run_id: str | None) -> Conversation:
        """A new conversation of the same owner and settings, with the journal before the
        run's user message and the workspace of its starting checkpoint (without a run:
        as it is now). Raises RunNotFound, NoCheckpoint, RunActive, ConversationGone."""
        return await self._current(await fork(self._runtime, self._forks, source, run_id))

    # Its log

    async def events(
        self, cid: str, after: int = 0, limit: int | None = None, max_bytes: int | None = None
    ) -> list[Event]:
        return await self._journal.read(cid, after, limit, max_bytes)

    async def run_start(self, run_id: str, owner_id: str) -> tuple[str, int] | None:
        """The owner's conversation a run was in and the seq of its run.started (None: no
        such run of theirs: someone else's answers the same as a missing one)."""
        found = await self._journal.run_start(run_id)
        if found is None or await self.get(found[0], owner_id=owner_id) is None:
            return None
        return found

    def pages(self, cid: str, after: int = 0) -> AsyncIterator[list[Event]]:
        """Every stored event after `after`, in bounded pages."""
        return self._journal.pages(cid, after)

    def follow(
        self, cid: str, after: int = 0, heartbeat: float = 15.0, direct: DirectWrite | None = None
    ) -> AsyncIterator[list[Event]]:
        """Every event after `after`, then live ones as they commit ([] : a heartbeat)."""
        return self._journal.follow(cid, after, heartbeat, direct)

    # A person's actions on its run, applied by whichever replica runs it

    async def busy(self, cid: str) -> bool:
        """Whether a run goes in the conversation, here or on another replica."""
        return await self._runtime.busy(cid)

    async def send(
        self,
        cid: str,
        content: str,
        attachments: Sequence[str] = (),
        *,
        approval_mode: str | None = None,
    ) -> tuple[str, int]:
        """A user message: a new run (in `approval_mode` when given, else the
        conversation's), or steering of the one going. -> (run_id, seq)"""
        return await self._commands.send(cid, content, attachments, approval_mode)

    async def decide_plan(
        self,
        cid: str,
        plan_id: str,
        approve: bool,
        items: list[dict[str, Any]] | None,
        mode: str | None,
    ) -> Literal["decided", "not_waiting", "unknown"]:
        """The owner's decision on a proposed plan of `cid` (runs/loop/hooks/plans.py)."""
        if await self._commands.decide_plan(cid, plan_id, PlanDecision(approve, items, mode)):
            return "decided"
        proposed = ev.EventType.PLAN_PROPOSED.value
        for event in await self._runtime.journal.read(cid):
            if event.type == proposed and event.data.get("plan_id") == plan_id:
                return "not_waiting"
        return "unknown"

    async def send_unattended(self, cid: str, content: str) -> tuple[str, int]:
        """A message whose run nobody watches (an A2A task): a call that would ask for
        approval is refused. Raises RunElsewhere for a run another replica holds."""
        run_id, seq = await self._runtime.send(cid, content)
        # No await since `send`: the run has not reached a tool call yet.
        self._runtime.approvals.unattended(run_id)
        return run_id, seq

    async def answer(self, cid: str, request_id: str, decision: ev.Decision) -> bool:
        """The owner's answer to an approval request; False when nothing waits on it."""
        return await self._commands.answer(cid, request_id, decision)

    async def interrupt(self, cid: str) -> str | None:
        """Stop the run wherever it goes; its id (None: none was going)."""
        return await self._commands.interrupt(cid)

    async def compact(self, cid: str) -> Event:
        """Summarize the older turns now; raises RunActive, NothingToCompact, ModelError."""
        return await self._runtime.compact(cid)

    # What changes the workspace in a way the conversation must know of

    async def restore(self, cid: str, checkpoint_id: str) -> Checkpoint:
        """The workspace as it was at the checkpoint; the state before is checkpointed
        first (returned: restoring it undoes this). Raises RunActive, CheckpointNotFound."""
        await self._idle(cid)
        undo = await self._runtime.checkpoints.restore(cid, checkpoint_id)
        restored = ev.WorkspaceRestored(checkpoint_id=checkpoint_id, undo_checkpoint_id=undo.id)
        await self._journal.append(cid, ev.make(restored))
        return undo

    async def revert(self, cid: str, path: str, checkpoint_id: str) -> tuple[str, Checkpoint]:
        """One path as it was at the checkpoint -> ("restored" | "deleted", the undo)."""
        await self._idle(cid)
        return await self._runtime.checkpoints.revert(cid, path, checkpoint_id)

    async def save_file(self, cid: str, path: str, data: bytes) -> None:
        """A save from the editor: written, and journaled so the model is told."""
        sandbox = await self._runtime.sandboxes.get(cid)
        await sandbox.write_file(path, data)
        await self._journal.append(cid, ev.make(ev.FileSaved(path=path, bytes=len(data))))

    async def _idle(self, cid: str) -> None:
        if await self._runtime.busy(cid):
            raise RunActive(cid)

    async def _current(self, cid: str) -> Conversation:
        found = await self._store.get(cid)
        if found is None:
            raise ConversationGone(cid)
        return found

    def checked_model(self, model: str) -> str:
        model = model.strip()
        problem = self._models.problem_with(model)
        if problem is not None:
            raise SettingRefused("invalid_model", f"Model {model!r} cannot be used: {problem}")
        return model

    async def _profile(self, owner_id: str, name: str) -> Profile | None:
        """The profile `name` means to the owner (None: "default", no profile)."""
        if name == DEFAULT_PROFILE:
            return None
        found = await self._profiles.find(owner_id, name)
        if found is None:
            raise SettingRefused(
                "unknown_profile",
                f"No profile named {name!r}: create it first (PUT /api/profiles/{{name}}).",
            )
        return found
