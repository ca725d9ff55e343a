"""envd's plain HTTP routes: `/health`, `/files` (download and upload), `/init`, `/envs`.

Downloads stream in pieces (a large file never sits in memory whole); uploads are capped
(`max_upload_bytes`) because the sandbox takes a file's bytes in one write.
"""

from __future__ import annotations

import posixpath
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Message

from burrow.sandbox.backend import SandboxError
from burrow.sandbox_host import users
from burrow.sandbox_host.paths import BadPath, http_status, sandbox_path
from burrow.sandbox_host.registry import HostedSandbox, current_sandbox

READ_PIECE_BYTES = 1024 * 1024
MAX_FILES_PER_UPLOAD = 100
MULTIPART_OVERHEAD_BYTES = 64 * 1024  # boundaries and part headers around the files


class EnvdError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def envd_error(status: int, message: str) -> JSONResponse:
    """envd's error body; the SDK reads `message` and maps the status to an exception."""
    return JSONResponse({"code": status, "message": message}, status_code=status)


class EnvdHttp:
    def __init__(self, max_upload_bytes: int) -> None:
        self.max_upload_bytes = max_upload_bytes

    def routes(self) -> list[Route]:
        return [
            Route("/health", self.health, methods=["GET"]),
            Route("/init", self.init, methods=["POST"]),
            Route("/envs", self.envs, methods=["GET"]),
            Route("/files", self._guarded(self.download), methods=["GET"]),
            Route("/files", self._guarded(self.upload), methods=["POST"]),
        ]

    def _guarded(
        self, method: Callable[[Request, HostedSandbox], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            hosted = current_sandbox.get()
            if hosted.state != "running":
                return envd_error(502, f"Sandbox {hosted.sandbox_id} is paused.")
            try:
                response: Response = await method(request, hosted)
                return response
            except EnvdError as exc:
                return envd_error(exc.status, exc.message)
            except BadPath as exc:
                return envd_error(400, str(exc))
            except SandboxError as exc:
                return envd_error(http_status(exc.code), exc.message)

        return endpoint

    async def health(self, request: Request) -> Response:
        hosted = current_sandbox.get()
        if hosted.state != "running":
            return envd_error(502, f"Sandbox {hosted.sandbox_id} is paused.")
        return Response(status_code=204)

    async def init(self, request: Request) -> Response:
        """The orchestrator's call to a fresh envd; nothing to set up here."""
        return Response(status_code=204)

    async def envs(self, request: Request) -> Response:
        return JSONResponse(current_sandbox.get().envs)

    async def download(self, request: Request, hosted: HostedSandbox) -> Response:
        path = sandbox_path(request.query_params.get("path", ""), hosted.sandbox.workspace)
        entry = await hosted.sandbox.stat(path)  # before the headers: errors get a status
        if entry.kind == "dir":
            raise EnvdError(400, f"{path} is a directory, not a file.")
        first = await hosted.sandbox.read_file(path, 0, READ_PIECE_BYTES)

        async def pieces() -> AsyncIterator[bytes]:
            piece, offset = first, 0
            while piece:
                yield piece
                if len(piece) < READ_PIECE_BYTES:
                    return
                offset += len(piece)
                piece = await hosted.sandbox.read_file(path, offset, READ_PIECE_BYTES)

        name = posixpath.basename(path)
        return StreamingResponse(
            pieces(),
            media_type="application/octet-stream",
            headers={
                "Content-Disposition": f'attachment; filename="{_quoted(name)}"',
                "X-Content-Type-Options": "nosniff",
            },
        )

    async def upload(self, request: Request, hosted: HostedSandbox) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_upload_bytes:
            raise EnvdError(413, self._too_large())
        encoding = request.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip"):
            raise EnvdError(400, f"Content-Encoding {encoding!r} is not supported (gzip is).")
        # The whole body, capped, before parsing: a multipart parser would otherwise spool
        # any amount to disk. The sandbox takes a file in one write anyway.
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_upload_bytes + MULTIPART_OVERHEAD_BYTES:
                raise EnvdError(413, self._too_large())
        written: list[dict[str, str]] = []
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            replayed = bytes(body)

            async def replay() -> Message:
                return {"type": "http.request", "body": replayed, "more_body": False}

            async with Request(request.scope, replay).form(
                max_files=MAX_FILES_PER_UPLOAD, max_fields=MAX_FILES_PER_UPLOAD
            ) as form:
                files = [v for _, v in form.multi_items() if isinstance(v, UploadFile)]
                if not files:
                    raise EnvdError(400, "No file in the multipart body (field `file`).")
                default = request.query_params.get("path")
                for upload in files:
                    target = default if len(files) == 1 and default else upload.filename
                    if not target:
                        raise EnvdError(400, "Each file needs a path (its filename or ?path=).")
                    data = await upload.read(self.max_upload_bytes + 1)
                    written.append(await self._write(request, hosted, target, data))
        else:
            target = request.query_params.get("path")
            if not target:
                raise EnvdError(400, "path is required (?path=...).")
            data = self._gunzip(bytes(body)) if encoding == "gzip" else bytes(body)
            written.append(await self._write(request, hosted, target, data))
        return JSONResponse(written)

    async def _write(
        self, request: Request, hosted: HostedSandbox, target: str, data: bytes
    ) -> dict[str, str]:
        if len(data) > self.max_upload_bytes:
            raise EnvdError(413, self._too_large())
        path = sandbox_path(target, hosted.sandbox.workspace)
        user = _user(request) or hosted.user
        # Only another user than root is handed what the write makes (hand_over).
        handing = hosted.users and user != users.ROOT
        made = await users.missing(hosted.sandbox, path) if handing else []
        await hosted.sandbox.write_file(path, data)
        await users.hand_over(hosted.sandbox, made, user, hosted.users)
        return {"name": posixpath.basename(path), "type": "file", "path": path}

    def _gunzip(self, body: bytes) -> bytes:
        """The SDK's `gzip=True` upload, inflated at most to the cap (a small bomb of a
        body must not become gigabytes here)."""
        inflater = zlib.decompressobj(wbits=31)
        try:
            data = inflater.decompress(body, self.max_upload_bytes + 1)
        except zlib.error as exc:
            raise EnvdError(400, f"The gzip body is corrupt: {exc}") from None
        if len(data) > self.max_upload_bytes or inflater.unconsumed_tail:
            raise EnvdError(413, self._too_large())
        return data

    def _too_large(self) -> str:
        return (
            f"Upload over {self.max_upload_bytes} bytes, this host's cap "
            "(BURROW_SANDBOX_HOST_MAX_UPLOAD_MB)."
        )


def _user(request: Request) -> str | None:
    """Who a file route acts as: `?username=`, else the call's (users.py)."""
    given = request.query_params.get("username")
    if not given:
        return users.current_user.get()
    try:
        return users.checked(given)
    except users.BadUser as exc:
        raise EnvdError(400, str(exc)) from None


def _quoted(name: str) -> str:
    return name.replace("\\", "_").replace('"', "_").encode("ascii", "replace").decode()
