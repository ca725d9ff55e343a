"""Liveness and the caller's identity."""

from __future__ import annotations

import functools
from importlib.metadata import version

from fastapi import APIRouter

from burrow.api.deps import ServicesDep, UserDep
from burrow.api.schemas import Health, Me

router = APIRouter(prefix="/api", tags=["health"])


@functools.cache
def _version() -> str:
    """Burrow's version, read from its metadata once (1-3 ms a read)."""
    return version("burrow")


@router.get("/health")
async def health(svc: ServicesDep) -> Health:
    return Health(
        version=_version(),
        sandbox=svc.conversations.workspace.backend.name,
        model=svc.models.config.model if svc.models.view().configured else None,
    )


@router.get("/me")
async def me(user: UserDep) -> Me:
    return Me(id=user.id, username=user.username, is_admin=user.is_admin)
