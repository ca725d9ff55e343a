"""The caller's secrets: set, list by name, delete. A value goes in and never comes out."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, Field

from burrow.api.deps import ServicesDep, UserDep
from burrow.api.errors import ApiError, not_found
from burrow.runs.conversations.service import MAX_NAME, MAX_VALUE, SecretRefused

router = APIRouter(prefix="/api/secrets", tags=["secrets"])

SecretPath = Annotated[str, Path(max_length=MAX_NAME + 1)]


class SecretIn(BaseModel):
    value: str = Field(max_length=MAX_VALUE, description="Kept encrypted; never returned.")


class SecretOut(BaseModel):
    name: str
    updated_at: datetime


@router.get("")
async def list_secrets(svc: ServicesDep, user: UserDep) -> list[SecretOut]:
    """Names only, never values."""
    return [
        SecretOut(name=s.name, updated_at=s.updated_at) for s in await svc.secrets.names(user.id)
    ]


@router.put("/{name}")
async def put_secret(
    name: SecretPath, body: SecretIn, svc: ServicesDep, user: UserDep
) -> SecretOut:
    """Create or replace; conversations that chose it get the new value at their next command."""
    try:
        stored = await svc.secrets.put(user.id, name, body.value)
    except SecretRefused as exc:
        raise ApiError(400, "invalid_secret", str(exc)) from exc
    return SecretOut(name=stored.name, updated_at=stored.updated_at)


@router.delete("/{name}", status_code=204)
async def delete_secret(name: SecretPath, svc: ServicesDep, user: UserDep) -> Response:
    """Also unselects it in every conversation of the caller."""
    if not await svc.secrets.delete(user.id, name):
        raise not_found(f"Secret {name}")
    return Response(status_code=204)
