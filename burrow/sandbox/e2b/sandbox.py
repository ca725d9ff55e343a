"""One conversation's E2B sandbox as a Burrow `Sandbox`.

Paths are checked against the workspace here: lexically (`..` and absolute paths outside
it), then as the sandbox resolves them (`realpath`), since an E2B endpoint's file API goes
wherever a symlink points. That check is the workspace contract every backend keeps, not
the isolation wall (the remote machine is): a path that races it reaches only that
sandbox's own files. Reads, listings and stats run it beside the operation and keep the
answer only when it passes; a write waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import posixpath
import time
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from typing import TypeVar
from urllib.parse import urlsplit

from e2b import AsyncSandbox
from e2b.connection_config import ConnectionConfig
from e2b.sandbox.filesystem.filesystem import EntryInfo, FileType

from burrow.sandbox.backend import (
    ErrorCode,
    ExecChunk,
    ExecEvent,
    ExecExit,
    ExecRequest,
    FileEntry,
    HandleStatus,
    HttpUpstream,
    NotSupported,
    SandboxError,
    closing_exec,
)
from burrow.sandbox.e2b.errors import mapped
from burrow.sandbox.e2b.process import RemoteProcesses, RemotePty

log = logging.getLogger(__name__)

TAKE_RESULT = 'test -f "$1" || exit 3; cat -- "$1" && rm -f -- "$1"'
RESOLVE = 'realpath -m -- "$1" "$2"'  # the path, then the workspace, with symlinks followed
MAX_READ_BYTES = 10 * 1024 * 1024  # a whole-file read above this needs offset/limit
READ_PIECE = 256 * 1024

_T = TypeVar("_T")

_KINDS = {FileType.FILE: "file", FileType.DIR: "dir", FileType.SYMLINK: "symlink"}


class E2BSandbox:
    """A remote sandbox reached through the e2b SDK; see `E2BBackend`."""

    def __init__(
        self, sandbox_id: str, remote: AsyncSandbox, workspace: str, lifetime: int = 0
    ) -> None:
        self._id = sandbox_id
        self._lifetime = lifetime  # the endpoint's timeout, renewed while in use; 0: never
        self._renewed = time.monotonic()
        self._renewing: asyncio.Task[None] | None = None
        self.remote = remote
        self._workspace = workspace.rstrip("/") or "/"
        self._processes = RemoteProcesses(remote)
        self._status: HandleStatus = "ready"
        self._running = 0  # one-shot commands this server runs there now
        self.detail = ""

    @property
    def id(self) -> str:
        return self._id

    @property
    def remote_id(self) -> str:
        return self.remote.sandbox_id

    @property
    def workspace(self) -> str:
        return self._workspace

    @property
    def status(self) -> HandleStatus:
        return self._status

    def mark(self, status: HandleStatus, detail: str = "") -> None:
        self._status, self.detail = status, detail

    def _renew(self) -> None:
        """Push the endpoint's timeout out again once half of it has passed, in the
        background: a conversation in use for hours must not reach it."""
        if not self._lifetime or time.monotonic() - self._renewed < self._lifetime / 2:
            return
        if self._renewing is None or self._renewing.done():
            self._renewed = time.monotonic()
            self._renewing = asyncio.ensure_future(self._set_timeout())

    async def _set_timeout(self) -> None:
        try:
            await self.remote.set_timeout(self._lifetime)
        except Exception as exc:  # the next use tries again; the pause on timeout keeps files
            self._renewed = 0.0
            log.warning("could not renew sandbox %s's timeout: %s", self.id, exc)

    async def exec(self, request: ExecRequest) -> AsyncIterator[ExecEvent]:
        self._check_ready()
        if request.read_only:  # envd has no way to run a command read-only
            raise SandboxError(
                ErrorCode.NOT_SUPPORTED,
                "The e2b backend cannot run a command read-only (its sandboxes have no such "
                "wall), so read-only conversations run no commands there; use ask or auto "
                "mode, or the local backend.",
            )
        self._renew()
        counted = not request.background
        self._running += counted
        try:
            async for event in self._processes.run(request, self._workspace):
                if isinstance(event, ExecExit):
                    # No longer running once its exit is known: a caller that hibernates
                    # on the exit must not find it still counted.
                    self._running -= counted
                    counted = False
                    if request.result_file:
                        event = ExecExit(
                            event.exit_code,
                            event.signal,
                            event.timed_out,
                            await self._take_result(request.result_file),
                        )
                yield event
        finally:
            self._running -= counted

    async def _take_result(self, path: str) -> bytes | None:
        """The result file's content, removed once read; None if the command wrote none.
        Read by a command, not `/files`: it may lie outside the workspace (in /tmp)."""
        take = ExecRequest(argv=["sh", "-c", TAKE_RESULT, "burrow-result", path], timeout=30)
        data = bytearray()
        async with closing_exec(self._processes.run(take, self._workspace)) as events:
            async for event in events:
                if isinstance(event, ExecChunk) and event.stream == "stdout":
                    data += event.data
                elif isinstance(event, ExecExit) and event.exit_code != 0:
                    return None
        return bytes(data)

    async def _resolved_inside(self, path: str, full: str) -> None:
        """Refuse `full` (already lexically inside) when the sandbox resolves it outside."""
        probe = ExecRequest(argv=["sh", "-c", RESOLVE, "burrow-resolve", full, self._workspace])
        out = bytearray()
        exit_code: int | None = None
        with mapped(f"resolve {path}"):
            async with closing_exec(self._processes.run(probe, self._workspace)) as events:
                async for event in events:
                    if isinstance(event, ExecChunk) and event.stream == "stdout":
                        out += event.data
                    elif isinstance(event, ExecExit):
                        exit_code = event.exit_code
        lines = out.decode(errors="replace").splitlines()
        if exit_code != 0 or len(lines) != 2:
            raise SandboxError(ErrorCode.PROTOCOL, f"could not resolve {path} in the sandbox")
        real, workspace = lines
        if real != workspace and not real.startswith(workspace.rstrip("/") + "/"):
            raise SandboxError(ErrorCode.PATH_ESCAPE, f"Path '{path}' is outside the workspace")

    async def _checked(self, path: str, full: str, operation: Awaitable[_T]) -> _T:
        """`operation`'s answer, once the resolved path is known to be inside; both go
        out together, so a read costs one round trip, not two. An escape outranks the
        operation's own error (a symlink out to a missing file is an escape, not absent)."""
        checked, answer = await asyncio.gather(
            self._resolved_inside(path, full), operation, return_exceptions=True
        )
        if isinstance(checked, BaseException):
            raise checked
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def read_file(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        self._check_ready()
        full = self._inside(path)
        return await self._checked(path, full, self._read(path, full, offset, limit))

    async def _read(self, path: str, full: str, offset: int, limit: int | None) -> bytes:
        end = None if limit is None else offset + limit
        data = bytearray()
        with _as_given(path), mapped(f"read {path}"):
            stream = await self.remote.files.read(full, format="stream")
            try:
                async for piece in stream:
                    data += piece
                    if end is not None and len(data) >= end:
                        break
                    if end is None and len(data) > offset + MAX_READ_BYTES:
                        raise SandboxError(
                            ErrorCode.TOO_LARGE,
                            f"{path} is larger than {MAX_READ_BYTES} bytes; read a part "
                            "of it (offset and limit)",
                        )
            finally:
                await stream.aclose()
        return bytes(data[offset:end])

    async def write_file(self, path: str, data: bytes) -> None:
        self._check_ready()
        full = self._inside(path)
        await self._resolved_inside(path, full)
        with _as_given(path), mapped(f"write {path}"):
            await self.remote.files.write(full, data)

    async def list_dir(self, path: str) -> list[FileEntry]:
        self._check_ready()
        full = self._inside(path)
        entries = await self._checked(path, full, self._list(path, full))
        return sorted((self._entry(e) for e in entries), key=lambda e: e.name)

    async def _list(self, path: str, full: str) -> list[EntryInfo]:
        with _as_given(path), mapped(f"list {path}"):
            return await self.remote.files.list(full, depth=1)

    async def stat(self, path: str) -> FileEntry:
        self._check_ready()
        full = self._inside(path)
        entry = await self._checked(path, full, self._get_info(path, full))
        return self._entry(entry, full)

    async def _get_info(self, path: str, full: str) -> EntryInfo:
        with _as_given(path), mapped(f"stat {path}"):
            return await self.remote.files.get_info(full)

    async def open_tunnel(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        raise NotSupported("byte tunnels to a port (previews go over HTTP: open_http)", "e2b")

    async def open_http(self, port: int) -> HttpUpstream:
        """A connection to E2B's sandbox proxy; the headers pick this sandbox and port."""
        self._check_ready()
        config: ConnectionConfig = self.remote.connection_config
        url = urlsplit(config.get_sandbox_url(self.remote_id, self.remote.sandbox_domain, port))
        tls = url.scheme == "https"
        host = url.hostname or ""
        with mapped(f"reach port {port}"):
            reader, writer = await asyncio.open_connection(
                host,
                url.port or (443 if tls else 80),
                ssl=tls or None,
                server_hostname=host if tls else None,
            )
        headers = [
            (b"e2b-sandbox-id", self.remote_id.encode()),
            (b"e2b-sandbox-port", b"%d" % port),
        ]
        # The traffic token where the endpoint restricts ports; else the envd token (burrow
        # sandbox-host takes that one, and strips both before the service sees the request).
        traffic = self.remote.traffic_access_token
        envd = self.remote._envd_access_token
        if isinstance(traffic, str) and traffic:  # the API client's Unset when there is none
            headers.append((b"e2b-traffic-access-token", traffic.encode()))
        elif isinstance(envd, str) and envd:
            headers.append((b"x-access-token", envd.encode()))
        # Routed by headers on a shared endpoint (E2B_SANDBOX_URL, sandbox.<domain>); by
        # name ({port}-{id}.<domain>) otherwise, which then must be the Host.
        by_name = url.hostname is not None and url.hostname.startswith(f"{port}-")
        return HttpUpstream(
            reader, writer, tuple(headers), url.netloc.encode() if by_name else None
        )

    async def ping(self) -> float:
        self._check_ready()
        started = time.monotonic()
        with mapped("reach the sandbox"):
            if not await self.remote.is_running():
                raise SandboxError(ErrorCode.UNAVAILABLE, f"Sandbox {self.id} is not running.")
        return time.monotonic() - started

    async def open_pty(
        self, cols: int, rows: int, env: Mapping[str, str] | None = None
    ) -> RemotePty:
        self._check_ready()
        self._renew()
        return await RemotePty(self.remote).start(cols, rows, self._workspace, dict(env or {}))

    async def running_commands(self) -> int:
        return self._running

    @property
    def workspace_changes(self) -> None:
        return None  # a remote file system: checkpoints walk it

    async def stop(self) -> None:
        """Every process stops, the files stay: a filesystem-only pause."""
        if self._status != "ready":
            return
        self.mark("stopped", "paused (files kept)")
        with mapped("pause the sandbox"):
            await self.remote.pause(mode="filesystem")

    def _check_ready(self) -> None:
        if self._status != "ready":
            raise SandboxError(
                ErrorCode.UNAVAILABLE,
                f"Sandbox {self.id} is {self._status}: {self.detail or 'not running'}. "
                "Restart it (create it again) to continue.",
            )

    def _inside(self, path: str) -> str:
        """The absolute path of a workspace-relative (or absolute) `path` inside it."""
        if "\0" in path:
            raise SandboxError(ErrorCode.PROTOCOL, f"invalid path {path!r}")
        full = posixpath.normpath(posixpath.join(self._workspace, path))
        if full != self._workspace and not full.startswith(self._workspace.rstrip("/") + "/"):
            raise SandboxError(ErrorCode.PATH_ESCAPE, f"Path '{path}' is outside the workspace")
        return full

    def _entry(self, entry: EntryInfo, full: str | None = None) -> FileEntry:
        full = posixpath.normpath(full or entry.path)
        relative = posixpath.relpath(full, self._workspace)
        return FileEntry(
            name="" if relative == "." else posixpath.basename(full),
            path=relative,
            kind=_KINDS.get(entry.type, "other") if entry.type else "other",  # type: ignore[arg-type]
            size=entry.size,
            mtime=entry.modified_time.timestamp(),
            mode=entry.mode,
            owner=entry.owner,
            group=entry.group,
        )


@contextlib.contextmanager
def _as_given(path: str) -> Iterator[None]:
    """A path escape the remote side found (a symlink out) names the path as the caller
    gave it, as the local backend's message does, not the resolved one."""
    try:
        yield
    except SandboxError as exc:
        if exc.code != ErrorCode.PATH_ESCAPE:
            raise
        raise SandboxError(
            ErrorCode.PATH_ESCAPE, f"Path '{path}' is outside the workspace"
        ) from exc
