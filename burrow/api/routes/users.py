"""Accounts, created by an administrator."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from burrow.api.deps import ServicesDep, UserDep
from burrow.api.errors import ApiError
from burrow.api.schemas import Me

router = APIRouter(prefix="/api/users", tags=["users"])


class NewUser(BaseModel):
    username: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.@-]+$")
    password: str = Field(min_length=8, max_length=1000)
    is_admin: bool = False


@router.post("", status_code=201)
async def create_user(body: NewUser, user: UserDep, svc: ServicesDep) -> Me:
    if not user.is_admin:
        raise ApiError(403, "forbidden", "Only an administrator can create accounts.")
    if await svc.accounts.username_taken(body.username):
        raise ApiError(409, "username_taken", f"The username {body.username!r} is taken.")
    created = await svc.accounts.create_user(body.username, body.password, is_admin=body.is_admin)
    return Me(id=created.id, username=created.username, is_admin=created.is_admin)
