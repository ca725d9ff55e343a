"""The conversation's sandbox: its status (with why), and a restart when it misbehaves."""

from __future__ import annotations

from fastapi import APIRouter

from burrow.api.deps import ConversationDep, ServicesDep
from burrow.api.schemas import SandboxOut

router = APIRouter(prefix="/api/conversations", tags=["sandbox"])


class SandboxStatusOut(SandboxOut):
    detail: str = ""
    """Why it is in that status: a boot failure's reason, what hibernation kept, ..."""


@router.get("/{cid}/sandbox")
async def sandbox_status(conversation: ConversationDep, svc: ServicesDep) -> SandboxStatusOut:
    pool = svc.runtime.sandboxes
    state = pool.state(conversation.id)
    status, detail = state.status, state.detail
    if status == "none":  # not started by this server process: the journal's last word
        latest = await svc.conversations.get(conversation.id)
        status = latest.sandbox_status if latest else conversation.sandbox_status
    return SandboxStatusOut(
        status=status,
        backend=pool.backend.name,
        detail=detail,
        network=svc.settings.sandbox_network,
    )


@router.post("/{cid}/sandbox/restart", status_code=202)
async def restart_sandbox(conversation: ConversationDep, svc: ServicesDep) -> SandboxStatusOut:
    """Stop every process, boot again on the same files, start recorded services again.
    Also the way out of a failed boot."""
    pool = svc.runtime.sandboxes
    await pool.restart(conversation.id)
    state = pool.state(conversation.id)
    return SandboxStatusOut(
        status=state.status,
        backend=pool.backend.name,
        detail=state.detail,
        network=svc.settings.sandbox_network,
    )
