"""Conversations and what a person does to them: create, change, fork, delete; send,
steer, answer, interrupt, compact. Each is one call of the service (svc.conversations)."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from burrow.api.checks import attachment_paths, checked_repo, setting_refused
from burrow.api.deps import ConversationDep, ServicesDep, UserDep
from burrow.api.errors import ApiError, not_found
from burrow.api.schemas import (
    Accepted,
    ApprovalAnswer,
    ApprovalAnswered,
    Compacted,
    ContextUse,
    ConversationOut,
    CreateConversation,
    MessageAccepted,
    PlanDecided,
    PlanDecisionIn,
    SendMessage,
    UpdateConversation,
)
from burrow.llm.base import ModelError
from burrow.runs.conversations.service import (
    NoCheckpoint,
    RunActive,
    RunNotFound,
    SettingRefused,
    SettingsChange,
)
from burrow.runs.loop.hooks.compaction import NothingToCompact
from burrow.runs.loop.hooks.profiles import DEFAULT_PROFILE
from burrow.services import Services
from burrow.store.events import ConversationGone
from burrow.store.records import Conversation

router = APIRouter(prefix="/api/conversations", tags=["conversations"])


async def views(svc: Services, conversations: Sequence[Conversation]) -> list[ConversationOut]:
    use = await svc.conversations.context_use(conversations)
    return [
        ConversationOut.of(
            c,
            ContextUse(used=use[c.id][0], window=use[c.id][1]),
            svc.settings.sandbox_network,
        )
        for c in conversations
    ]


async def view(svc: Services, conversation: Conversation) -> ConversationOut:
    [out] = await views(svc, [conversation])
    return out


@router.get("")
async def list_conversations(svc: ServicesDep, user: UserDep) -> list[ConversationOut]:
    return await views(svc, await svc.conversations.owned_by(user.id))


@router.post("", status_code=201)
async def create_conversation(
    body: CreateConversation, svc: ServicesDep, user: UserDep
) -> ConversationOut:
    repo = await checked_repo(svc, user.id, body, body.repo) if body.repo else None
    if body.environment is not None and svc.environments.get(body.environment) is None:
        raise ApiError(
            422,
            "environment_not_found",
            f"There is no environment {body.environment!r}: GET /api/environments lists them.",
        )
    try:
        created = await svc.conversations.create(
            user.id,
            body.title or "New conversation",
            body.profile or DEFAULT_PROFILE,
            model=body.model,
            approval_mode=body.approval_mode,
            network=body.network,
            repo=repo,  # cloned in the background: workspace.import events
            environment=body.environment,
        )
    except SettingRefused as exc:
        raise setting_refused(exc) from exc
    return await view(svc, created)


@router.get("/{cid}")
async def get_conversation(conversation: ConversationDep, svc: ServicesDep) -> ConversationOut:
    return await view(svc, conversation)


@router.patch("/{cid}")
async def update_conversation(
    body: UpdateConversation, conversation: ConversationDep, svc: ServicesDep
) -> ConversationOut:
    change = SettingsChange(
        title=body.title,
        profile=body.profile,
        approval_mode=body.approval_mode,
        secrets=body.secrets,
        model=body.model,
        budget=body.budget.model_dump(exclude_unset=True) if body.budget is not None else None,
        network=body.network,
    )
    try:
        updated = await svc.conversations.update(conversation, change)
    except SettingRefused as exc:
        raise setting_refused(exc) from exc
    except RunActive as exc:
        raise ApiError(
            409,
            "run_active",
            "The network policy changes between runs: wait for this one to finish "
            "(or interrupt it), then change it.",
        ) from exc
    except ConversationGone as exc:
        raise not_found(f"Conversation {conversation.id}") from exc
    return await view(svc, updated)


@router.delete("/{cid}", status_code=204)
async def delete_conversation(conversation: ConversationDep, svc: ServicesDep) -> Response:
    await svc.conversations.delete(conversation.id)
    return Response(status_code=204)


class ForkBody(BaseModel):
    run_id: str | None = Field(default=None, min_length=1, max_length=64)


@router.post("/{cid}/fork", status_code=201, tags=["forks"])
async def fork_conversation(
    conversation: ConversationDep, svc: ServicesDep, body: ForkBody | None = None
) -> ConversationOut:
    """A new conversation of the same owner and settings, with the journal before the run's
    user message and the workspace of its starting checkpoint; without `run_id`, the
    conversation as it is now (409 `run_active` while a run changes it)."""
    run_id = body.run_id if body is not None else None
    try:
        forked = await svc.conversations.fork(conversation, run_id)
    except RunNotFound as exc:
        raise ApiError(404, "run_not_found", str(exc)) from exc
    except NoCheckpoint as exc:
        raise ApiError(409, "no_checkpoint", str(exc)) from exc
    except RunActive as exc:
        raise ApiError(
            409,
            "run_active",
            "A run is changing this conversation: fork it after the run ends, stop the run "
            "first, or fork at one of its earlier runs (run_id).",
        ) from exc
    except ConversationGone as exc:
        raise not_found(f"Conversation {conversation.id}") from exc
    return await view(svc, forked)


@router.post("/{cid}/messages", status_code=202)
async def send_message(
    body: SendMessage, conversation: ConversationDep, svc: ServicesDep
) -> MessageAccepted:
    try:
        paths = attachment_paths(body.attachments)
        run_id, seq = await svc.conversations.send(
            conversation.id, body.content, paths, approval_mode=body.approval_mode
        )
    except ConversationGone as exc:
        raise not_found(f"Conversation {conversation.id}") from exc
    return MessageAccepted(run_id=run_id, seq=seq)


@router.post("/{cid}/approvals/{request_id}")
async def answer_approval(
    request_id: str, body: ApprovalAnswer, conversation: ConversationDep, svc: ServicesDep
) -> ApprovalAnswered:
    """The owner's answer to an `approval.requested` event of this conversation."""
    if not await svc.conversations.answer(conversation.id, request_id, body.decision):
        raise ApiError(
            409,
            "not_waiting",
            f"No tool call of this conversation is waiting on {request_id}: it was answered "
            "already, or its run ended.",
        )
    return ApprovalAnswered(request_id=request_id, decision=body.decision)


@router.post("/{cid}/plans/{plan_id}")
async def decide_plan(
    plan_id: str, body: PlanDecisionIn, conversation: ConversationDep, svc: ServicesDep
) -> PlanDecided:
    """The owner's decision on a `plan.proposed` event of this conversation: approve (the
    run goes on in `mode` with `items`, or the plan as proposed) or reject (the run ends)."""
    items = None if body.items is None else [i.model_dump() for i in body.items]
    outcome = await svc.conversations.decide_plan(
        conversation.id, plan_id, body.decision == "approve", items, body.mode
    )
    if outcome == "unknown":
        raise not_found(f"Plan {plan_id}")
    if outcome == "not_waiting":
        raise ApiError(
            409,
            "plan_decided",
            f"Plan {plan_id} is not waiting for a decision: it was decided already, or its "
            "run ended (stopped, or the server restarted). Send a new message to plan again.",
        )
    return PlanDecided(plan_id=plan_id, decision=body.decision)


@router.post("/{cid}/interrupt", status_code=202)
async def interrupt(conversation: ConversationDep, svc: ServicesDep) -> Accepted:
    run_id = await svc.conversations.interrupt(conversation.id)
    return Accepted(run_id=run_id)


@router.post("/{cid}/compact", status_code=202)
async def compact(conversation: ConversationDep, svc: ServicesDep) -> Compacted:
    """Summarize the older turns now; answers once `context.compacted` is in the journal.

    While a run goes this is refused (409 `run_active`), not queued: the run compacts on
    its own when its context needs it, and a queued request could only compact after the
    run, when the person can simply ask again.
    """
    try:
        event = await svc.conversations.compact(conversation.id)
    except RunActive as exc:
        raise ApiError(
            409,
            "run_active",
            "A run is going in this conversation: it compacts its context itself when "
            "needed. Compact after it ends, or stop it first.",
        ) from exc
    except NothingToCompact as exc:
        raise ApiError(
            409,
            "nothing_to_compact",
            "Nothing to compact yet: the conversation holds only its latest turn and the "
            "user's own messages (which compaction keeps).",
        ) from exc
    except ModelError as exc:
        raise ApiError(502, "model_error", f"The summary call failed: {exc.message}") from exc
    except ConversationGone as exc:
        raise not_found(f"Conversation {conversation.id}") from exc
    data = event.data
    return Compacted(
        seq=event.seq,
        tokens_before=data["tokens_before"],
        tokens_after=data["tokens_after"],
        upto_seq=data["upto_seq"],
    )
