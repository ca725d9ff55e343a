"""Request dependencies: the services, the caller, and ownership-checked lookups.

They take an `HTTPConnection`, so HTTP routes and WebSocket routes share them.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from burrow.api.errors import ApiError, not_found
from burrow.api.streams import StreamCap
from burrow.services import Services
from burrow.store.records import Conversation, User

SESSION_COOKIE = "burrow_session"


def services(connection: HTTPConnection) -> Services:
    found: Services = connection.app.state.services
    return found


ServicesDep = Annotated[Services, Depends(services)]


def stream_cap(connection: HTTPConnection) -> StreamCap:
    """Open SSE streams and terminal sockets per user (BURROW_MAX_STREAMS_PER_USER)."""
    found: StreamCap = connection.app.state.stream_cap
    return found


StreamCapDep = Annotated[StreamCap, Depends(stream_cap)]


def bearer_token(connection: HTTPConnection) -> str | None:
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def optional_user(connection: HTTPConnection, svc: ServicesDep) -> User | None:
    """The caller from a session cookie or an `Authorization: Bearer` API token."""
    token = bearer_token(connection)
    if token is not None:
        return await svc.accounts.user_for(token, "api") or await svc.accounts.user_for(
            token, "session"
        )
    cookie = connection.cookies.get(SESSION_COOKIE)
    if cookie:
        return await svc.accounts.user_for(cookie, "session")
    return None


async def current_user(user: Annotated[User | None, Depends(optional_user)]) -> User:
    if user is None:
        raise ApiError(
            401,
            "unauthorized",
            "Log in first: POST /api/auth/login, or send Authorization: Bearer <API token>.",
        )
    return user


UserDep = Annotated[User, Depends(current_user)]


async def owned_conversation(cid: str, svc: ServicesDep, user: UserDep) -> Conversation:
    """The conversation if it is the caller's; someone else's answers 404, like a missing one."""
    conversation = await svc.conversations.get(cid, owner_id=user.id)
    if conversation is None:
        raise not_found(f"Conversation {cid}")
    return conversation


ConversationDep = Annotated[Conversation, Depends(owned_conversation)]
