"""The conversation's sandbox: its status, and a restart when it misbehaves."""

from __future__ import annotations

from fastapi import APIRouter

from burrow.api.deps import ConversationDep, ServicesDep
from burrow.api.schemas import SandboxOut

router = APIRouter(prefix="/api/conversations", tags=["sandbox"])


@router.get("/{cid}/sandbox")
async def sandbox_status(conversation: ConversationDep, svc: ServicesDep) -> SandboxOut:
    latest = await svc.conversations.get(conversation.id)
    status = latest.sandbox_status if latest else conversation.sandbox_status
    return SandboxOut(status=status, backend=svc.runtime.sandboxes.backend.name)


@router.post("/{cid}/sandbox/restart", status_code=202)
async def restart_sandbox(conversation: ConversationDep, svc: ServicesDep) -> SandboxOut:
    await svc.runtime.sandboxes.restart(conversation.id)
    return SandboxOut(status="ready", backend=svc.runtime.sandboxes.backend.name)
