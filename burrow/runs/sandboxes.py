"""Each conversation's sandbox, started on first use, its life recorded in the journal."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from burrow.runs.events import EventType, make
from burrow.runs.journal import Journal
from burrow.sandbox.backend import Backend, Sandbox, SandboxError


class SandboxPool:
    def __init__(self, backend: Backend, journal: Journal) -> None:
        self.backend = backend
        self._journal = journal
        self._sandboxes: dict[str, Sandbox] = {}
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._starting: dict[str, asyncio.Future[Sandbox]] = {}

    def running(self, cid: str) -> Sandbox | None:
        sandbox = self._sandboxes.get(cid)
        return sandbox if sandbox is not None and sandbox.status == "ready" else None

    async def get(self, cid: str) -> Sandbox:
        """The conversation's ready sandbox, starting (or restarting) it when needed."""
        sandbox = self.running(cid)
        if sandbox is not None:
            return sandbox
        starting = self._starting.get(cid)
        if starting is None:
            starting = asyncio.ensure_future(self._start_locked(cid))
            self._starting[cid] = starting
            starting.add_done_callback(lambda _: self._starting.pop(cid, None))
        # A caller that is cancelled (an interrupted run) must not abort a start that other
        # callers, or the next run, are waiting for.
        return await asyncio.shield(starting)

    async def _start_locked(self, cid: str) -> Sandbox:
        async with self._locks[cid]:
            sandbox = self.running(cid)
            if sandbox is not None:
                return sandbox
            return await self._start(cid)

    async def _start(self, cid: str) -> Sandbox:
        await self._status(cid, "starting", f"Starting a {self.backend.name} sandbox")
        try:
            sandbox = await self.backend.create(cid)
        except SandboxError as exc:
            await self._status(cid, "failed", exc.message)
            raise
        self._sandboxes[cid] = sandbox
        await self._status(cid, "ready", "")
        return sandbox

    async def restart(self, cid: str) -> Sandbox:
        async with self._locks[cid]:
            old = self._sandboxes.pop(cid, None)
            if old is not None:
                await old.stop()
            return await self._start(cid)

    async def destroy(self, cid: str) -> None:
        async with self._locks[cid]:
            self._sandboxes.pop(cid, None)
            await self.backend.destroy(cid)
        self._locks.pop(cid, None)

    async def close(self) -> None:
        self._sandboxes.clear()
        await self.backend.close()

    async def _status(self, cid: str, status: str, detail: str) -> None:
        await self._journal.append(
            cid, make(EventType.SANDBOX_STATUS, None, status=status, detail=detail)
        )
