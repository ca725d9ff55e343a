"""Workspace checkpoints: list, diff, restore, and revert one file
(runs/workspace/checkpoints.py)."""

from __future__ import annotations

import posixpath
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from burrow.api.checks import checked
from burrow.api.deps import ConversationDep, ServicesDep
from burrow.api.errors import ApiError, not_found
from burrow.runs.conversations.service import RunActive
from burrow.runs.workspace.checkpoints import (
    EXCLUDED,
    Checkpoint,
    CheckpointNotFound,
    PathNotInCheckpoint,
)

router = APIRouter(prefix="/api/conversations", tags=["checkpoints"])

IdQuery = Annotated[str | None, Query(max_length=64)]


class CheckpointOut(BaseModel):
    id: str
    run_id: str | None  # null: taken by a restore or a revert, as their undo
    created_at: str
    # Bytes of workspace content this checkpoint added to the store (what it alone holds,
    # roughly); null for one taken before sizes were recorded.
    size: int | None


class FileChangeOut(BaseModel):
    path: str
    status: Literal["added", "modified", "deleted"]
    additions: int
    deletions: int
    binary: bool
    patch: str


class DiffOut(BaseModel):
    files: list[FileChangeOut]
    skipped: list[str]  # files too large to checkpoint (BURROW_CHECKPOINT_MAX_FILE_MB)
    truncated: bool  # a patch was cut, or the whole diff passed its bound


class RestoredOut(BaseModel):
    checkpoint_id: str
    undo_checkpoint_id: str  # restoring this one undoes the restore


class RevertBody(BaseModel):
    path: str = Field(min_length=1, max_length=4096)
    checkpoint_id: str = Field(min_length=1, max_length=64)


class RevertedOut(BaseModel):
    path: str
    checkpoint_id: str
    status: Literal["restored", "deleted"]  # deleted: the checkpoint did not have it
    undo_checkpoint_id: str


def _out(checkpoint: Checkpoint) -> CheckpointOut:
    return CheckpointOut(
        id=checkpoint.id,
        run_id=checkpoint.run_id,
        created_at=checkpoint.created_at,
        size=checkpoint.size,
    )


def _missing(exc: CheckpointNotFound) -> ApiError:
    return ApiError(404, "checkpoint_not_found", str(exc))


def _busy(what: str) -> ApiError:
    return ApiError(
        409,
        "run_active",
        f"A run is changing this workspace: {what} after it ends, or stop it first.",
    )


@router.get("/{cid}/checkpoints")
async def list_checkpoints(conversation: ConversationDep, svc: ServicesDep) -> list[CheckpointOut]:
    """Oldest first; each run starts with one."""
    return [_out(c) for c in await svc.conversations.workspace.checkpoints(conversation.id)]


@router.get(
    "/{cid}/diff",
    response_model=DiffOut,
    responses={200: {"content": {"text/x-diff": {}}}},
)
async def diff(
    conversation: ConversationDep,
    svc: ServicesDep,
    start: Annotated[IdQuery, Query(alias="from")] = None,
    to: IdQuery = None,
    format: Annotated[Literal["json", "patch"], Query()] = "json",
) -> DiffOut | Response:
    """From a checkpoint (default: the first) to another (default: the workspace now)."""
    workspace = svc.conversations.workspace
    try:
        if format == "patch":
            text = await workspace.patch(conversation.id, start, to)
            return Response(
                text,
                media_type="text/x-diff; charset=utf-8",
                headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"},
            )
        found = await workspace.diff(conversation.id, start, to)
    except CheckpointNotFound as exc:
        raise _missing(exc) from exc
    return DiffOut(
        files=[
            FileChangeOut(
                path=f.path,
                status=f.status,  # type: ignore[arg-type]  # the closed set of _STATUS
                additions=f.additions,
                deletions=f.deletions,
                binary=f.binary,
                patch=f.patch,
            )
            for f in found.files
        ],
        skipped=found.skipped,
        truncated=found.truncated,
    )


@router.post("/{cid}/checkpoints/{checkpoint_id}/restore")
async def restore(
    conversation: ConversationDep, svc: ServicesDep, checkpoint_id: str
) -> RestoredOut:
    """The workspace as it was at the checkpoint; the state before is checkpointed first."""
    try:
        undo = await svc.conversations.restore(conversation.id, checkpoint_id)
    except RunActive as exc:
        raise _busy("restore") from exc
    except CheckpointNotFound as exc:
        raise _missing(exc) from exc
    return RestoredOut(checkpoint_id=checkpoint_id, undo_checkpoint_id=undo.id)


@router.post("/{cid}/files/revert")
async def revert(conversation: ConversationDep, svc: ServicesDep, body: RevertBody) -> RevertedOut:
    """One path as it was at the checkpoint (deleted if it did not exist then); the state
    before is checkpointed first."""
    path = posixpath.normpath(checked(body.path).lstrip("/")).removeprefix("./")
    sandbox = await svc.conversations.workspace.sandbox(conversation.id)
    workspace = sandbox.workspace.strip("/") + "/"
    path = path.removeprefix(workspace)
    if path in (".", "") or path == ".." or path.startswith("../"):
        raise ApiError(400, "invalid_path", "Name a file or folder inside the workspace.")
    if any(path == e or path.startswith(e + "/") for e in EXCLUDED) or ".git" in path.split("/"):
        raise ApiError(
            400, "invalid_path", f"{path} is not checkpointed (Burrow's own or a .git folder)."
        )
    try:
        status, undo = await svc.conversations.revert(conversation.id, path, body.checkpoint_id)
    except RunActive as exc:
        raise _busy("revert") from exc
    except CheckpointNotFound as exc:
        raise _missing(exc) from exc
    except PathNotInCheckpoint as exc:
        raise not_found(f"{path} (in the checkpoint and in the workspace)") from exc
    return RevertedOut(
        path=path,
        checkpoint_id=body.checkpoint_id,
        status=status,  # type: ignore[arg-type]  # the script prints one of the two
        undo_checkpoint_id=undo.id,
    )
