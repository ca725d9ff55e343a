"""`POST /api/automations/{id}/fire` (DESIGN.md §9): the HTTP trigger. It signs in with
the automation's own token (`Authorization: Bearer bat_…`), not a user's: the token can
do this one thing. The JSON body is the payload the prompt's placeholders read; the
bounds it shares with the GitHub webhook are in burrow/api/firing.py."""

from __future__ import annotations

from fastapi import APIRouter, Path, Request

from burrow.api.deps import bearer_token
from burrow.api.errors import ApiError
from burrow.api.firing import Fired, fire_throttle, payload_of, start
from burrow.api.throttle import counted
from burrow.automations.runner import AutomationRunner
from burrow.services import Services

router = APIRouter(prefix="/api/automations", tags=["automations"])


@router.post(
    "/{aid}/fire",
    status_code=202,
    openapi_extra={"requestBody": {"content": {"application/json": {"schema": {}}}}},
)
async def fire(
    request: Request, aid: str = Path(max_length=40, pattern=r"^a_[0-9a-f]{16}$")
) -> Fired:
    svc: Services = request.app.state.services
    client = request.client.host if request.client else "unknown"
    with counted(fire_throttle(request), client, aid, "too_many_fires", "calls"):
        token = bearer_token(request)
        runner = svc.automations
        assert isinstance(runner, AutomationRunner)
        automation = await runner.store.by_token(aid, token) if token else None
        if automation is None:
            raise ApiError(
                401,
                "unauthorized",
                "Fire it with its own token: Authorization: Bearer <token from its creation>.",
            )
        payload = await payload_of(request)
        if not isinstance(payload, dict):
            raise ApiError(422, "invalid_payload", "The payload must be a JSON object.")
        return await start(svc, automation, payload)
