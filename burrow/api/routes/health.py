"""Liveness and the caller's identity."""

from __future__ import annotations

from importlib.metadata import version

from fastapi import APIRouter

from burrow.api.deps import ServicesDep, UserDep
from burrow.api.schemas import Health, Me

router = APIRouter(prefix="/api", tags=["health"])


@router.get("/health")
async def health(svc: ServicesDep) -> Health:
    return Health(
        version=version("burrow"),
        sandbox=svc.conversations.workspace.backend.name,
        model=svc.models.config.model if svc.models.view().configured else None,
    )


@router.get("/me")
async def me(user: UserDep) -> Me:
    return Me(id=user.id, username=user.username, is_admin=user.is_admin)
