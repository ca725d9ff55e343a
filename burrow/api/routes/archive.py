"""The workspace as a download: a zip or tar.gz streamed from the sandbox
(runs/workspace/archives.py).

Streamed as the sandbox writes it, so neither memory nor a temporary file grows with the
workspace. Burrow's internals are left out; `.burrow/attachments` and `.burrow/skills` are
the user's and come along. A hibernated sandbox is woken, as for Files.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from burrow.api.deps import ConversationDep, ServicesDep
from burrow.runs.workspace.archives import pack

router = APIRouter(prefix="/api/conversations", tags=["files"])

MEDIA_TYPES = {"zip": "application/zip", "tar.gz": "application/gzip"}


def download_name(title: str, fmt: str) -> str:
    """A file name anyone's file system takes: the title's letters, digits and . _ -."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", title).strip(".-_")[:60].rstrip(".-_")
    return f"{stem or 'workspace'}.{fmt}"


def content_disposition(title: str, fmt: str) -> str:
    ascii_name = download_name(title, fmt)
    # The title as it is (UTF-8) for browsers that read filename*; slashes and quotes go.
    full = re.sub(r'[\x00-\x1f/\\"]+', "-", title).strip()[:120] or "workspace"
    return (
        f'attachment; filename="{ascii_name}"; '
        f"filename*=UTF-8''{urllib.parse.quote(f'{full}.{fmt}', safe='')}"
    )


@router.get(
    "/{cid}/workspace/archive",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/zip": {}, "application/gzip": {}}}},
)
async def workspace_archive(
    conversation: ConversationDep,
    svc: ServicesDep,
    format: Annotated[Literal["zip", "tar.gz"], Query()] = "zip",
) -> StreamingResponse:
    """The workspace without Burrow's internals, as it is now."""
    sandbox = await svc.conversations.workspace.sandbox(conversation.id)
    stream = await pack(sandbox, format)
    return StreamingResponse(
        stream,
        media_type=MEDIA_TYPES[format],
        headers={
            "Content-Disposition": content_disposition(conversation.title or "", format),
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )
