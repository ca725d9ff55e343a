"""Host-side terminals: each PTY session with its scrollback and the sockets watching it.

A terminal lives as long as its shell, not as long as a browser tab: sockets attach and
detach, and a new one first gets the scrollback (the last `scrollback_bytes` of output),
so a refresh redraws the screen. Every attached socket sees the same bytes.

Memory is bounded by bytes, not chunks: the scrollback keeps its last `scrollback_bytes`,
and a socket whose unsent output passes `SUBSCRIBER_BACKLOG_BYTES` is dropped (it may
reconnect and redraw from the scrollback), so a flood and a stalled client cost at most
that much per socket. Scrollback that lost its beginning starts with a line saying how
many bytes were dropped there, so a redrawn screen never passes for the whole output.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import deque
from collections.abc import Callable

from burrow.sandbox.backend import ErrorCode, PtySession, Sandbox, SandboxError

SCROLLBACK_BYTES = 256 * 1024
SUBSCRIBER_BACKLOG_BYTES = 1024 * 1024  # unsent output a socket may hold before it is dropped
MAX_TERMINALS = 16  # per conversation


def dropped_marker(count: int) -> bytes:
    """The line a scrollback starts with when `count` bytes before it were dropped (the
    attributes reset first: the cut may fall inside a colour)."""
    return f"\r\n\x1b[0m[burrow: {count:,} bytes of earlier output dropped]\r\n".encode()


class Attachment:
    """One socket's view: the output not yet sent to it, in order, at most `limit` bytes.

    `get` hands out everything pending as one piece; None once the terminal ended or this
    socket fell behind (`dropped` is then set).
    """

    def __init__(self, limit: int = SUBSCRIBER_BACKLOG_BYTES) -> None:
        self.limit = limit
        self.dropped = asyncio.Event()
        self._chunks: deque[bytes] = deque()
        self._pending = 0
        self._ended = False
        self._ready = asyncio.Event()

    @property
    def pending_bytes(self) -> int:
        return self._pending

    def put(self, data: bytes) -> bool:
        """Queue `data`; False (and nothing queued) when it would pass the limit."""
        if self._ended or self._pending + len(data) > self.limit:
            return False
        self._chunks.append(data)
        self._pending += len(data)
        self._ready.set()
        return True

    def end(self, *, dropped: bool = False) -> None:
        if dropped:
            self._chunks.clear()
            self._pending = 0
            self.dropped.set()
        self._ended = True
        self._ready.set()

    async def get(self) -> bytes | None:
        while not self._chunks:
            if self._ended:
                return None
            self._ready.clear()
            await self._ready.wait()
        data = b"".join(self._chunks)
        self._chunks.clear()
        self._pending = 0
        return data


class Terminal:
    def __init__(
        self,
        terminal_id: str,
        session: PtySession,
        cols: int,
        rows: int,
        scrollback_bytes: int,
        on_activity: Callable[[], None],
    ) -> None:
        self.id = terminal_id
        self.cols = cols
        self.rows = rows
        self.created_at = time.time()
        self._session = session
        self._scrollback = bytearray()
        self._scrollback_bytes = scrollback_bytes
        self._trimmed = 0  # bytes dropped from the scrollback's front so far
        self._attachments: list[Attachment] = []
        self._on_activity = on_activity
        self._pump = asyncio.create_task(self._read_output(), name=f"terminal {terminal_id}")

    @property
    def exited(self) -> bool:
        return self._pump.done()

    @property
    def exit_code(self) -> int | None:
        exit = self._session.exit
        return exit.exit_code if exit else None

    def attach(self) -> tuple[bytes, Attachment]:
        """The scrollback so far and a feed of everything after it (no gap, no overlap)."""
        attachment = Attachment()
        if self.exited:
            attachment.end()
        else:
            self._attachments.append(attachment)
        return self._snapshot(), attachment

    def _snapshot(self) -> bytes:
        """The scrollback; once its start was cut, opening with the marker, which takes the
        place of as many bytes as it is long (the whole stays within `scrollback_bytes`)."""
        if not self._trimmed:
            return bytes(self._scrollback)
        room = len(dropped_marker(self._trimmed + 100))  # the marker is never longer than this
        return dropped_marker(self._trimmed + room) + self._scrollback[room:]

    def detach(self, attachment: Attachment) -> None:
        with contextlib.suppress(ValueError):
            self._attachments.remove(attachment)

    async def write(self, data: bytes) -> None:
        self._on_activity()
        await self._session.write(data)

    async def resize(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows
        await self._session.resize(cols, rows)

    async def close(self) -> None:
        """Hang up the shell and end every attached socket's feed."""
        self._session.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self._pump

    async def _read_output(self) -> None:
        try:
            while data := await self._session.read():
                self._on_activity()
                self._scrollback += data
                overflow = len(self._scrollback) - self._scrollback_bytes
                if overflow > 0:
                    del self._scrollback[:overflow]
                    self._trimmed += overflow
                for attachment in list(self._attachments):
                    if not attachment.put(data):  # it reattaches and gets the scrollback
                        self._attachments.remove(attachment)
                        attachment.end(dropped=True)
        finally:
            self._session.close()
            for attachment in self._attachments:
                attachment.end()
            self._attachments.clear()


class TerminalRegistry:
    """The terminals of every conversation, by conversation id and terminal id."""

    def __init__(
        self,
        *,
        scrollback_bytes: int = SCROLLBACK_BYTES,
        on_activity: Callable[[str], None] = lambda cid: None,
    ) -> None:
        self.scrollback_bytes = scrollback_bytes
        self._on_activity = on_activity
        self._terminals: dict[str, dict[str, Terminal]] = {}

    async def open(self, cid: str, sandbox: Sandbox, cols: int, rows: int) -> Terminal:
        terminals = self._terminals.setdefault(cid, {})
        for tid in [tid for tid, t in terminals.items() if t.exited]:
            del terminals[tid]  # ended shells make room (their scrollback goes with them)
        if len(terminals) >= MAX_TERMINALS:
            raise SandboxError(
                ErrorCode.TOO_LARGE,
                f"A conversation may have {MAX_TERMINALS} terminals; close one first.",
            )
        session = await sandbox.open_pty(cols, rows)
        tid = f"t_{secrets.token_hex(6)}"
        terminal = Terminal(
            tid, session, cols, rows, self.scrollback_bytes, lambda: self._on_activity(cid)
        )
        terminals[tid] = terminal
        return terminal

    def list(self, cid: str) -> list[Terminal]:
        return sorted(self._terminals.get(cid, {}).values(), key=lambda t: t.created_at)

    def get(self, cid: str, tid: str) -> Terminal | None:
        return self._terminals.get(cid, {}).get(tid)

    async def close(self, cid: str, tid: str) -> bool:
        terminal = self._terminals.get(cid, {}).pop(tid, None)
        if terminal is None:
            return False
        await terminal.close()
        return True

    async def close_all(self, cid: str) -> None:
        """Hang up every shell of a conversation (its sandbox stops); their scrollback
        stays readable until the next open."""
        await asyncio.gather(*(t.close() for t in self._terminals.get(cid, {}).values()))

    async def close_everything(self) -> None:
        await asyncio.gather(*(self.close_all(cid) for cid in list(self._terminals)))
        self._terminals.clear()
