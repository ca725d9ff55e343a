"""What the automation triggers at the edge share (routes/fire.py, routes/webhooks.py):
the bounded body, the flood window, and starting a run with its errors. For
`POST /api/automations/{id}/fire` (DESIGN.md §9): the HTTP trigger. It signs in with
the automation's own token (`Authorization: Bearer bat_…`), not a user's: the token can
do this one thing. The JSON body (an object, at most MAX_BODY bytes) is the payload the
prompt's `{{field.path}}` placeholders read.

A flood is bounded twice: every call, good token or not, counts against a sliding window
per automation and per client address (the login throttle, reused), and at most
`MAX_QUEUED` triggers wait behind a run going (burrow/automations/runner.py)."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any

from fastapi import Request
from pydantic import BaseModel

from burrow.api.checks import checked_repo
from burrow.api.errors import ApiError
from burrow.api.schemas import RepoIn
from burrow.api.throttle import LoginThrottle
from burrow.automations.runner import AutomationRunner, QueueFull, Skipped
from burrow.automations.runner import Fired as FiredRun
from burrow.runs.conversations.service import SettingRefused
from burrow.services import Services
from burrow.store.automations import Automation

MAX_BODY = 64 * 1024  # bytes of payload: an issue or a CI event, not a file
FIRES_PER_MINUTE = 30  # per automation, from one client address
FIRES_PER_CLIENT = 120  # per client address, all automations together


class Fired(BaseModel):
    conversation_id: str
    run_id: str | None
    """null: queued behind the automation's run going; it starts when that one ends."""


DELIVERIES_PER_MINUTE = 120  # GitHub webhook deliveries per client address (GitHub's)


def webhook_throttle(request: Request) -> LoginThrottle:
    state = request.app.state
    if not hasattr(state, "webhook_throttle"):
        per_minute = DELIVERIES_PER_MINUTE
        state.webhook_throttle = LoginThrottle(per_minute, per_minute, window=60.0)
    found: LoginThrottle = state.webhook_throttle
    return found


def fire_throttle(request: Request) -> LoginThrottle:
    state = request.app.state
    if not hasattr(state, "fire_throttle"):
        state.fire_throttle = LoginThrottle(FIRES_PER_MINUTE, FIRES_PER_CLIENT, window=60.0)
    found: LoginThrottle = state.fire_throttle
    return found


async def raw_body(request: Request, limit: int) -> bytes:
    """The request's body, read up to `limit` bytes (413 past it, counted as it streams)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    chunks, seen = [], 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def payload_of(request: Request, limit: int = MAX_BODY) -> Any:
    """The request's JSON body read up to `limit` bytes (413 past it); empty: {}."""
    raw = await raw_body(request, limit)
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, "invalid_json", f"The body is not valid JSON: {exc}"[:300]) from exc


def too_large(limit: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"The payload is larger than {limit} bytes.")


async def start(svc: Services, automation: Automation, payload: Any) -> Fired:
    """Start or queue its run, or answer why not (409 skipped, 429 queue full)."""
    runner = svc.automations
    assert isinstance(runner, AutomationRunner)
    repo = None
    if automation.repo is not None:
        repo = await checked_repo(svc, automation.owner_id, None, RepoIn(**automation.repo))
    return await _answered(runner.fire(automation, payload, repo))


async def follow(svc: Services, automation: Automation, cid: str, message: str) -> Fired:
    """A follow-up run in `cid` (the pull-request loop), or why not, as `start`."""
    runner = svc.automations
    assert isinstance(runner, AutomationRunner)
    return await _answered(runner.follow_up(automation, cid, message))


async def _answered(firing: Awaitable[FiredRun]) -> Fired:
    try:
        fired = await firing
    except Skipped as exc:
        raise ApiError(
            409, "skipped", "Its previous run still goes and it skips triggers meanwhile."
        ) from exc
    except QueueFull as exc:
        raise ApiError(
            429,
            "queue_full",
            "Too many triggers wait for its previous run: try again later.",
            {"Retry-After": "30"},
        ) from exc
    except SettingRefused as exc:  # its model or environment went away since it was saved
        raise ApiError(409, exc.code, str(exc)) from exc
    return Fired(conversation_id=fired.conversation_id, run_id=fired.run_id)
