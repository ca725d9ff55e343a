"""Conversations and what a person does to them: send, steer, interrupt."""

from __future__ import annotations

from fastapi import APIRouter, Response

from burrow.api.deps import ConversationDep, ServicesDep, UserDep
from burrow.api.errors import ApiError, not_found
from burrow.api.schemas import (
    Accepted,
    ApprovalAnswer,
    ApprovalAnswered,
    ConversationOut,
    CreateConversation,
    MessageAccepted,
    RenameConversation,
    SendMessage,
)
from burrow.store.events import ConversationGone

router = APIRouter(prefix="/api/conversations", tags=["conversations"])


@router.get("")
async def list_conversations(svc: ServicesDep, user: UserDep) -> list[ConversationOut]:
    return [ConversationOut.of(c) for c in await svc.conversations.owned_by(user.id)]


@router.post("", status_code=201)
async def create_conversation(
    body: CreateConversation, svc: ServicesDep, user: UserDep
) -> ConversationOut:
    created = await svc.conversations.create(
        user.id, body.title or "New conversation", body.profile or "default"
    )
    return ConversationOut.of(created)


@router.get("/{cid}")
async def get_conversation(conversation: ConversationDep) -> ConversationOut:
    return ConversationOut.of(conversation)


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
    await svc.conversations.update(
        conversation.id, title=body.title, approval_mode=body.approval_mode, secrets=body.secrets
    )
    if body.approval_mode is not None:
        svc.runtime.approvals.mode_changed(conversation.id, body.approval_mode)
    renamed = await svc.conversations.get(conversation.id)
    if renamed is None:
        raise not_found(f"Conversation {conversation.id}")
    return ConversationOut.of(renamed)


@router.delete("/{cid}", status_code=204)
async def delete_conversation(conversation: ConversationDep, svc: ServicesDep) -> Response:
    await svc.runtime.delete(conversation.id)
    svc.secrets.forget(conversation.id)
    return Response(status_code=204)


@router.post("/{cid}/messages", status_code=202)
async def send_message(
    body: SendMessage, conversation: ConversationDep, svc: ServicesDep
) -> MessageAccepted:
    try:
        run_id, seq = await svc.runtime.send(conversation.id, body.content)
    except ConversationGone as exc:
        raise not_found(f"Conversation {conversation.id}") from exc
    return MessageAccepted(run_id=run_id, seq=seq)


@router.post("/{cid}/approvals/{request_id}")
async def answer_approval(
    request_id: str, body: ApprovalAnswer, conversation: ConversationDep, svc: ServicesDep
) -> ApprovalAnswered:
    """The owner's answer to an `approval.requested` event of this conversation."""
    if not await svc.runtime.approvals.answer(conversation.id, request_id, body.decision):
        raise ApiError(
            409,
            "not_waiting",
            f"No tool call of this conversation is waiting on {request_id}: it was answered "
            "already, or its run ended.",
        )
    return ApprovalAnswered(request_id=request_id, decision=body.decision)


@router.post("/{cid}/interrupt", status_code=202)
async def interrupt(conversation: ConversationDep, svc: ServicesDep) -> Accepted:
    run_id = svc.runtime.active_run(conversation.id)
    await svc.runtime.interrupt(conversation.id)
    return Accepted(run_id=run_id)
