"""Accounts, created and changed by an administrator."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from burrow.api.deps import ServicesDep, UserDep, stream_cap
from burrow.api.errors import ApiError, not_found
from burrow.api.schemas import Me
from burrow.api.streams import SIGNED_OUT
from burrow.store.accounts import LastAdmin
from burrow.store.records import User

router = APIRouter(prefix="/api/users", tags=["users"])


class NewUser(BaseModel):
    username: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.@-]+$")
    password: str = Field(min_length=8, max_length=1000)
    is_admin: bool = False


class AccountOut(BaseModel):
    id: str
    username: str
    is_admin: bool
    disabled: bool
    created_at: datetime


class AccountChange(BaseModel):
    disabled: bool | None = None
    password: str | None = Field(default=None, min_length=8, max_length=1000)
    is_admin: bool | None = None


def _admin_only(user: User, doing: str) -> None:
    if not user.is_admin:
        raise ApiError(403, "forbidden", f"Only an administrator can {doing}.")


@router.get("")
async def list_users(user: UserDep, svc: ServicesDep) -> list[AccountOut]:
    _admin_only(user, "list accounts")
    return [AccountOut(**vars(a)) for a in await svc.accounts.accounts()]


@router.patch("/{user_id}")
async def update_user(
    user_id: str, body: AccountChange, request: Request, user: UserDep, svc: ServicesDep
) -> AccountOut:
    """Disabling ends the account's sessions, its API tokens and its open streams at once;
    a new password ends its browser sessions and their streams."""
    _admin_only(user, "change accounts")
    try:
        changed = await svc.accounts.update(
            user_id, disabled=body.disabled, is_admin=body.is_admin, password=body.password
        )
    except LastAdmin as exc:
        raise ApiError(409, "last_admin", str(exc)) from None
    if changed is None:
        raise not_found(f"User {user_id}")
    if changed.disabled:
        stream_cap(request).end(SIGNED_OUT, user_id=user_id)
    elif body.password is not None:  # API tokens stay valid, and their streams open
        tokens = {t.token_hash for t in await svc.accounts.api_tokens(user_id)}
        stream_cap(request).end(SIGNED_OUT, user_id=user_id, keep=tokens)
    return AccountOut(**vars(changed))


@router.post("", status_code=201)
async def create_user(body: NewUser, user: UserDep, svc: ServicesDep) -> Me:
    _admin_only(user, "create accounts")
    if await svc.accounts.username_taken(body.username):
        raise ApiError(409, "username_taken", f"The username {body.username!r} is taken.")
    created = await svc.accounts.create_user(body.username, body.password, is_admin=body.is_admin)
    return Me(id=created.id, username=created.username, is_admin=created.is_admin)
