"""The MCP servers of mcp.json as the caller's conversations found them (read-only)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from burrow.api.deps import ServicesDep, UserDep

router = APIRouter(prefix="/api/mcp", tags=["mcp"])


class McpToolKind(BaseModel):
    reads: bool
    writes: bool
    destructive: bool
    network: bool
    shell: bool


class McpToolOut(BaseModel):
    name: str  # as the model sees it: mcp__<server>__<tool>
    description: str
    kind: McpToolKind


class McpServerOut(BaseModel):
    name: str
    transport: str  # "sandbox" (stdio in the conversation's sandbox) | "host" | "http"
    status: str  # "connected" | "failed" | "stopped" | "not_started" | "invalid"
    tools: list[McpToolOut]
    error: str | None = None


@router.get("/servers")
async def list_servers(svc: ServicesDep, user: UserDep) -> list[McpServerOut]:
    """Every configured server; status and tools as the caller's conversations last
    connected them (stdio servers start in a conversation's sandbox, at its next run)."""
    if svc.mcp is None:
        return []
    names = {s.name for s in await svc.secrets.names(user.id)}
    return [
        McpServerOut(
            name=state.name,
            transport=state.transport,
            status=state.status,
            tools=[McpToolOut.model_validate(tool) for tool in state.tools],
            error=state.error,
        )
        for state in svc.mcp.status(user.id, names)
    ]
