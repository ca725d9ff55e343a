"""Conversations and what a person does to them: send, steer, interrupt."""

from __future__ import annotations

from fastapi import APIRouter, Response

from burrow.api.deps import ConversationDep, ServicesDep, UserDep
from burrow.api.errors import not_found
from burrow.api.schemas import (
    Accepted,
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
async def rename_conversation(
    body: RenameConversation, conversation: ConversationDep, svc: ServicesDep
) -> ConversationOut:
    await svc.conversations.rename(conversation.id, body.title)
    renamed = await svc.conversations.get(conversation.id)
    if renamed is None:
        raise not_found(f"Conversation {conversation.id}")
    return ConversationOut.of(renamed)


@router.delete("/{cid}", status_code=204)
async def delete_conversation(conversation: ConversationDep, svc: ServicesDep) -> Response:
    await svc.runtime.delete(conversation.id)
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


@router.post("/{cid}/interrupt", status_code=202)
async def interrupt(conversation: ConversationDep, svc: ServicesDep) -> Accepted:
    run_id = svc.runtime.active_run(conversation.id)
    await svc.runtime.interrupt(conversation.id)
    return Accepted(run_id=run_id)
