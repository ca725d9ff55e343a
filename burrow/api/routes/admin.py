"""`GET /api/admin/usage`: the admin's view across every account — tokens and cost per
account from the database, and since the server started, runs by status and where their
time went (model, tools, the rest) from the metrics."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from burrow.api.deps import ServicesDep, UserDep
from burrow.api.errors import ApiError
from burrow.store.usage import usage_by_account

router = APIRouter(prefix="/api/admin", tags=["admin"])


class AccountUsageOut(BaseModel):
    user_id: str
    username: str
    conversations: int
    prompt_tokens: int
    completion_tokens: int
    cost: float


class ServerTotals(BaseModel):
    runs: dict[str, int]  # by status, since the server started
    run_seconds: float
    model_seconds: float
    tool_seconds: float


class AdminUsage(BaseModel):
    accounts: list[AccountUsageOut]
    since_start: ServerTotals


@router.get("/usage")
async def usage(user: UserDep, svc: ServicesDep) -> AdminUsage:
    if not user.is_admin:
        raise ApiError(403, "forbidden", "Only an administrator can see everyone's usage.")
    totals = svc.telemetry.metrics.totals()
    runs = {k.removeprefix("runs_"): int(v) for k, v in totals.items() if k.startswith("runs_")}
    return AdminUsage(
        accounts=[AccountUsageOut(**vars(a)) for a in await usage_by_account(svc.db)],
        since_start=ServerTotals(
            runs=runs,
            run_seconds=round(totals.get("run_seconds", 0.0), 3),
            model_seconds=round(totals.get("model_seconds", 0.0), 3),
            tool_seconds=round(totals.get("tool_seconds", 0.0), 3),
        ),
    )
