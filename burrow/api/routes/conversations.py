"""Conversations and what a person does to them: send, steer, interrupt, compact."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Response

from burrow.api.conversation_settings import (
    ConversationSettings,
    attachment_paths,
    checked_model,
)
from burrow.api.deps import ConversationDep, ServicesDep, UserDep
from burrow.api.errors import ApiError, not_found
from burrow.api.routes.git import checked_repo
from burrow.api.schemas import (
    Accepted,
    ApprovalAnswer,
    ApprovalAnswered,
    Compacted,
    ContextUse,
    ConversationOut,
    CreateConversation,
    MessageAccepted,
    RenameConversation,
    SendMessage,
)
from burrow.llm.base import ModelError
from burrow.runs.conversations.runtime import RunActive
from burrow.runs.loop.hooks.compaction import NothingToCompact
from burrow.runs.loop.hooks.profiles import DEFAULT_PROFILE
from burrow.runs.loop.window import context_used
from burrow.services import Services
from burrow.store.events import ConversationGone
from burrow.store.profiles import Profile
from burrow.store.records import Conversation

router = APIRouter(prefix="/api/conversations", tags=["conversations"])


async def views(svc: Services, conversations: Sequence[Conversation]) -> list[ConversationOut]:
    used = await context_used(svc.journal, [c.id for c in conversations])
    window = svc.runtime.options.context_window
    return [
        ConversationOut.of(
            c,
            ContextUse(used=used.get(c.id, 0), window=window(c.model)),
            svc.settings.sandbox_network,
        )
        for c in conversations
    ]


async def view(svc: Services, conversation: Conversation) -> ConversationOut:
    [out] = await views(svc, [conversation])
    return out


async def chosen_profile(svc: Services, user_id: str, name: str) -> Profile | None:
    """The profile `name` means to the user (None: "default", no profile), or a 400."""
    if name == DEFAULT_PROFILE:
        return None
    found = await svc.profiles.find(user_id, name)
    if found is None:
        raise ApiError(
            400,
            "unknown_profile",
            f"No profile named {name!r}: create it first (PUT /api/profiles/{{name}}).",
        )
    return found


@router.get("")
async def list_conversations(svc: ServicesDep, user: UserDep) -> list[ConversationOut]:
    return await views(svc, await svc.conversations.owned_by(user.id))


@router.post("", status_code=201)
async def create_conversation(
    body: CreateConversation, svc: ServicesDep, user: UserDep
) -> ConversationOut:
    model = checked_model(svc, body.model) if body.model is not None else None
    repo = await checked_repo(svc, user.id, body, body.repo) if body.repo else None
    profile = await chosen_profile(svc, user.id, body.profile or DEFAULT_PROFILE)
    created = await svc.conversations.create(
        user.id,
        body.title or "New conversation",
        profile.name if profile else DEFAULT_PROFILE,
        model=model,
        # Explicit fields win over the profile's.
        approval_mode=body.approval_mode or (profile and profile.approval_mode) or "ask",
        # Stored, not looked up later: a conversation keeps its policy when the default moves.
        network=body.network or svc.settings.sandbox_network,
    )
    if repo is not None:
        svc.imports.start(created.id, repo)  # in the background: workspace.import events
    return await view(svc, created)


@router.get("/{cid}")
async def get_conversation(conversation: ConversationDep, svc: ServicesDep) -> ConversationOut:
    return await view(svc, conversation)


@router.patch("/{cid}")
async def update_conversation(
    body: RenameConversation, conversation: ConversationDep, svc: ServicesDep
) -> ConversationOut:
    if body.secrets is not None:
        unknown = await svc.secrets.unknown(conversation.owner_id, body.secrets)
        if unknown:
            raise ApiError(
                400,
                "unknown_secrets",
                f"No secret named {', '.join(unknown)}: set it first (PUT /api/secrets/{{name}}).",
            )
    if body.network is not None and conversation.status in ("running", "waiting_approval"):
        raise ApiError(
            409,
            "run_active",
            "The network policy changes between runs: wait for this one to finish "
            "(or interrupt it), then change it.",
        )
    settings = ConversationSettings(svc, conversation)
    model = settings.model(body.model)
    budget = settings.budget(body.budget)
    approval_mode = body.approval_mode
    if body.profile is not None:
        profile = await chosen_profile(svc, conversation.owner_id, body.profile)
        if profile is not None and approval_mode is None:  # explicit fields win
            approval_mode = profile.approval_mode  # type: ignore[assignment]
    await svc.conversations.update(
        conversation.id,
        title=body.title,
        approval_mode=approval_mode,
        secrets=body.secrets,
        network=body.network,
        profile=body.profile,
        **model,
        **budget,
    )
    if approval_mode is not None:
        svc.runtime.approvals.mode_changed(conversation.id, approval_mode)
    if body.network is not None and body.network != (
        conversation.network or svc.settings.sandbox_network
    ):
        # A sandbox's network is set when it boots: an idle one is hibernated now (files
        # kept, services started again on wake) and wakes with the new policy on next use;
        # one running a command (a terminal's job) takes it at its next start.
        await svc.runtime.sandboxes.hibernate(
            conversation.id,
            f"network changed to {body.network}; files kept, wakes with it on next use",
        )
    await settings.announce()
    renamed = await svc.conversations.get(conversation.id)
    if renamed is None:
        raise not_found(f"Conversation {conversation.id}")
    return await view(svc, renamed)


@router.delete("/{cid}", status_code=204)
async def delete_conversation(conversation: ConversationDep, svc: ServicesDep) -> Response:
    await svc.imports.forget(conversation.id)
    await svc.commands.interrupt(conversation.id)  # a run on another replica stops first
    await svc.runtime.delete(conversation.id)
    svc.secrets.forget(conversation.id)
    return Response(status_code=204)


@router.post("/{cid}/messages", status_code=202)
async def send_message(
    body: SendMessage, conversation: ConversationDep, svc: ServicesDep
) -> MessageAccepted:
    try:
        paths = attachment_paths(body.attachments)
        run_id, seq = await svc.commands.send(conversation.id, body.content, paths)
    except ConversationGone as exc:
        raise not_found(f"Conversation {conversation.id}") from exc
    return MessageAccepted(run_id=run_id, seq=seq)


@router.post("/{cid}/approvals/{request_id}")
async def answer_approval(
    request_id: str, body: ApprovalAnswer, conversation: ConversationDep, svc: ServicesDep
) -> ApprovalAnswered:
    """The owner's answer to an `approval.requested` event of this conversation."""
    if not await svc.commands.answer(conversation.id, request_id, body.decision):
        raise ApiError(
            409,
            "not_waiting",
            f"No tool call of this conversation is waiting on {request_id}: it was answered "
            "already, or its run ended.",
        )
    return ApprovalAnswered(request_id=request_id, decision=body.decision)


@router.post("/{cid}/interrupt", status_code=202)
async def interrupt(conversation: ConversationDep, svc: ServicesDep) -> Accepted:
    run_id = await svc.commands.interrupt(conversation.id)
    return Accepted(run_id=run_id)


@router.post("/{cid}/compact", status_code=202)
async def compact(conversation: ConversationDep, svc: ServicesDep) -> Compacted:
    """Summarize the older turns now; answers once `context.compacted` is in the journal.

    While a run goes this is refused (409 `run_active`), not queued: the run compacts on
    its own when its context needs it, and a queued request could only compact after the
    run, when the person can simply ask again.
    """
    try:
        event = await svc.runtime.compact(conversation.id)
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
