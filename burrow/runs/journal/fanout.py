"""Cross-replica fan-out: events another replica committed reach this one's subscribers.

A notification says only "conversation C has events first..last, committed by R". If
anyone here follows C, one reader per conversation fetches what is new from the store
and hands it to the journal, which pushes it to every subscriber as it does its own
commits. Notifications for conversations nobody here follows cost a dict lookup.
"""

from __future__ import annotations

import asyncio
import logging

from burrow.runs.journal.journal import PAGE_BYTES, PAGE_EVENTS, Journal

log = logging.getLogger(__name__)

SMALL_READ = 64  # events read without sizing them first (a commit's worth, usually)


class CrossReplicaFeed:
    def __init__(self, journal: Journal, replica: str) -> None:
        self._journal = journal
        self._replica = replica
        self._wanted: dict[str, tuple[int, int]] = {}  # cid -> (first, last) still to read
        self._readers: dict[str, asyncio.Task[None]] = {}

    def notified(self, payload: str) -> None:
        """A `burrow_events` payload: "<cid> <first> <last> <replica>"."""
        cid, first_text, last_text, replica = payload.split(" ", 3)
        if replica == self._replica or not self._journal.watching(cid):
            return  # ours went out in-process; nobody here follows the other
        first, last = int(first_text), int(last_text)
        if last <= self._journal.pushed(cid):
            return
        wanted = self._wanted.get(cid)
        self._wanted[cid] = (first, last) if wanted is None else (wanted[0], max(wanted[1], last))
        if cid not in self._readers:
            self._readers[cid] = asyncio.create_task(self._read(cid), name=f"fan-out {cid}")

    async def _read(self, cid: str) -> None:
        try:
            while (wanted := self._wanted.pop(cid, None)) is not None:
                first, last = wanted
                # From what was pushed here, or (nothing yet) from the notified batch: a
                # subscriber further behind heals its own gap from the store.
                after = self._journal.pushed(cid) or first - 1
                while after < last and self._journal.watching(cid):
                    # A commit's few events in one query; a long way behind, by the page
                    # (sized first, a second query, so a page never holds more than that).
                    count = last - after
                    if count <= SMALL_READ:
                        page = await self._journal.read(cid, after, count)
                    else:
                        page = await self._journal.read(cid, after, PAGE_EVENTS, PAGE_BYTES)
                    if not page:
                        break
                    self._journal.deliver(cid, page)
                    after = page[-1].seq
        except Exception:
            # The store failed the read: subscribers see the events on their next heal.
            log.exception("cross-replica fan-out of %s failed", cid)
            self._journal.resync()
        finally:
            del self._readers[cid]

    async def close(self) -> None:
        for task in list(self._readers.values()):
            task.cancel()
        if self._readers:
            await asyncio.wait(list(self._readers.values()))
