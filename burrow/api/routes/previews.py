"""The conversation's previews: what runs, and fresh signed links for the owner (a link
opens its preview once)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Request
from fastapi.responses import RedirectResponse
from pydantic import BaseModel

from burrow.api.deps import ConversationDep, Credential, CredentialDep, ServicesDep, UserDep
from burrow.preview.links import PreviewLinks
from burrow.runs.journal.events import EventType
from burrow.sandbox.backend import SandboxError
from burrow.services import Services
from burrow.store.accounts import token_digest
from burrow.tools.preview import port_accepts, read_services

router = APIRouter(prefix="/api/conversations", tags=["previews"])


PreviewStatus = Literal["running", "stopped", "hibernated"]
Port = Annotated[int, Path(ge=1, le=65535)]


class PreviewOut(BaseModel):
    port: int
    url: str
    """Opens the preview for the caller: carries a signed token valid for a short while
    and for one use, exchanged for a cookie on that preview's own origin."""
    status: PreviewStatus
    """`hibernated`: the sandbox sleeps; opening the URL wakes it and the service."""
    command: str


def preview_links(request: Request, svc: Services) -> PreviewLinks:
    links: PreviewLinks | None = getattr(request.app.state, "preview_links", None)
    if links is None:
        links = request.app.state.preview_links = PreviewLinks.from_settings(svc.settings)
    return links


def sign_in(credential: Credential | None) -> str:
    """What a preview grant is bound to: the digest of the caller's session or API token
    (present: the route's user came from it), so logging out closes the preview too."""
    assert credential is not None
    return token_digest(credential.token)


@router.get("/{cid}/previews")
async def list_previews(
    request: Request,
    conversation: ConversationDep,
    svc: ServicesDep,
    user: UserDep,
    credential: CredentialDep,
) -> list[PreviewOut]:
    links = preview_links(request, svc)
    session = sign_in(credential)
    cid = conversation.id
    sandbox = svc.conversations.workspace.running(cid)
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
        for event in await svc.conversations.events(cid):
            if event.type == EventType.PREVIEW_OPENED:
                found[int(event.data["port"])] = ("hibernated", "")
    return [
        PreviewOut(
            port=port,
            url=links.signed_url(user.id, cid, port, session),
            status=status,
            command=command,
        )
        for port, (status, command) in sorted(found.items())
    ]


@router.get("/{cid}/previews/{port}/open", response_class=RedirectResponse, status_code=303)
async def open_preview(
    request: Request,
    conversation: ConversationDep,
    svc: ServicesDep,
    user: UserDep,
    credential: CredentialDep,
    port: Port,
) -> RedirectResponse:
    """Redirects to the preview through a freshly signed link: for "open in a new tab",
    which cannot reuse the link the iframe has spent (and has no cookie of its own: the
    iframe's is partitioned under the app's site)."""
    links = preview_links(request, svc)
    url = links.signed_url(user.id, conversation.id, port, sign_in(credential))
    return RedirectResponse(
        url, 303, headers={"cache-control": "no-store", "referrer-policy": "no-referrer"}
    )
