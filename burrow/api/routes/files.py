"""The workspace, read through the sandbox so symlinks resolve as the agent sees them."""

from __future__ import annotations

import posixpath
from typing import Annotated

from fastapi import APIRouter, Query, Response

from burrow.api.deps import ConversationDep, ServicesDep
from burrow.api.errors import nul_in_path
from burrow.api.inert import inert_response
from burrow.api.schemas import FileEntryOut

router = APIRouter(prefix="/api/conversations", tags=["files"])

MAX_FILE_BYTES = 20 * 1024 * 1024

PathQuery = Annotated[str, Query(max_length=4096, description="Workspace-relative path")]


# Burrow's own folders in the workspace (DESIGN.md §8): tool output logs, preview services,
# and the checkpoint store.
INTERNAL = frozenset({".burrow/outputs", ".burrow/services", ".burrow/checkpoints"})


def _normal(path: str) -> str:
    return posixpath.normpath(path.lstrip("/")).removeprefix("./")


def checked(path: str) -> str:
    """`path`, refused at the edge when no file could ever have that name.

    Passed on, a NUL byte makes the sandbox's agent reject the whole request frame, which
    the caller would see as the sandbox being unavailable (503).
    """
    if "\0" in path:
        raise nul_in_path()
    return path


@router.get("/{cid}/files")
async def list_files(
    conversation: ConversationDep,
    svc: ServicesDep,
    path: PathQuery = ".",
    internal: Annotated[bool, Query(description="Also list Burrow's own .burrow folders")] = False,
) -> list[FileEntryOut]:
    path = checked(path)  # before the sandbox is woken for nothing
    sandbox = await svc.runtime.sandboxes.get(conversation.id)
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
    sandbox = await svc.runtime.sandboxes.get(conversation.id)
    data = await sandbox.read_file(path, 0, MAX_FILE_BYTES)
    try:
        data.decode("utf-8")
        media_type = "text/plain; charset=utf-8"
    except UnicodeDecodeError:
        media_type = "application/octet-stream"
    return inert_response(data, media_type, cache_control="no-store")
