"""The conversation journal: numbered, committed, then pushed (DESIGN.md §4).

`append` commits before anything is published, and publishes in seq order. Concurrent
appends to one conversation are grouped into one transaction (group commit), which is
what lets a busy run stream thousands of events a second from SQLite.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType

from burrow.runs.journal import events as ev
from burrow.runs.journal.events import EventType
from burrow.store.events import EventStore
from burrow.store.records import Event, NewEvent, ProjectionChange

log = logging.getLogger(__name__)

SUBSCRIBER_BUFFER = 2048
SUBSCRIBER_BUFFER_CHARS = 4 * 1024 * 1024  # of event data: bulky events lag a reader sooner
# History is read and sent a page at a time: a long or bulky journal never sits in memory.
PAGE_EVENTS = 1000
PAGE_BYTES = 1024 * 1024

# Writes a batch of consecutive events to a caught-up reader's client, or nothing (False).
DirectWrite = Callable[[Sequence[Event]], bool]


class Subscription:
    """A live feed of one conversation's committed events.

    A subscriber that falls `SUBSCRIBER_BUFFER` events (or `SUBSCRIBER_BUFFER_CHARS` of
    their data) behind stops receiving and is marked `lagged`; it must then catch up from
    the store. Slow readers never slow writers.
    Waking a reader costs no task: thousands of SSE clients may wait on one conversation.

    While its reader waits, caught up, a batch can skip the reader altogether: `direct`
    writes it synchronously from the fan-out (one call per client, no task wake-up), and
    only when it cannot (the client's socket is full) does the batch go to the buffer.
    """

    def __init__(self, journal: Journal, cid: str) -> None:
        self._journal = journal
        self.cid = cid
        self._buffer: deque[Event] = deque()
        self._buffered_chars = 0
        self._wakeup = asyncio.Event()
        self.lagged = False
        self.closed = False
        self._direct: DirectWrite | None = None
        self._next_seq = 0  # the first seq `direct` may write: no gap, no duplicate
        self.delivered = 0  # the last seq `direct` wrote

    def push(self, event: Event) -> None:
        self.push_batch((event,))

    def push_batch(self, batch: Sequence[Event]) -> None:
        """Events of consecutive seqs, committed together: one write for a caught-up reader."""
        if self.lagged or not batch:
            return
        if self._direct is not None and batch[0].seq == self._next_seq and not self._buffer:
            if self._direct(batch):
                self._next_seq = batch[-1].seq + 1
                self.delivered = batch[-1].seq
                return
            self._direct = None  # the reader's own task writes it, and what follows
        for event in batch:
            size = len(event.data_json)
            full = self._buffered_chars + size > SUBSCRIBER_BUFFER_CHARS and bool(self._buffer)
            if len(self._buffer) >= SUBSCRIBER_BUFFER or full:
                self.lagged = True
                break
            self._buffer.append(event)
            self._buffered_chars += size
        self._wakeup.set()

    def catch_up(self) -> None:
        """Make the reader catch up from the store (events may have passed it by)."""
        self.lagged = True
        self._wakeup.set()

    def drain(self) -> list[Event]:
        """Everything buffered so far, without waiting."""
        batch = list(self._buffer)
        self._buffer.clear()
        self._buffered_chars = 0
        return batch

    async def wait(
        self, timeout: float, direct: DirectWrite | None = None, after: int = 0
    ) -> list[Event]:
        """The next events; an empty list when `timeout` passes first (or on close).

        Meanwhile `direct`, if given, may write batches of the events after seq `after`
        itself (`delivered` says how far it got); it returns False when it wrote nothing.
        """
        if not self._buffer and not self.lagged and not self.closed:
            self._wakeup.clear()
            self._direct, self._next_seq = direct, after + 1
            timer = asyncio.get_running_loop().call_later(timeout, self._wakeup.set)
            try:
                await self._wakeup.wait()
            finally:
                timer.cancel()
                self._direct = None
        return self.drain()

    def close(self) -> None:
        self._journal._unsubscribe(self)
        self.closed = True
        self._wakeup.set()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@dataclass
class _Pending:
    batch: Sequence[NewEvent]
    done: asyncio.Future[list[Event]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


# Events that do not move a conversation up the list: the sandbox waking or sleeping.
_NOT_ACTIVITY = frozenset({EventType.SANDBOX_STATUS})


def projection_change(batch: Sequence[NewEvent]) -> ProjectionChange:
    """What these events do to the conversation row (status, sandbox status, usage)."""
    change = ProjectionChange()
    for e in batch:
        if e.type not in _NOT_ACTIVITY:
            change.activity = True
        if e.type == EventType.RUN_STARTED or e.type == EventType.APPROVAL_RESOLVED:
            change.status = "running"
        elif e.type == EventType.APPROVAL_REQUESTED:
            change.status = "waiting_approval"
        elif e.type == EventType.RUN_FINISHED:
            # At rest either way; "failed" is kept so the list can say the last run failed.
            change.status = "failed" if e.data.get("status") == "failed" else "idle"
        elif e.type == EventType.SANDBOX_STATUS:
            change.sandbox_status = str(e.data["status"])
        elif e.type == EventType.USAGE:
            change.usage += ev.Usage.read(e.data)
    return change


class Journal:
    def __init__(self, store: EventStore, *, shared: bool = False) -> None:
        self._store = store
        self._subscribers: dict[str, set[Subscription]] = defaultdict(set)
        # `shared`: other replicas commit to these conversations too, and their events
        # reach this process's subscribers through `deliver`. The highest seq pushed per
        # watched conversation keeps the two sources in order (None: one process only).
        self._pushed: dict[str, int] | None = {} if shared else None
        # Several replicas: the replica id a conversation's appends are fenced with while
        # this replica holds its run lease (the runtime sets it; EventStore.append).
        self.fence: Callable[[str], str | None] = lambda _cid: None
        self._pending: dict[str, list[_Pending]] = defaultdict(list)
        self._writing: set[str] = set()
        # Called with each committed batch, after its subscribers (telemetry): must be quick
        # and must not fail; a failure is logged, never the journal's.
        self.observers: list[Callable[[Sequence[Event]], None]] = []

    async def append(self, cid: str, *batch: NewEvent) -> list[Event]:
        """Commit `batch` with the next seqs of `cid`, publish it, and return it."""
        pending = _Pending(batch)
        self._pending[cid].append(pending)
        if cid not in self._writing:
            self._writing.add(cid)
            asyncio.get_running_loop().create_task(self._write(cid))
        return await asyncio.shield(pending.done)

    async def _write(self, cid: str) -> None:
        # Whoever finds the queue idle becomes its writer and drains it, a group at a time.
        try:
            while self._pending[cid]:
                group = self._pending.pop(cid)
                merged = [e for p in group for e in p.batch]
                try:
                    stored = await self._store.append(
                        cid, merged, projection_change(merged), self.fence(cid)
                    )
                except BaseException as exc:
                    for p in group:
                        if not p.done.done():
                            p.done.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                self._push(cid, stored)
                for observe in self.observers:
                    try:
                        observe(stored)
                    except Exception:
                        log.exception("A journal observer failed on %d events", len(stored))
                offset = 0
                for p in group:
                    p.done.set_result(stored[offset : offset + len(p.batch)])
                    offset += len(p.batch)
        finally:
            self._writing.discard(cid)
            if self._pending.get(cid):
                # Cancelled mid-drain (shutdown): hand the rest to a new writer.
                self._writing.add(cid)
                asyncio.get_running_loop().create_task(self._write(cid))
            else:
                self._pending.pop(cid, None)

    async def last_of(self, cids: Sequence[str], *types: EventType) -> dict[str, Event]:
        """Each conversation's latest committed event of one of `types`."""
        return await self._store.last_of(cids, [t.value for t in types])

    async def read(
        self, cid: str, after: int = 0, limit: int | None = None, max_bytes: int | None = None
    ) -> list[Event]:
        return await self._store.read(cid, after, limit, max_bytes)

    async def run_start(self, run_id: str) -> tuple[str, int] | None:
        """(conversation, seq of its run.started) of a run, or None."""
        return await self._store.run_start(run_id)

    async def pages(self, cid: str, after: int = 0) -> AsyncIterator[list[Event]]:
        """Every stored event after `after`, in pages of at most PAGE_EVENTS / PAGE_BYTES."""
        while page := await self.read(cid, after, PAGE_EVENTS, PAGE_BYTES):
            yield page
            after = page[-1].seq

    async def follow(
        self,
        cid: str,
        after: int = 0,
        heartbeat: float = 15.0,
        direct: DirectWrite | None = None,
    ) -> AsyncIterator[list[Event]]:
        """Every event after `after`, then live ones: no gap, no duplicate, in order.

        Yields events in batches (whatever arrived together), and an empty batch when
        `heartbeat` seconds pass without any. Subscribing before reading history is what
        closes the window between the two. With `direct`, live events that arrive while
        the consumer waits for more are written by `direct` instead of yielded (see
        `Subscription`); it is only asked once the consumer has handled every earlier
        batch, so the two paths never reorder.
        """
        with self.subscribe(cid) as sub:
            last = after
            async for page in self.pages(cid, last):
                last = page[-1].seq
                yield page
            while not sub.closed:
                batch = await sub.wait(heartbeat, direct, last)
                last = max(last, sub.delivered)
                fresh = [e for e in batch if e.seq > last]  # history already covered the rest
                if sub.lagged or (fresh and fresh[0].seq != last + 1):
                    # Dropped while lagging (or, never expected, a gap): catch up from the store.
                    sub.lagged = False
                    async for page in self.pages(cid, last):
                        last = page[-1].seq
                        yield page
                    continue
                if fresh:
                    last = fresh[-1].seq
                if fresh or not batch:
                    yield fresh

    def _push(self, cid: str, events: Sequence[Event]) -> None:
        subs = self._subscribers.get(cid)
        if not subs:
            return
        if self._pushed is not None:
            # Ours and other replicas' commits arrive by two paths: push each seq once, in
            # order. One skipped here was pushed already; a gap heals in `follow`.
            mark = self._pushed.get(cid, 0)
            if events[0].seq <= mark:
                events = [e for e in events if e.seq > mark]
                if not events:
                    return
            self._pushed[cid] = events[-1].seq
        batch = list(events)  # the same list for all: encoded once (api/direct_write)
        for sub in tuple(subs):
            sub.push_batch(batch)

    # Cross-replica fan-out (runs/journal/fanout.py): what another replica committed, read back
    # from the store, goes to this process's subscribers like our own commits.

    def watching(self, cid: str) -> bool:
        return bool(self._subscribers.get(cid))

    def pushed(self, cid: str) -> int:
        """The last seq of `cid` pushed to subscribers here (0: none yet)."""
        return 0 if self._pushed is None else self._pushed.get(cid, 0)

    def deliver(self, cid: str, events: Sequence[Event]) -> None:
        """Push events another replica committed (read from the store, in seq order)."""
        if events:
            self._push(cid, events)

    def resync(self) -> None:
        """Notifications may have been missed: every subscriber catches up from the store."""
        for subs in self._subscribers.values():
            for sub in subs:
                sub.catch_up()

    def subscribe(self, cid: str) -> Subscription:
        sub = Subscription(self, cid)
        self._subscribers[cid].add(sub)
        return sub

    def close_subscribers(self, cid: str) -> None:
        """End every live feed of `cid` (the conversation was deleted)."""
        for sub in tuple(self._subscribers.get(cid, ())):
            sub.close()

    def _unsubscribe(self, sub: Subscription) -> None:
        subs = self._subscribers.get(sub.cid)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subscribers[sub.cid]
                if self._pushed is not None:
                    self._pushed.pop(sub.cid, None)
