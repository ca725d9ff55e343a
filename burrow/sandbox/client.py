"""The host side of the guest protocol: one Unix-socket connection per request.

Every request starts with the version handshake; error frames become
`SandboxError(ErrorCode(code))`; a connection that cannot be made or breaks becomes
`UNAVAILABLE`. Closing an exec stream before its exit kills the remote process group.

The guest runs inside the sandbox, so it is as hostile as the code there: it can be
stopped (`kill -STOP`), slowed down or replaced. Every wait for it has a deadline
(`reply_timeout`; an exec stream gets its own timeout plus that), and a missed deadline
raises `GuestUnresponsive`, on which the backend kills the sandbox from the host.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Mapping
from typing import Any, Literal, TypeVar

from burrow.sandbox.backend import (
    ErrorCode,
    ExecChunk,
    ExecEvent,
    ExecExit,
    ExecRequest,
    FileEntry,
    SandboxError,
)
from burrow.sandbox.guest import protocol

RECV_BYTES = 256 * 1024
TUNNEL_BUFFER_BYTES = 256 * 1024  # a tunnel reader's buffer before it pauses the guest
# A terminal's output frames: the guest sends at most 64 KiB; more is a broken (or
# subverted) guest, refused before it is buffered.
PTY_MAX_PAYLOAD_BYTES = 256 * 1024
STDIN_FRAME_BYTES = 1 << 20  # a streamed stdin is sent in frames of at most this
ABORT_WAIT_SECONDS = 2.0  # how long an early close waits for the killed command to exit
REPLY_TIMEOUT_SECONDS = 15.0  # connect, handshake and one answer; generous for a loaded host
# (5 s was too little: a 2-core machine at load 10 starved a healthy guest past it, and its
# sandbox was killed)

T = TypeVar("T")


class GuestUnresponsive(SandboxError):
    """The guest missed a deadline: stopped, hung or starved. The sandbox must be killed."""

    def __init__(self, what: str) -> None:
        super().__init__(ErrorCode.UNAVAILABLE, f"The sandbox agent did not answer {what}.")


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = protocol.FrameDecoder()
        self.backlog: list[protocol.Frame] = []

    async def receive(self) -> protocol.Frame:
        """The next frame; error frames are raised as SandboxError."""
        while not self.backlog:
            try:
                data = await self.reader.read(RECV_BYTES)
            except OSError as exc:
                raise _unavailable(f"the connection to the sandbox agent broke ({exc})") from None
            if not data:
                raise _unavailable("the sandbox agent closed the connection before answering")
            try:
                self.backlog.extend(self.decoder.feed(data))
            except protocol.ProtocolError as exc:
                raise SandboxError(ErrorCode.PROTOCOL, str(exc)) from None
        frame = self.backlog.pop(0)
        if frame.kind == protocol.ERROR:
            raise _error_from_frame(frame)
        return frame

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    def close(self) -> None:
        self.writer.close()


class PtyConnection:
    """One shell on a pseudo-terminal in the sandbox; see `burrow.sandbox.backend.PtySession`."""

    def __init__(self, conn: _Connection, pid: int) -> None:
        self._conn = conn
        self.pid = pid
        self.exit: ExecExit | None = None

    async def read(self) -> bytes:
        """The next output bytes; b"" once the shell has exited (see `exit`) or the
        connection broke."""
        if self.exit is not None:
            return b""
        try:
            frame = await self._conn.receive()
        except SandboxError:
            frame = protocol.Frame({"kind": protocol.EXIT})
        if frame.kind == protocol.EXIT:
            header = frame.header
            self.exit = ExecExit(_number(header, "exit_code"), _number(header, "signal"))
            self._conn.close()
            return b""
        return frame.payload

    async def write(self, data: bytes) -> None:
        if data and self.exit is None:
            self._send(protocol.encode_frame(protocol.STDIN, data))

    async def resize(self, cols: int, rows: int) -> None:
        self._send(protocol.encode_frame(protocol.RESIZE, cols=cols, rows=rows))

    def signal(self, signum: int) -> None:
        self._send(protocol.encode_frame(protocol.SIGNAL, signal=signum))

    def close(self) -> None:
        """Hang up: the guest sends the session SIGHUP, then SIGKILL."""
        self._conn.close()

    def _send(self, data: bytes) -> None:
        try:
            self._conn.send(data)
        except (OSError, RuntimeError):
            pass  # the shell is gone; read() reports its end


class GuestClient:
    """Talks to the guest listening on `socket_path`."""

    def __init__(
        self,
        socket_path: str,
        *,
        version: tuple[int, int] = protocol.PROTOCOL_VERSION,
        reply_timeout: float = REPLY_TIMEOUT_SECONDS,
    ) -> None:
        self.socket_path = socket_path
        self.reply_timeout = reply_timeout
        self._hello = protocol.hello_frame(version)

    async def handshake(self, timeout: float | None = None) -> dict[str, Any]:
        """Connect and exchange hellos; returns the guest's hello (version, features).
        `timeout` replaces the reply timeout (a boot has its own)."""
        until = asyncio.get_running_loop().time() + (timeout or self.reply_timeout)
        conn, hello = await self._within("the handshake in time", self._open(b""), until=until)
        conn.close()
        return hello

    async def ping(self) -> float:
        started = time.perf_counter()
        await self._request(protocol.PING, protocol.PONG)
        return time.perf_counter() - started

    async def running_commands(self) -> int:
        """How many one-shot commands the guest is running (terminals not counted)."""
        frame = await self._request(protocol.PING, protocol.PONG)
        return _number(frame.header, "busy") or 0

    async def open_pty(
        self,
        cols: int,
        rows: int,
        argv: list[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> PtyConnection:
        """Start a shell on a new pseudo-terminal; the connection is the session's life."""
        request = protocol.encode_frame(
            protocol.PTY_OPEN, cols=cols, rows=rows, argv=argv, env=dict(env or {})
        )
        conn, started = await self._within(
            "a terminal request", self._exchange(request, protocol.PTY_STARTED)
        )
        try:
            pid = _number(started.header, "pid")
            if pid is None:
                raise _malformed(started.header, "pid")
        except SandboxError:
            conn.close()
            raise
        _bound_frames(conn, PTY_MAX_PAYLOAD_BYTES)
        return PtyConnection(conn, pid)

    async def exec(self, request: ExecRequest) -> AsyncIterator[ExecEvent]:
        spawn = protocol.encode_frame(
            protocol.SPAWN,
            argv=list(request.argv),
            cwd=request.cwd,
            env=dict(request.env),
            timeout=request.timeout,
            stdin=request.stdin is not None,
            result_file=request.result_file,
            background=request.background,
            read_only=request.read_only,
        )
        if isinstance(request.stdin, bytes):
            spawn += protocol.encode_frame(protocol.STDIN, request.stdin, eof=True)
        conn, _ = await self._within("a command request", self._open(spawn))
        feeding: asyncio.Task[None] | None = None
        if request.stdin is not None and not isinstance(request.stdin, bytes):
            feeding = asyncio.create_task(_feed_stdin(conn, request.stdin))
        # The guest kills a command at its timeout and reports the exit; one that has not
        # reported it a reply timeout later is not going to.
        until = None
        if request.timeout is not None:
            until = asyncio.get_running_loop().time() + request.timeout + self.reply_timeout
        finished = False
        try:
            while True:
                what = f"with the exit of a command {self.reply_timeout:g} s past its timeout"
                try:
                    frame = await self._within(what, self._receive_alive(conn), until=until)
                except GuestUnresponsive:
                    finished = True  # no abort to wait for: the sandbox is killed instead
                    raise
                if frame.kind in (protocol.STDOUT, protocol.STDERR):
                    yield ExecChunk(frame.kind, frame.payload)  # type: ignore[arg-type]
                elif frame.kind == protocol.EXIT:
                    finished = True
                    header = frame.header
                    yield ExecExit(
                        exit_code=_number(header, "exit_code"),
                        signal=_number(header, "signal"),
                        timed_out=bool(header.get("timed_out")),
                        result=frame.payload if header.get("has_result") else None,
                    )
                    return
                else:
                    raise SandboxError(ErrorCode.PROTOCOL, f"unexpected {frame.kind} frame")
        finally:
            if feeding is not None:
                feeding.cancel()
            try:
                if not finished:
                    await self._abort(conn)
            finally:  # even when the abort's wait is cancelled too
                conn.close()

    async def read_file(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        frame = await self._request(
            protocol.READ, protocol.READ_RESULT, path=path, offset=offset, limit=limit
        )
        return frame.payload

    async def write_file(self, path: str, data: bytes) -> FileEntry:
        if len(data) > protocol.MAX_PAYLOAD_BYTES:
            raise SandboxError(
                ErrorCode.TOO_LARGE,
                f"{path}: {len(data)} bytes is more than one write may carry "
                f"({protocol.MAX_PAYLOAD_BYTES} bytes); write it in parts from inside the sandbox",
            )
        frame = await self._request(protocol.WRITE, protocol.WRITE_RESULT, data, path=path)
        return _entry(frame.header.get("entry"))

    async def list_dir(self, path: str) -> list[FileEntry]:
        frame = await self._request(protocol.LIST, protocol.LIST_RESULT, path=path)
        entries = frame.header.get("entries")
        if not isinstance(entries, list):
            raise _malformed(frame.header, "entries")
        return [_entry(entry) for entry in entries]

    async def stat(self, path: str) -> FileEntry:
        frame = await self._request(protocol.STAT, protocol.STAT_RESULT, path=path)
        return _entry(frame.header.get("entry"))

    async def open_tunnel(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A raw byte stream to 127.0.0.1:`port` inside the sandbox (see guest/tunnel.py)."""
        return await self._within("a tunnel request", self._open_tunnel(port))

    async def _open_tunnel(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Frames are read with readexactly, so bytes the service sent right after the
        `tunnel_open` answer stay in the returned reader's buffer."""
        try:
            reader, writer = await asyncio.open_unix_connection(
                self.socket_path, limit=TUNNEL_BUFFER_BYTES
            )
        except OSError as exc:
            raise _unavailable(f"the sandbox agent is not listening ({exc.strerror})") from None
        try:
            writer.write(self._hello + protocol.encode_frame(protocol.TUNNEL, port=port))
            for expected in (protocol.HELLO, protocol.TUNNEL_OPEN):
                frame = await _read_frame(reader)
                if frame.kind == protocol.ERROR:
                    raise _error_from_frame(frame)
                if expected == protocol.HELLO:
                    protocol.check_hello(frame)
                elif frame.kind != expected:
                    raise SandboxError(ErrorCode.PROTOCOL, f"expected {expected}, got {frame.kind}")
        except protocol.ProtocolError as exc:
            writer.close()
            raise SandboxError(ErrorCode.PROTOCOL, str(exc)) from None
        except (OSError, asyncio.IncompleteReadError):
            writer.close()
            raise _unavailable("the sandbox agent closed the tunnel before answering") from None
        except BaseException:
            writer.close()
            raise
        return reader, writer

    async def _within(
        self, what: str, work: Awaitable[T], *, until: float | Literal["reply"] | None = "reply"
    ) -> T:
        """`work`, or GuestUnresponsive once the deadline has passed ("reply": a reply
        timeout from now; None: none); the one place a wait for the guest gets its deadline."""
        loop = asyncio.get_running_loop()
        when = loop.time() + self.reply_timeout if until == "reply" else until
        try:
            async with asyncio.timeout_at(when):
                return await work
        except TimeoutError:
            if until == "reply":
                what = f"{what} within {self.reply_timeout:g} s"
            raise GuestUnresponsive(what) from None

    async def _receive_alive(self, conn: _Connection) -> protocol.Frame:
        """The next frame of a stream that may rightly stay silent for long (a quiet
        command): while none comes, the guest must keep answering pings on the side."""
        while True:
            try:
                async with asyncio.timeout(self.reply_timeout):
                    return await conn.receive()
            except TimeoutError:
                await self.ping()

    async def _open(self, request: bytes) -> tuple[_Connection, dict[str, Any]]:
        try:
            reader, writer = await asyncio.open_unix_connection(self.socket_path)
        except OSError as exc:
            raise _unavailable(f"the sandbox agent is not listening ({exc.strerror})") from None
        conn = _Connection(reader, writer)
        try:
            conn.send(self._hello + request)
            hello = await conn.receive()
            protocol.check_hello(hello)
        except protocol.ProtocolError as exc:
            conn.close()
            raise SandboxError(ErrorCode.PROTOCOL, str(exc)) from None
        except BaseException:
            conn.close()
            raise
        return conn, hello.header

    async def _exchange(self, request: bytes, expected: str) -> tuple[_Connection, protocol.Frame]:
        """Open a connection, send `request` and read its `expected` answer; the
        connection stays open for what follows (a terminal's stream)."""
        conn, _ = await self._open(request)
        try:
            frame = await conn.receive()
            if frame.kind != expected:
                raise SandboxError(ErrorCode.PROTOCOL, f"expected {expected}, got {frame.kind}")
        except BaseException:
            conn.close()
            raise
        return conn, frame

    async def _request(
        self, kind: str, expected: str, payload: bytes = b"", **fields: Any
    ) -> protocol.Frame:
        """One request, one answer, within the reply timeout."""
        request = protocol.encode_frame(kind, payload, **fields)
        conn, frame = await self._within(f"a {kind} request", self._exchange(request, expected))
        conn.close()
        return frame

    @staticmethod
    async def _abort(conn: _Connection) -> None:
        """Kill the command's process group and wait (briefly) until it has exited."""
        try:
            conn.send(protocol.encode_frame(protocol.SIGNAL, signal=int(signal.SIGKILL)))
            async with asyncio.timeout(ABORT_WAIT_SECONDS):
                while (await conn.receive()).kind != protocol.EXIT:
                    pass
        except (OSError, SandboxError, TimeoutError):
            pass  # the guest also kills the group when the connection closes


async def _feed_stdin(conn: _Connection, chunks: AsyncIterable[bytes]) -> None:
    """Send each piece of a streamed stdin as it comes, then close the command's stdin.
    Pieces larger than a frame may carry are split."""
    try:
        async for chunk in chunks:
            for start in range(0, len(chunk), STDIN_FRAME_BYTES):
                piece = chunk[start : start + STDIN_FRAME_BYTES]
                conn.send(protocol.encode_frame(protocol.STDIN, piece))
            await conn.writer.drain()  # the guest's pace, not an unbounded buffer here
        conn.send(protocol.encode_frame(protocol.STDIN, eof=True))
    except (OSError, RuntimeError):
        pass  # the connection is gone; the exec stream reports how the command ended


async def _read_frame(reader: asyncio.StreamReader) -> protocol.Frame:
    """Exactly one frame from `reader`, leaving whatever follows it in the buffer."""
    header_len, payload_len = protocol.PREFIX.unpack(await reader.readexactly(protocol.PREFIX.size))
    if header_len > protocol.MAX_HEADER_BYTES or payload_len > protocol.MAX_PAYLOAD_BYTES:
        raise protocol.ProtocolError(f"frame too large ({header_len}+{payload_len} bytes)")
    frames = protocol.FrameDecoder().feed(
        protocol.PREFIX.pack(header_len, payload_len)
        + await reader.readexactly(header_len + payload_len)
    )
    return frames[0]


def _bound_frames(conn: _Connection, max_payload: int) -> None:
    """Refuse frames from now on whose payload passes `max_payload` (the session ends)."""
    conn.decoder.max_payload = max_payload


def _unavailable(detail: str) -> SandboxError:
    return SandboxError(ErrorCode.UNAVAILABLE, f"The sandbox is unavailable: {detail}.")


def _error_from_frame(frame: protocol.Frame) -> SandboxError:
    raw_code = str(frame.header.get("code"))
    try:
        code = ErrorCode(raw_code)
    except ValueError:
        code = ErrorCode.INTERNAL
    return SandboxError(code, str(frame.header.get("message", "")))


def _entry(raw: object) -> FileEntry:
    if not isinstance(raw, dict):
        raise _malformed({"entry": raw}, "entry")
    try:
        entry = FileEntry(
            name=str(raw["name"]),
            path=str(raw["path"]),
            kind=raw["kind"],
            size=int(raw["size"]),
            mtime=float(raw["mtime"]),
            mode=int(raw.get("mode", 0)),
            owner=str(raw.get("owner", "")),
            group=str(raw.get("group", "")),
            target=None if raw.get("target") is None else str(raw["target"]),
        )
    except (KeyError, TypeError, ValueError):
        raise _malformed({"entry": raw}, "entry") from None
    if entry.kind not in ("file", "dir", "symlink", "other"):
        raise _malformed({"entry": raw}, "entry")
    return entry


# Answers are read defensively: the guest lives in the sandbox and is as untrusted as it.


def _number(header: dict[str, Any], name: str) -> int | None:
    """An integer field (or None when absent) of an answer's header."""
    value = header.get(name)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _malformed(header, name)


def _malformed(header: dict[str, Any], name: str) -> SandboxError:
    return SandboxError(
        ErrorCode.PROTOCOL,
        f"The sandbox agent sent a malformed {header.get('kind', 'answer')!s:.40} frame "
        f"({name}); restart the sandbox.",
    )
