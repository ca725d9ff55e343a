"""The model contexts of recently active conversations, kept between their runs.

A context is a projection of the journal (runs/loop/context.py): kept, a run only reads
the events that are new since the last one; evicted, the next run reads them all again.
"""

from __future__ import annotations

from burrow.runs.journal.journal import Journal
from burrow.runs.loop.context import ModelContext

CONTEXT_CACHE_SIZE = 256  # model contexts of recently active conversations kept in memory


class Contexts:
    def __init__(self, journal: Journal, size: int = CONTEXT_CACHE_SIZE) -> None:
        self._journal = journal
        self._size = size
        self._kept: dict[str, ModelContext] = {}  # insertion order = recency

    async def load(self, cid: str) -> ModelContext:
        """The conversation's context, up to date with its journal; the caller owns it
        until it `keep`s it again (a run, or a compaction)."""
        context = self._kept.pop(cid, None) or ModelContext()
        for event in await self._journal.read(cid, context.last_seq):
            context.apply(event)
        return context

    def keep(self, cid: str, context: ModelContext) -> None:
        self._kept[cid] = context
        while len(self._kept) > self._size:  # least recently used goes first
            del self._kept[next(iter(self._kept))]

    def forget(self, cid: str) -> None:
        self._kept.pop(cid, None)
