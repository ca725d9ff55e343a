"""Profiles (DESIGN.md §8): named agent setups a conversation may choose.

Each user manages their own; an administrator also manages shared ones (`shared: true`,
or `?shared=true` to read or delete one), which every user sees. A user's own profile
shadows a shared one of the same name. Another user's profile is as good as absent: 404.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, Field

from burrow.api.checks import checked_model
from burrow.api.deps import ServicesDep, UserDep
from burrow.api.errors import ApiError, not_found
from burrow.api.schemas import ApprovalMode
from burrow.runs.loop.hooks.profiles import DEFAULT_PROFILE
from burrow.store.profiles import Profile
from burrow.store.records import User

router = APIRouter(prefix="/api/profiles", tags=["profiles"])

MAX_PROFILES = 100  # per user, and shared ones
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
ProfileName = Annotated[str, Path(max_length=100, pattern=NAME_PATTERN)]
ToolName = Annotated[str, Field(min_length=1, max_length=200)]


class ProfileIn(BaseModel):
    """Every field is optional; one left out means Burrow's default (PUT replaces)."""

    system_prompt: str | None = Field(default=None, max_length=32_000)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    tools: list[ToolName] | None = Field(
        default=None, max_length=200, description="The tools offered and allowed; null: all"
    )
    skills: list[ToolName] | None = Field(
        default=None, max_length=200, description="The skills listed; null: all"
    )
    approval_mode: ApprovalMode | None = None
    shared: bool = Field(default=False, description="Administrators: visible to every user")


class ProfileOut(BaseModel):
    name: str
    shared: bool
    system_prompt: str | None
    model: str | None
    tools: list[str] | None
    skills: list[str] | None
    approval_mode: ApprovalMode | None
    updated_at: datetime | None

    @classmethod
    def of(cls, p: Profile) -> ProfileOut:
        return cls(
            name=p.name,
            shared=p.shared,
            system_prompt=p.system_prompt,
            model=p.model,
            tools=None if p.tools is None else list(p.tools),
            skills=None if p.skills is None else list(p.skills),
            approval_mode=p.approval_mode,  # type: ignore[arg-type]
            updated_at=p.updated_at,
        )


def _owner(user: User, shared: bool, doing: str) -> str | None:
    """Whose profile a write touches: the caller's, or (administrators) the shared ones."""
    if not shared:
        return user.id
    if not user.is_admin:
        raise ApiError(403, "forbidden", f"Only an administrator can {doing} a shared profile.")
    return None


@router.get("")
async def list_profiles(svc: ServicesDep, user: UserDep) -> list[ProfileOut]:
    """The caller's own and the shared ones, by name."""
    return [ProfileOut.of(p) for p in await svc.profiles.visible_to(user.id)]


@router.get("/{name}")
async def get_profile(
    name: ProfileName, svc: ServicesDep, user: UserDep, shared: bool = Query(default=False)
) -> ProfileOut:
    """What `name` means to the caller (their own first), or with `shared` the shared one."""
    for found in await svc.profiles.visible_to(user.id):
        if found.name == name and (found.shared or not shared):
            return ProfileOut.of(found)
    raise not_found(f"Profile {name}")


@router.put("/{name}")
async def put_profile(
    name: ProfileName, body: ProfileIn, svc: ServicesDep, user: UserDep
) -> ProfileOut:
    if name == DEFAULT_PROFILE:
        raise ApiError(400, "reserved_name", "'default' means no profile: choose another name.")
    owner = _owner(user, body.shared, "write")
    model = checked_model(svc, body.model) if body.model is not None else None
    exists = await svc.profiles.find(user.id, name)
    mine = exists is not None and exists.shared == body.shared
    if not mine and await svc.profiles.count(owner) >= MAX_PROFILES:
        raise ApiError(400, "too_many_profiles", f"At most {MAX_PROFILES} profiles: delete one.")
    stored = await svc.profiles.put(
        owner,
        Profile(
            name=name,
            shared=body.shared,
            system_prompt=body.system_prompt,
            model=model,
            tools=None if body.tools is None else tuple(dict.fromkeys(body.tools)),
            skills=None if body.skills is None else tuple(dict.fromkeys(body.skills)),
            approval_mode=body.approval_mode,
        ),
    )
    return ProfileOut.of(stored)


@router.delete("/{name}", status_code=204)
async def delete_profile(
    name: ProfileName, svc: ServicesDep, user: UserDep, shared: bool = Query(default=False)
) -> Response:
    """Conversations that chose it fail their next run with a message to choose another."""
    if not await svc.profiles.delete(_owner(user, shared, "delete"), name):
        raise not_found(f"Profile {name}")
    return Response(status_code=204)
