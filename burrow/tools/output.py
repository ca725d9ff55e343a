"""Command output, bounded three ways: the head and tail the model sees, the whole of it for
the log file, and the live feed watchers get (a rate-limited share, with markers).

Whatever a command prints, the journal holds at most `LiveOutput`'s per-call limit plus the
model's head and tail: a `yes` or a `head -c 300M /dev/zero` costs the same few hundred KiB.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Literal

# Past this the saved log keeps its start and says so (well under one write's 64 MiB).
MAX_LOG_CHARS = 10_000_000

# Live output for watchers (`tool.output` events), per call. The full output is in the
# result (head + tail) and the log file; live is a view, so it may drop what comes too fast.
LIVE_BYTES_PER_SECOND = 16 * 1024
LIVE_BURST_BYTES = 64 * 1024  # shown at once before the rate applies (most commands fit)
LIVE_MAX_BYTES = 1024 * 1024  # per call, whatever its duration
RESUME_BYTES = 4 * 1024  # after a gap, wait for this much room: few markers, useful pieces

# How fast the server reads one command's output once it has printed a lot: beyond what the
# log keeps and the model sees, output is only counted, and a flood read at full speed would
# take a core from every other request. Reading slower backs the command up in its pipe.
READ_FREE_BYTES = 16 * 1024 * 1024
READ_BYTES_PER_SECOND = 32 * 1024 * 1024

Stream = Literal["stdout", "stderr"]
Sink = Callable[[Stream, str], Awaitable[None]]


class OutputBuffer:
    """Collects combined stdout+stderr in arrival order, bounded in memory."""

    def __init__(self, head: int, tail: int) -> None:
        self.head = head
        self.tail = tail
        self.total_chars = 0
        self._log: list[str] = []
        self._log_chars = 0
        self._head_text = ""
        self._tail_text = ""
        self._newlines = 0

    def add(self, text: str) -> None:
        self.total_chars += len(text)
        self._newlines += text.count("\n")
        if len(self._head_text) < self.head:
            self._head_text += text[: self.head - len(self._head_text)]
        room = MAX_LOG_CHARS - self._log_chars
        if room > 0:
            kept = text[:room]
            self._log.append(kept)
            self._log_chars += len(kept)
        if len(text) >= self.tail:  # a flood arrives in big chunks: no copy of the old tail
            self._tail_text = text[len(text) - self.tail :]
        else:
            self._tail_text = (self._tail_text + text)[-self.tail :]

    @property
    def truncated(self) -> bool:
        return self.total_chars > self.head + self.tail

    @property
    def log_complete(self) -> bool:
        return self.total_chars <= MAX_LOG_CHARS

    def full_text(self) -> str:
        text = "".join(self._log)
        if not self.log_complete:
            text += f"\n[log stopped after {MAX_LOG_CHARS:,} of {self.total_chars:,} characters]\n"
        return text

    def for_model(self, log_path: str | None) -> str:
        """All the output if short; else head + a note on what was cut and where it is + tail."""
        if not self.truncated:
            return "".join(self._log)
        omitted = self.total_chars - self.head - self.tail
        middle_lines = self._newlines - self._head_text.count("\n") - self._tail_text.count("\n")
        where = (
            f"The full output is saved in {log_path}; read parts of it with read_file "
            "(offset/limit) or search it with grep."
            if log_path
            else "The full output could not be saved."
        )
        note = (
            f"\n\n[... {omitted:,} characters ({middle_lines:,} lines) omitted from the middle "
            f"of {self.total_chars:,} characters of output. {where}]\n\n"
        )
        return self._head_text + note + self._tail_text


class LiveOutput:
    """Forwards output to `sink` within a byte budget: a token bucket of `rate` bytes/s
    (bursts up to `burst`) and at most `limit` bytes per call, in UTF-8.

    What does not fit is counted, and a marker saying so is forwarded before the next piece
    that does (and at `finish`): watchers see where output was elided, and since the marker
    goes through `sink` like any output, the replay shows exactly what was shown live.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        rate: int = LIVE_BYTES_PER_SECOND,
        burst: int = LIVE_BURST_BYTES,
        limit: int = LIVE_MAX_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sink = sink
        self._rate = rate
        self._burst = burst
        self._limit = limit
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self.sent_bytes = 0
        self.elided_chars = 0  # not yet announced by a marker
        self.total_elided_chars = 0
        self._elided_stream: Stream = "stdout"

    async def add(self, stream: Stream, text: str) -> None:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        room = min(int(self._tokens), self._limit - self.sent_bytes)
        marker = self._marker() if self.elided_chars else ""
        if marker:
            room = room - len(marker) if room >= RESUME_BYTES else 0
        shown = _utf8_prefix(text, room) if room > 0 else ""
        if shown:
            if marker:
                self.elided_chars = 0
                await self._send(stream, marker)
            await self._send(stream, shown)
        if len(shown) < len(text):
            self._elided_stream = stream
            self.elided_chars += len(text) - len(shown)
            self.total_elided_chars += len(text) - len(shown)

    async def finish(self) -> None:
        """Announce output elided since the last piece shown (outside the limit: one line)."""
        if self.elided_chars:
            marker, self.elided_chars = self._marker(), 0
            await self._send(self._elided_stream, marker)

    def _marker(self) -> str:
        return (
            f"\n[... {self.elided_chars:,} characters not shown live (more than "
            f"{self._rate // 1024} KiB/s); the result holds the head and tail]\n"
        )

    async def _send(self, stream: Stream, text: str) -> None:
        size = len(text.encode())
        self._tokens -= size
        self.sent_bytes += size
        await self._sink(stream, text)


class ReadPace:
    """Keeps the output read from one command under `rate` bytes/s after the first `free`."""

    def __init__(
        self,
        *,
        free: int = READ_FREE_BYTES,
        rate: int = READ_BYTES_PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._free = free
        self._rate = rate
        self._clock = clock
        self._start = clock()
        self.read_bytes = 0

    def delay(self, size: int) -> float:
        """Count `size` more bytes read; the seconds to wait before reading on."""
        self.read_bytes += size
        allowed = self._free + (self._clock() - self._start) * self._rate
        return max(0.0, (self.read_bytes - allowed) / self._rate)


def _utf8_prefix(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` that is at most `max_bytes` in UTF-8."""
    piece = text[:max_bytes]  # a character is at least one byte
    encoded = piece.encode()
    if len(encoded) <= max_bytes:
        return piece
    return encoded[:max_bytes].decode(errors="ignore")
