"""A sandbox handle that gives commands and terminals a conversation's secrets as
environment variables and masks the values in everything they print.

The secrets are looked up again for every command and every new terminal, so a change to
the conversation's choice takes effect at the next one. A running terminal masks with the
latest values too: a background process may hold a value the terminal was not given.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace

from burrow.sandbox.backend import (
    ExecChunk,
    ExecEvent,
    ExecExit,
    ExecRequest,
    FileEntry,
    HandleStatus,
    HttpUpstream,
    PtySession,
    Sandbox,
    WorkspaceChanges,
    closing_exec,
)
from burrow.sandbox.masking import MaskedStream, SecretMask


@dataclass(frozen=True)
class Exposure:
    """What a conversation's commands get, and what their output may not show."""

    env: Mapping[str, str] = field(default_factory=dict)
    mask: SecretMask = field(default_factory=SecretMask)


class MaskedPty:
    """A terminal whose output is masked, secrets split across reads included."""

    def __init__(self, session: PtySession, mask: Callable[[], SecretMask]) -> None:
        self._session = session
        self._mask = mask
        self._stream = MaskedStream(mask())

    @property
    def exit(self) -> ExecExit | None:
        return self._session.exit

    async def read(self) -> bytes:
        while True:
            data = await self._session.read()
            if not data:
                return self._stream.end()  # then b"" on the next read: the shell ended
            self._stream.mask = self._mask()
            shown = self._stream.feed(data)
            if shown:
                return shown

    async def write(self, data: bytes) -> None:
        await self._session.write(data)

    async def resize(self, cols: int, rows: int) -> None:
        await self._session.resize(cols, rows)

    def close(self) -> None:
        self._session.close()


class SecretSandbox:
    """`inner` as one conversation's commands see it (implements `Sandbox`)."""

    def __init__(
        self,
        inner: Sandbox,
        exposure: Callable[[], Awaitable[Exposure]],
        mask: Callable[[], SecretMask],
    ) -> None:
        self._inner = inner
        self._exposure = exposure  # looked up afresh: the values and the choice may change
        self._mask = mask  # the latest known mask, without a lookup (terminal reads)

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def workspace(self) -> str:
        return self._inner.workspace

    @property
    def status(self) -> HandleStatus:
        return self._inner.status

    async def exec(self, request: ExecRequest) -> AsyncIterator[ExecEvent]:
        exposure = await self._exposure()
        request = replace(request, env={**exposure.env, **request.env})
        streams = {"stdout": MaskedStream(exposure.mask), "stderr": MaskedStream(exposure.mask)}
        async with closing_exec(self._inner.exec(request)) as events:
            async for event in events:
                if isinstance(event, ExecChunk):
                    shown = streams[event.stream].feed(event.data)
                    if shown:
                        yield ExecChunk(event.stream, shown)
                    continue
                for name, stream in streams.items():
                    rest = stream.end()
                    if rest:
                        yield ExecChunk(name, rest)  # type: ignore[arg-type]
                yield event

    async def read_file(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        data = await self._inner.read_file(path, offset, limit)
        return (await self._exposure()).mask.raw(data)

    async def write_file(self, path: str, data: bytes) -> None:
        await self._inner.write_file(path, data)

    async def list_dir(self, path: str) -> list[FileEntry]:
        return await self._inner.list_dir(path)

    async def stat(self, path: str) -> FileEntry:
        return await self._inner.stat(path)

    async def open_tunnel(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await self._inner.open_tunnel(port)

    async def open_http(self, port: int) -> HttpUpstream:
        return await self._inner.open_http(port)

    async def ping(self) -> float:
        return await self._inner.ping()

    async def open_pty(
        self, cols: int, rows: int, env: Mapping[str, str] | None = None
    ) -> PtySession:
        exposure = await self._exposure()
        session = await self._inner.open_pty(cols, rows, {**exposure.env, **(env or {})})
        return MaskedPty(session, self._mask)

    async def running_commands(self) -> int:
        return await self._inner.running_commands()

    @property
    def workspace_changes(self) -> WorkspaceChanges | None:
        return self._inner.workspace_changes

    async def stop(self) -> None:
        await self._inner.stop()
