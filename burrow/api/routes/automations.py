"""Automations (DESIGN.md §9): each user's own. Another user's automation is as good as
absent (404), to read, change, delete or list its runs. Firing one is in `fire.py`."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Path, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from burrow.api.automation_schemas import (
    AutomationBudget,
    AutomationCreated,
    AutomationIn,
    AutomationOut,
    AutomationPatch,
    AutomationRunOut,
    GithubTrigger,
    PullRequestRef,
)
from burrow.api.checks import checked_model, checked_repo, secret_value
from burrow.api.deps import ServicesDep, UserDep
from burrow.api.errors import ApiError, not_found
from burrow.automations import cron
from burrow.services import Services
from burrow.store.automations import Automation, AutomationStore

router = APIRouter(prefix="/api/automations", tags=["automations"])

MAX_AUTOMATIONS = 100  # per user
AutomationId = Path(max_length=40, pattern=r"^a_[0-9a-f]{16}$")


def store(svc: Services) -> AutomationStore:
    return AutomationStore(svc.db)


def server_timezone() -> str:
    return datetime.now().astimezone().tzname() or "UTC"


def next_fire_at(triggers: list[dict[str, Any]], after: datetime | None = None) -> datetime | None:
    now = after or datetime.now().astimezone()
    ticks = [cron.parse(t["schedule"]).next_after(now) for t in triggers if "schedule" in t]
    found = [t for t in ticks if t is not None]
    return min(found) if found else None


async def view(svc: Services, a: Automation) -> dict[str, Any]:
    assert a.created_at is not None and a.updated_at is not None
    return {
        "id": a.id,
        "name": a.name,
        "prompt": a.prompt,
        "repo": a.repo,
        "environment": a.environment,
        "model": a.model,
        "approval_mode": a.approval_mode,
        "budget": AutomationBudget.model_validate(a.budget),
        "result": a.result,
        "attempts": a.attempts,
        "triggers": a.triggers,
        "concurrency": a.concurrency,
        "pull_request": a.pull_request,
        "timezone": server_timezone(),
        "next_fire_at": next_fire_at(a.triggers),
        "runs": await store(svc).runs_of(a.id),
        "created_at": a.created_at,
        "updated_at": a.updated_at,
    }


def checked(svc: Services, owner_id: str, body: AutomationIn, aid: str = "") -> Automation:
    """What a request asks for, as stored, or a 422 for what the server cannot use."""
    if body.environment is not None and svc.environments.get(body.environment) is None:
        raise ApiError(
            422,
            "environment_not_found",
            f"There is no environment {body.environment!r}: GET /api/environments lists them.",
        )
    if body.repo is None and body.result != "none":
        raise ApiError(422, "repo_required", f"result {body.result!r} needs a repo to push to.")
    token = (body.pull_request.secret if body.pull_request else None) or (
        body.repo.secret if body.repo else None
    )
    if body.result == "pull_request" and token is None:
        raise ApiError(
            422,
            "github_token_required",
            "result 'pull_request' needs a GitHub token: name its secret as "
            "pull_request.secret (or repo.secret).",
        )
    return Automation(
        id=aid,
        owner_id=owner_id,
        name=body.name,
        prompt=body.prompt,
        approval_mode=body.approval_mode,
        budget=body.budget.model_dump(),
        result=body.result,
        triggers=[t.model_dump(exclude_none=True) for t in body.triggers],
        repo=body.repo.model_dump(exclude_none=True) if body.repo else None,
        environment=body.environment,
        model=checked_model(svc, body.model) if body.model is not None else None,
        attempts=body.attempts,
        concurrency=body.concurrency,
        pull_request=body.pull_request.model_dump(exclude_none=True) if body.pull_request else None,
    )


async def check_secrets(svc: Services, owner_id: str, body: AutomationIn) -> None:
    """Each secret it names is one of the owner's (400 secret_not_found otherwise)."""
    names = [body.pull_request.secret if body.pull_request else None]
    names += [t.github.webhook_secret for t in body.triggers if isinstance(t, GithubTrigger)]
    for name in names:
        await secret_value(svc, owner_id, name)


async def owned(svc: Services, user_id: str, aid: str) -> Automation:
    found = await store(svc).get(user_id, aid)
    if found is None:
        raise not_found(f"Automation {aid}")
    return found


@router.get("")
async def list_automations(svc: ServicesDep, user: UserDep) -> list[AutomationOut]:
    return [
        AutomationOut.model_validate(await view(svc, a)) for a in await store(svc).of_owner(user.id)
    ]


@router.post("", status_code=201)
async def create_automation(
    body: AutomationIn, svc: ServicesDep, user: UserDep
) -> AutomationCreated:
    wanted = checked(svc, user.id, body)
    if body.repo is not None:  # its URL, ref and secret (the caller's own) as a clone's
        await checked_repo(svc, user.id, None, body.repo)
    await check_secrets(svc, user.id, body)
    if await store(svc).count(user.id) >= MAX_AUTOMATIONS:
        raise ApiError(
            400, "too_many_automations", f"At most {MAX_AUTOMATIONS} automations: delete one."
        )
    created, token = await store(svc).create(wanted)
    return AutomationCreated.model_validate({**await view(svc, created), "token": token})


@router.get("/{aid}")
async def get_automation(svc: ServicesDep, user: UserDep, aid: str = AutomationId) -> AutomationOut:
    return AutomationOut.model_validate(await view(svc, await owned(svc, user.id, aid)))


@router.patch("/{aid}")
async def update_automation(
    body: AutomationPatch, svc: ServicesDep, user: UserDep, aid: str = AutomationId
) -> AutomationOut:
    current = await owned(svc, user.id, aid)
    merged = {
        "name": current.name,
        "prompt": current.prompt,
        "repo": current.repo,
        "environment": current.environment,
        "model": current.model,
        "approval_mode": current.approval_mode,
        "budget": current.budget,
        "result": current.result,
        "attempts": current.attempts,
        "triggers": current.triggers,
        "concurrency": current.concurrency,
        "pull_request": current.pull_request,
        **body.model_dump(exclude_unset=True, mode="json"),
    }
    try:
        whole = AutomationIn.model_validate(merged)
    except ValidationError as exc:  # e.g. `result: push` on one without a repo
        raise RequestValidationError(exc.errors()) from None
    wanted = replace(checked(svc, user.id, whole, aid), created_at=current.created_at)
    if whole.repo is not None:
        await checked_repo(svc, user.id, None, whole.repo)
    await check_secrets(svc, user.id, whole)
    updated = await store(svc).update(wanted)
    if updated is None:
        raise not_found(f"Automation {aid}")
    return AutomationOut.model_validate(await view(svc, updated))


@router.get("/{aid}/runs")
async def automation_runs(
    svc: ServicesDep, user: UserDep, aid: str = AutomationId
) -> list[AutomationRunOut]:
    """Its conversations, newest first, each with what became of its result."""
    await owned(svc, user.id, aid)
    found = []
    for run in await store(svc).results_of(aid):
        conversation = await svc.conversations.get(run.conversation_id, user.id)
        if conversation is None:
            continue
        pull = None
        if run.pull_number is not None:
            pull = PullRequestRef(number=run.pull_number, url=run.pull_url)
        found.append(
            AutomationRunOut(
                conversation_id=run.conversation_id,
                title=conversation.title,
                status=conversation.status,
                created_at=conversation.created_at,
                result=run.result_status,  # type: ignore[arg-type]
                detail=run.result_detail,
                branch=run.branch,
                commit=run.commit,
                pull_request=pull,
            )
        )
    return found


@router.delete("/{aid}", status_code=204)
async def delete_automation(svc: ServicesDep, user: UserDep, aid: str = AutomationId) -> Response:
    """The conversations it started stay, still marked with its id."""
    if not await store(svc).delete(user.id, aid):
        raise not_found(f"Automation {aid}")
    return Response(status_code=204)
