"""The MCP servers of mcp.json as the caller's conversations found them; administrators
may also read and replace the file (sandbox and HTTP servers; host servers only on disk)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from burrow.api.deps import ServicesDep, UserDep
from burrow.api.errors import ApiError
from burrow.store.records import User
from burrow.tools.mcp import servers

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
    # A server's descriptions and errors are its own text: it may hold a secret it was given.
    mask = await svc.secrets.owner_mask(user.id)
    return [
        McpServerOut(
            name=state.name,
            transport=state.transport,
            status=state.status,
            tools=[McpToolOut.model_validate(mask.data(tool)) for tool in state.tools],
            error=mask.text(state.error) if state.error else state.error,
        )
        for state in svc.mcp.status(user.id, names)
    ]


class McpConfigDocument(BaseModel):
    mcpServers: dict[str, dict[str, Any]] = Field(  # the file's own key
        max_length=100,
        description='mcp.json: {"mcpServers": {name: {command, args, env} | {url, headers}}}',
    )


def _admin_only(user: User) -> None:
    if not user.is_admin:
        raise ApiError(403, "forbidden", "Only an administrator can read or change mcp.json.")


@router.get("/config")
async def read_config(svc: ServicesDep, user: UserDep) -> McpConfigDocument:
    """mcp.json as it is (administrators only: it may hold literal headers)."""
    _admin_only(user)
    document = servers.read_document(svc.settings.data_dir)
    entries = document.get("mcpServers")
    return McpConfigDocument(mcpServers=entries if isinstance(entries, dict) else {})


@router.put("/config")
async def replace_config(
    body: McpConfigDocument, svc: ServicesDep, user: UserDep
) -> list[McpServerOut]:
    """Replace mcp.json; conversations use it from their next run."""
    _admin_only(user)
    try:
        servers.replace_document(svc.settings.data_dir, body.model_dump())
    except servers.ConfigError as exc:
        raise ApiError(400, "invalid_mcp_config", str(exc)) from exc
    return await list_servers(svc, user)
