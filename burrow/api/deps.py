"""Request dependencies: the services, the caller, and ownership-checked lookups.

They take an `HTTPConnection`, so HTTP routes and WebSocket routes share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from burrow.api import session_cookie
from burrow.api.errors import ApiError, not_found
from burrow.api.streams import StreamCap
from burrow.services import Services
from burrow.store.accounts import TokenKind, token_digest
from burrow.store.records import Conversation, User


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


@dataclass(frozen=True)
class Credential:
    """What the request signs in with: a token, and the kinds it may be."""

    token: str
    kinds: tuple[TokenKind, ...]


def credential(connection: HTTPConnection) -> Credential | None:
    """An `Authorization: Bearer` token (an API token, or a session's), else the session
    cookie; raises `DuplicateSessionCookie` (400) for two session cookies."""
    token = bearer_token(connection)
    if token is not None:
        return Credential(token, ("api", "session"))
    cookie = session_cookie.read(connection)
    return Credential(cookie, ("session",)) if cookie else None


CredentialDep = Annotated[Credential | None, Depends(credential)]


def credential_digest(connection: HTTPConnection) -> str:
    """The digest of what signs `connection` in (as `credential` reads it): what logout,
    a password change or a revoked token matches a stream by; "" when nothing does."""
    found = credential(connection)
    return token_digest(found.token) if found is not None else ""


async def optional_user(connection: HTTPConnection, svc: ServicesDep) -> User | None:
    """The caller from a session cookie or an `Authorization: Bearer` API token."""
    found = credential(connection)
    if found is None:
        return None
    for kind in found.kinds:
        user = await svc.accounts.user_for(found.token, kind)
        if user is not None:
            return user
    return None


OptionalUserDep = Annotated[User | None, Depends(optional_user)]


async def current_user(user: OptionalUserDep) -> User:
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
