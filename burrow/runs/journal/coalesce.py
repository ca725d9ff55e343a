"""Merging bursts of small text events (model deltas, tool output) before they are written.

A model streams a token at a time and a build prints a line at a time; writing each as its
own event would cost a transaction apiece. Adjacent pieces of the same kind are merged for
up to `window` seconds, so what is shown live and what is replayed stay the same events.
A merged event holds at most `MAX_EVENT_CHARS` of text; more starts the next event, so no
single row (nor SSE frame, nor JSON page entry) grows with what a model or command emits.
"""

from __future__ import annotations

import asyncio

from burrow.runs.journal.events import TextDelta, ThinkingDelta, ToolOutput, make, nested
from burrow.runs.journal.journal import Journal
from burrow.store.records import NewEvent

MAX_EVENT_CHARS = 64 * 1024


Piece = TextDelta | ThinkingDelta | ToolOutput


def _same_stream(a: Piece, b: Piece) -> bool:
    """Whether `b` continues `a`: the same type, call and stream."""
    if isinstance(a, ToolOutput) and isinstance(b, ToolOutput):
        return a.call_id == b.call_id and a.stream == b.stream
    return type(a) is type(b) and not isinstance(a, ToolOutput)


class Coalescer:
    def __init__(
        self,
        journal: Journal,
        cid: str,
        run_id: str,
        window: float = 0.03,
        parent_call_id: str | None = None,  # a subagent's: its events are tagged with it
    ) -> None:
        self._journal = journal
        self._parent_call_id = parent_call_id
        self._cid = cid
        self._run_id = run_id
        self._window = window
        # Each piece: its first payload (what the merged event is, apart from its text) and
        # the texts merged into it.
        self._pieces: list[tuple[Piece, list[str]]] = []
        self._last_chars = 0  # text in the last piece
        self._timer: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Task[None] | None = None

    def add(self, piece: Piece) -> None:
        text = piece.text
        if not text:
            return
        last = self._pieces[-1] if self._pieces else None
        room = MAX_EVENT_CHARS - self._last_chars
        if last is not None and _same_stream(last[0], piece) and room > 0:
            last[1].append(text[:room])
            self._last_chars += len(last[1][-1])
            text = text[room:]
        while text:
            self._pieces.append((piece, [text[:MAX_EVENT_CHARS]]))
            self._last_chars = len(text[:MAX_EVENT_CHARS])
            text = text[MAX_EVENT_CHARS:]
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._window, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        previous = self._flushing
        self._flushing = asyncio.ensure_future(self._flush_after(previous))

    async def _flush_after(self, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await previous  # keep batches in order
        await self._write()

    def _drain(self) -> list[NewEvent]:
        pieces, self._pieces = self._pieces, []
        self._last_chars = 0
        events = [make(p.model_copy(update={"text": "".join(t)}), self._run_id) for p, t in pieces]
        if self._parent_call_id is not None:
            events = [nested(e, self._parent_call_id) for e in events]
        return events

    async def _write(self) -> None:
        batch = self._drain()
        if batch:
            await self._journal.append(self._cid, *batch)

    async def take(self) -> list[NewEvent]:
        """Everything buffered, for the caller to write ahead of its own event in the same
        transaction (one commit instead of two); a write already under way finishes first."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flushing is not None:
            flushing, self._flushing = self._flushing, None
            await flushing
        return self._drain()

    async def flush(self) -> None:
        """Write everything buffered now."""
        batch = await self.take()
        if batch:
            await self._journal.append(self._cid, *batch)
