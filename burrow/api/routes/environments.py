"""Environments (DESIGN §9): named systems a conversation's sandbox starts from.

Administrators define, change and delete them; every user reads them and may choose one
for a new conversation (`POST /api/conversations {environment}`). A definition saved is
built in the background (runs/workspace/environments.py); `GET` shows the build's
`status` and the tail of its output, `POST …/cancel` stops a build that runs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Response
from pydantic import BaseModel

from burrow.api.deps import ServicesDep, UserDep
from burrow.api.errors import ApiError, not_found
from burrow.runs.workspace.environments import (
    EnvironmentInvalid,
    Environments,
    EnvironmentSpec,
    parse_spec,
)
from burrow.services import Services
from burrow.store.records import User

router = APIRouter(prefix="/api/environments", tags=["environments"])

EnvironmentName = Annotated[str, Path(max_length=32)]


class EnvironmentOut(BaseModel):
    name: str
    base: str
    packages: list[str]
    setup: str
    env: dict[str, str]
    status: Literal["building", "ready", "failed", "cancelled"]
    detail: str
    """Why it is in that status: how long its build took, or its exit and output's tail."""
    log_tail: str
    """The end of its build's output (16 KiB at most)."""

    @classmethod
    def of(cls, environments: Environments, spec: EnvironmentSpec) -> EnvironmentOut:
        build = environments.build_of(spec.name)
        return cls(
            **spec.view(),
            status=build.status if build else "building",
            detail=build.detail if build else "",
            log_tail=build.tail() if build else "",
        )


def _admin(user: User, doing: str) -> None:
    if not user.is_admin:
        raise ApiError(403, "forbidden", f"Only an administrator can {doing} an environment.")


def _spec(name: str, body: dict[str, Any]) -> EnvironmentSpec:
    try:
        return parse_spec(name, body)
    except EnvironmentInvalid as exc:
        raise ApiError(422, exc.code, exc.message) from None


@router.get("")
async def list_environments(svc: ServicesDep, user: UserDep) -> list[EnvironmentOut]:
    environments = svc.environments
    return [EnvironmentOut.of(environments, spec) for spec in environments.specs()]


@router.post("", status_code=201)
async def create_environment(
    svc: ServicesDep, user: UserDep, body: Annotated[dict[str, Any], Body()]
) -> EnvironmentOut:
    """`{name, base: "host"|"debian:<suite>", packages: [..], setup: "<script>", env:
    {..}}`; its build starts at once (on a Debian base, after mmdebstrap has built the
    base, unless an environment on the same suite and packages already did)."""
    _admin(user, "define")
    name = body.get("name")
    if not isinstance(name, str):
        raise ApiError(422, "invalid_environment_name", "name is required (a string).")
    if svc.environments.get(name) is not None:
        raise ApiError(409, "environment_exists", f"An environment {name} exists: PATCH it.")
    return await _save(svc, _spec(name, body))


@router.get("/{name}")
async def get_environment(name: EnvironmentName, svc: ServicesDep, user: UserDep) -> EnvironmentOut:
    spec = svc.environments.get(name)
    if spec is None:
        raise not_found(f"Environment {name}")
    return EnvironmentOut.of(svc.environments, spec)


@router.patch("/{name}")
async def update_environment(
    name: EnvironmentName,
    svc: ServicesDep,
    user: UserDep,
    body: Annotated[dict[str, Any], Body()],
) -> EnvironmentOut:
    """Fields given replace the saved ones; a changed definition is built again (the
    conversations already on the old build keep it)."""
    _admin(user, "change")
    spec = svc.environments.get(name)
    if spec is None:
        raise not_found(f"Environment {name}")
    if body.get("name", name) != name:
        raise ApiError(422, "invalid_environment", "An environment's name cannot change.")
    return await _save(svc, _spec(name, {**spec.view(), **body}))


@router.delete("/{name}", status_code=204)
async def delete_environment(name: EnvironmentName, svc: ServicesDep, user: UserDep) -> Response:
    _admin(user, "delete")
    if not await svc.environments.delete(name):
        raise not_found(f"Environment {name}")
    return Response(status_code=204)


@router.post("/{name}/cancel")
async def cancel_build(name: EnvironmentName, svc: ServicesDep, user: UserDep) -> EnvironmentOut:
    _admin(user, "cancel the build of")
    spec = svc.environments.get(name)
    if spec is None:
        raise not_found(f"Environment {name}")
    if not await svc.environments.cancel(name):
        raise ApiError(409, "not_building", f"The environment {name} is not being built.")
    return EnvironmentOut.of(svc.environments, spec)


async def _save(svc: Services, spec: EnvironmentSpec) -> EnvironmentOut:
    try:
        await svc.environments.put(spec)
    except EnvironmentInvalid as exc:
        raise ApiError(422, exc.code, exc.message) from None
    return EnvironmentOut.of(svc.environments, spec)
