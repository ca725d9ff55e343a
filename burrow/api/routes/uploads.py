"""Files the person gives the agent: uploads into the workspace, and image thumbnails.

An upload is counted while it streams in and refused once over BURROW_UPLOAD_MAX_MB, so a
huge body is never buffered; it is written through the sandbox handle, like every other
workspace write. With `extract`, an archive is unpacked inside the sandbox
(runs/workspace/archives.py)
under BURROW_UPLOAD_EXTRACT_MAX_MB / _MAX_FILES, all or nothing. Thumbnails are served only
when the bytes are an image, whatever the name says, and under a sandboxing CSP.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from starlette.datastructures import UploadFile
from starlette.requests import ClientDisconnect
from starlette.types import Message, Receive

from burrow.api.deps import ConversationDep, ServicesDep
from burrow.api.errors import ApiError
from burrow.api.inert import inert_response
from burrow.api.schemas import Uploaded
from burrow.runs.loop.hooks.attachments import (
    ATTACHMENTS_DIR,
    MAX_NAME,
    BadPath,
    image_type,
    upload_name,
    workspace_path,
)
from burrow.runs.workspace.archives import Refused, UnpackLimits, kind_of, unpack

router = APIRouter(prefix="/api/conversations", tags=["uploads"])

FORM_SLACK = 64 * 1024  # multipart boundaries, headers and the small fields
MAX_THUMBNAIL_BYTES = 25 * 1024 * 1024


class _TooLarge(Exception):
    pass


def _counting(receive: Receive, limit: int) -> Receive:
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _TooLarge
        return message

    return counted


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        "upload_too_large",
        f"The file is larger than {limit / 2**20:g} MB (BURROW_UPLOAD_MAX_MB): send a smaller "
        "file, or put it in the workspace another way (git, a terminal).",
    )


@router.post(
    "/{cid}/uploads",
    status_code=201,
    response_model_exclude_none=True,  # `total` is an extract's only
    openapi_extra={
        "requestBody": {
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": ["file"],
                        "properties": {
                            "file": {"type": "string", "format": "binary"},
                            "path": {"type": "string"},
                            "extract": {"type": "string", "enum": ["true", "false"]},
                        },
                    }
                }
            }
        }
    },
)
async def upload(request: Request, conversation: ConversationDep, svc: ServicesDep) -> Uploaded:
    """Multipart `file` (and `path`, workspace-relative; default .burrow/attachments/<name>).

    With `extract=true` the file is a .zip, .tar.gz/.tgz or git .bundle unpacked into the
    folder `path` (default: the workspace); `files` lists the first 1,000 paths written and
    `total` counts them all. A member breaking a rule is a 400 naming it; nothing is kept.
    """
    limit = int(svc.settings.upload_max_mb * 2**20)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit + FORM_SLACK:
        raise _too_large(limit)  # said so up front: not a byte is read
    counted = Request(request.scope, _counting(request.receive, limit + FORM_SLACK))
    try:
        form = await counted.form(max_files=1, max_fields=3)
    except _TooLarge:
        raise _too_large(limit) from None
    except ClientDisconnect:
        raise ApiError(400, "upload_incomplete", "The upload ended early: send it again.") from None
    try:
        file = form.get("file")
        if not isinstance(file, UploadFile):
            raise ApiError(400, "file_required", "Send the file as the multipart field 'file'.")
        data = await file.read(limit + 1)
        if len(data) > limit:
            raise _too_large(limit)
        filename = file.filename or "file"
        target = form.get("path")
        extract = form.get("extract") in ("true", "1", "yes", "on")
        kind = kind_of(filename)
        if extract and kind is None:
            raise ApiError(
                400,
                "unsupported_archive",
                f"{filename} is not a .zip, .tar.gz, .tgz or .bundle file: only those are "
                "extracted (send it without extract to upload it as it is).",
            )
        try:
            if extract:
                folder = target if isinstance(target, str) else ""
                path = "" if folder.strip("/") in ("", ".", "workspace") else workspace_path(folder)
            elif isinstance(target, str) and target:
                path = workspace_path(target)
            else:
                path = f"{ATTACHMENTS_DIR}/{upload_name(filename)}"
        except BadPath as exc:
            raise ApiError(400, "invalid_path", str(exc)) from exc
    finally:
        await form.close()
    sandbox = await svc.conversations.workspace.sandbox(conversation.id)
    if kind is None or not extract:
        await sandbox.write_file(path, data)
        return Uploaded(files=[path])
    limits = UnpackLimits(
        max_bytes=int(svc.settings.upload_extract_max_mb * 2**20),
        max_files=svc.settings.upload_extract_max_files,
    )
    try:
        unpacked = await unpack(sandbox, data, kind, path, limits)
    except Refused as exc:
        raise ApiError(413 if exc.code == "workspace_full" else 400, exc.code, exc.message) from exc
    return Uploaded(files=unpacked.files, total=unpacked.total)


@router.get(
    "/{cid}/attachments/{name}",
    responses={200: {"content": {"image/png": {}, "image/jpeg": {}}}},
)
async def attachment(
    name: Annotated[str, Path(max_length=MAX_NAME + 16)],
    conversation: ConversationDep,
    svc: ServicesDep,
) -> Response:
    """An uploaded image of .burrow/attachments/, as its image type (for thumbnails)."""
    if "/" in name or "\\" in name or "\0" in name or name in ("", ".", ".."):
        raise ApiError(400, "invalid_name", "Give the file name of an upload, without a folder.")
    sandbox = await svc.conversations.workspace.sandbox(conversation.id)
    data = await sandbox.read_file(f"{ATTACHMENTS_DIR}/{name}", 0, MAX_THUMBNAIL_BYTES)
    media_type = image_type(data[:16])
    if media_type is None:
        raise ApiError(
            415, "not_an_image", f"{name} is not a PNG, JPEG, GIF or WebP image: open it in Files."
        )
    return inert_response(data, media_type, cache_control="private, max-age=3600")
