"""Log in and out (session cookie), and API tokens for the command line."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from burrow.api import session_cookie
from burrow.api.deps import OptionalUserDep, ServicesDep, UserDep, stream_cap
from burrow.api.errors import ApiError, not_found
from burrow.api.schemas import Me
from burrow.api.streams import SIGNED_OUT
from burrow.api.throttle import password_attempt
from burrow.store.accounts import token_digest

router = APIRouter(prefix="/api/auth", tags=["auth"])


class Login(BaseModel):
    username: str = Field(min_length=1, max_length=200)
    password: str = Field(min_length=1, max_length=1000)


class NewToken(BaseModel):
    name: str = Field(default="cli", max_length=200)


class TokenCreated(BaseModel):
    token: str = Field(description="Shown once; send it as Authorization: Bearer <token>.")
    id: str
    name: str


class SessionOut(BaseModel):
    signed_in: bool
    user: Me | None = Field(description="The caller, when signed in.")


class TokenOut(BaseModel):
    id: str
    name: str
    created_at: datetime


@router.post("/login")
async def login(body: Login, request: Request, response: Response, svc: ServicesDep) -> Me:
    async with await password_attempt(request, body.username) as attempt:
        # Too many checks queued: PasswordsBusy, a 503 (api/errors.py), and not a failure.
        user = await svc.accounts.authenticate(body.username, body.password)
        if user is None:
            attempt.failed()
            raise ApiError(401, "bad_credentials", "Wrong username or password.")
        attempt.succeeded()
    token = await svc.accounts.issue(user.id, "session")
    session_cookie.give(response, request, token)
    return Me(id=user.id, username=user.username, is_admin=user.is_admin)


@router.get("/session")
async def session(user: OptionalUserDep) -> SessionOut:
    """Who is signed in, if anyone: the web app's first probe. Signed out is an answer here,
    not an error (GET /api/me keeps its 401 for clients that want one)."""
    if user is None:
        return SessionOut(signed_in=False, user=None)
    return SessionOut(
        signed_in=True, user=Me(id=user.id, username=user.username, is_admin=user.is_admin)
    )


@router.post("/logout", status_code=204)
async def logout(request: Request, svc: ServicesDep) -> Response:
    # Every session cookie sent ends, also when there are two (one tossed by another host),
    # and so do the streams and terminal sockets each opened.
    for _, token in session_cookie.presented(request):
        if token:
            await svc.accounts.revoke(token)
            stream_cap(request).end(SIGNED_OUT, credential=token_digest(token))
    response = Response(status_code=204)
    session_cookie.take_back(response, request)
    return response


@router.post("/tokens", status_code=201)
async def create_token(body: NewToken, user: UserDep, svc: ServicesDep) -> TokenCreated:
    token = await svc.accounts.issue(user.id, "api", body.name)
    return TokenCreated(token=token, id=token_digest(token)[:16], name=body.name)


@router.get("/tokens")
async def list_tokens(user: UserDep, svc: ServicesDep) -> list[TokenOut]:
    return [
        TokenOut(id=t.token_hash[:16], name=t.name, created_at=t.created_at)
        for t in await svc.accounts.api_tokens(user.id)
    ]


@router.delete("/tokens/{token_id}", status_code=204)
async def delete_token(
    token_id: str, request: Request, user: UserDep, svc: ServicesDep
) -> Response:
    for t in await svc.accounts.api_tokens(user.id):
        if t.token_hash.startswith(token_id) and len(token_id) == 16:
            await svc.accounts.revoke_api_token(user.id, t.token_hash)
            stream_cap(request).end(SIGNED_OUT, credential=t.token_hash)
            return Response(status_code=204)
    raise not_found(f"API token {token_id}")
