"""Request dependencies: the services, the caller, and ownership-checked lookups."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from burrow.api.errors import not_found
from burrow.services import Services
from burrow.store.records import Conversation, User


def services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


ServicesDep = Annotated[Services, Depends(services)]


async def current_user(svc: ServicesDep) -> User:
    # The seam for accounts: until they exist every request acts as the local owner.
    return svc.owner


UserDep = Annotated[User, Depends(current_user)]


async def owned_conversation(cid: str, svc: ServicesDep, user: UserDep) -> Conversation:
    """The conversation if it is the caller's; someone else's answers 404, like a missing one."""
    conversation = await svc.conversations.get(cid, owner_id=user.id)
    if conversation is None:
        raise not_found(f"Conversation {cid}")
    return conversation


ConversationDep = Annotated[Conversation, Depends(owned_conversation)]
