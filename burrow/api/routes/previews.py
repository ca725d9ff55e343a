"""The conversation's previews: what runs, and a fresh signed link for the owner's iframe."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel

from burrow.api.deps import ConversationDep, ServicesDep, UserDep
from burrow.preview.links import PreviewLinks
from burrow.runs.events import EventType
from burrow.sandbox.backend import SandboxError
from burrow.services import Services
from burrow.tools.preview import port_accepts, read_services

router = APIRouter(prefix="/api/conversations", tags=["previews"])


PreviewStatus = Literal["running", "stopped", "hibernated"]


class PreviewOut(BaseModel):
    port: int
    url: str
    """Opens the preview for the caller: carries a signed token valid for a short while,
    exchanged for a cookie on that preview's own origin on first load."""
    status: PreviewStatus
    """`hibernated`: the sandbox sleeps; opening the URL wakes it and the service."""
    command: str


def preview_links(request: Request, svc: Services) -> PreviewLinks:
    links: PreviewLinks | None = getattr(request.app.state, "preview_links", None)
    if links is None:
        links = request.app.state.preview_links = PreviewLinks.from_settings(svc.settings)
    return links


@router.get("/{cid}/previews")
async def list_previews(
    request: Request, conversation: ConversationDep, svc: ServicesDep, user: UserDep
) -> list[PreviewOut]:
    links = preview_links(request, svc)
    cid = conversation.id
    sandbox = svc.runtime.sandboxes.running(cid)
    found: dict[int, tuple[PreviewStatus, str]] = {}  # port -> (status, command)
    if sandbox is not None:
        for record in await read_services(sandbox):
            try:
                running = await port_accepts(sandbox, record.port)
            except SandboxError:
                running = False
            found[record.port] = ("running" if running else "stopped", record.command)
    else:
        # Not woken just to be listed: the journal knows which previews were opened.
        for event in await svc.journal.read(cid):
            if event.type == EventType.PREVIEW_OPENED:
                found[int(event.data["port"])] = ("hibernated", "")
    return [
        PreviewOut(
            port=port,
            url=links.signed_url(user.id, cid, port),
            status=status,
            command=command,
        )
        for port, (status, command) in sorted(found.items())
    ]
