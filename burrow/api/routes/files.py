"""The workspace, read and written through the sandbox so symlinks resolve as the agent
sees them and a path never leaves the workspace (the same rules as the file tools).

A save from the Files editor is journaled (`file.saved`), so the model is told on its next
turn and the Changes view shows it; it is allowed during a run, like a steering message.
`ETag` / `If-Match` (a hash of the bytes) keep a save from silently overwriting a file that
changed since the editor opened it.
"""

from __future__ import annotations

import hashlib
import posixpath
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from pydantic import BaseModel

from burrow.api.checks import checked
from burrow.api.deps import ConversationDep, ServicesDep
from burrow.api.errors import ApiError
from burrow.api.inert import inert_response
from burrow.api.schemas import FileEntryOut
from burrow.runs.loop.hooks.attachments import BadPath, workspace_path
from burrow.sandbox.backend import ErrorCode, SandboxError

router = APIRouter(prefix="/api/conversations", tags=["files"])

MAX_FILE_BYTES = 20 * 1024 * 1024

PathQuery = Annotated[str, Query(max_length=4096, description="Workspace-relative path")]


# Burrow's own folders in the workspace (DESIGN.md §8): tool output logs, preview services,
# and the checkpoint store.
INTERNAL = frozenset({".burrow/outputs", ".burrow/services", ".burrow/checkpoints"})


def _normal(path: str) -> str:
    return posixpath.normpath(path.lstrip("/")).removeprefix("./")


@router.get("/{cid}/files")
async def list_files(
    conversation: ConversationDep,
    svc: ServicesDep,
    path: PathQuery = ".",
    internal: Annotated[bool, Query(description="Also list Burrow's own .burrow folders")] = False,
) -> list[FileEntryOut]:
    path = checked(path)  # before the sandbox is woken for nothing
    sandbox = await svc.conversations.workspace.sandbox(conversation.id)
    entries = await sandbox.list_dir(path)
    if not internal:
        entries = [e for e in entries if _normal(e.path) not in INTERNAL]
        if any(_normal(e.path) == ".burrow" for e in entries):
            inside = await sandbox.list_dir(".burrow")
            if all(_normal(e.path) in INTERNAL for e in inside):  # nothing of the user's
                entries = [e for e in entries if _normal(e.path) != ".burrow"]
    return [
        FileEntryOut(name=e.name, path=e.path, kind=e.kind, size=e.size, mtime=e.mtime)
        for e in sorted(entries, key=lambda e: (e.kind != "dir", e.name))
    ]


@router.get(
    "/{cid}/files/content",
    responses={200: {"content": {"text/plain": {}, "application/octet-stream": {}}}},
)
async def file_content(
    conversation: ConversationDep, svc: ServicesDep, path: PathQuery
) -> Response:
    """The file's bytes; never rendered by the browser (nosniff, sandboxing CSP)."""
    path = checked(path)
    sandbox = await svc.conversations.workspace.sandbox(conversation.id)
    data = await sandbox.read_file(path, 0, MAX_FILE_BYTES)
    try:
        data.decode("utf-8")
        media_type = "text/plain; charset=utf-8"
    except UnicodeDecodeError:
        media_type = "application/octet-stream"
    response = inert_response(data, media_type, cache_control="no-store")
    response.headers["ETag"] = etag(data)
    return response


def etag(data: bytes) -> str:
    return '"' + hashlib.sha256(data).hexdigest()[:32] + '"'


class SavedFileOut(BaseModel):
    path: str
    size: int
    etag: str


def saveable(path: str) -> str:
    """`path` as a workspace-relative file path the editor may write, or a 400."""
    try:
        rel = workspace_path(checked(path))
    except BadPath as exc:
        raise ApiError(400, "invalid_path", str(exc)) from exc
    if any(rel == i or rel.startswith(i + "/") for i in INTERNAL):
        raise ApiError(400, "invalid_path", f"{rel} is Burrow's own (.burrow internals).")
    return rel


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    too_large = ApiError(
        413,
        "file_too_large",
        f"The editor saves files up to {limit / 2**20:g} MB (BURROW_FILE_SAVE_MAX_MB).",
    )
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large
    return bytes(body)


@router.put(
    "/{cid}/files/content",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        }
    },
)
async def save_file(
    request: Request,
    conversation: ConversationDep,
    svc: ServicesDep,
    path: PathQuery,
    if_match: Annotated[str | None, Header(description="The ETag the editor read")] = None,
) -> SavedFileOut:
    """Create or replace the file with the raw body; journals `file.saved`. With If-Match,
    a file that changed meanwhile is not overwritten (412 file_changed)."""
    rel = saveable(path)
    data = await _body(request, int(svc.settings.file_save_max_mb * 2**20))
    sandbox = await svc.conversations.workspace.sandbox(conversation.id)
    if if_match is not None and if_match != "*":
        try:
            current = etag(await sandbox.read_file(rel, 0, MAX_FILE_BYTES))
        except SandboxError as exc:
            if exc.code != ErrorCode.NOT_FOUND:
                raise
            current = None
        if current != if_match:
            raise ApiError(
                412,
                "file_changed",
                f"{rel} changed since it was opened"
                + (" (it was deleted)" if current is None else "")
                + ": reload it, or save again without If-Match to overwrite.",
            )
    await svc.conversations.save_file(conversation.id, rel, data)
    return SavedFileOut(path=rel, size=len(data), etag=etag(data))
