"""One replica among several on one PostgreSQL (docs/scale-out.md).

What it adds to a process: its LISTEN connection (other replicas' commits reach this one's
subscribers; a person's actions reach the runs this one owns) and the lease loop, which every third
of the lease time renews this replica's run leases, notices any it lost, and claims and
repairs the runs of replicas that stopped renewing theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket

from burrow.runs.conversations.actions import OwnerActions
from burrow.runs.conversations.runtime import Runtime
from burrow.runs.journal.fanout import CrossReplicaFeed
from burrow.runs.journal.journal import Journal
from burrow.store.commands import CommandStore
from burrow.store.leases import LeaseStore
from burrow.store.notify import COMMANDS, EVENTS, Listener

log = logging.getLogger(__name__)

COMMANDS_KEPT_SECONDS = 600.0  # a command nobody came back for (its asker died) is dropped


def default_replica_id() -> str:
    """host:pid:random: unique per process, so a restarted replica is a new one."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Replica:
    def __init__(
        self,
        runtime: Runtime,
        journal: Journal,
        leases: LeaseStore,
        commands: CommandStore,
        dsn: str,
    ) -> None:
        self.id = leases.replica
        self._runtime = runtime
        self._leases = leases
        self.feed = CrossReplicaFeed(journal, self.id)
        self.owner_actions = OwnerActions(runtime, commands, leases)
        self._commands = commands
        self._journal = journal
        self.listener = Listener(
            dsn,
            {EVENTS: self.feed.notified, COMMANDS: self.owner_actions.notified},
            on_connect=self._reconnected,
            name=f"burrow-listen {self.id}",
        )
        self._loop: asyncio.Task[None] | None = None

    def _reconnected(self) -> None:
        if self.listener.connections > 1:
            self._journal.resync()  # commits made while the connection was down
        self.owner_actions.reconnected()

    async def start(self) -> None:
        """Listen (waiting for the connection), then keep the leases."""
        await self.listener.start()
        self._loop = asyncio.create_task(self._keep_leases(), name="burrow leases")

    async def _keep_leases(self) -> None:
        period = self._leases.seconds / 3
        pruned_at = 0.0
        while True:
            await asyncio.sleep(period)
            try:
                await self.sweep()
                now = asyncio.get_running_loop().time()
                if now - pruned_at > COMMANDS_KEPT_SECONDS:
                    pruned_at = now
                    await self._commands.prune(COMMANDS_KEPT_SECONDS)
            except Exception:  # the database is away: try again next period
                log.exception("run lease upkeep failed")

    async def sweep(self) -> None:
        """Renew ours, stop runs whose lease we lost, repair the lapsed ones of others."""
        runtime, leases = self._runtime, self._runtime.leases
        ours, wanted = leases.held(), leases.held(taking=True)
        held = await self._leases.renew()
        for cid in ours - held:
            if cid in leases.held():  # not released meanwhile: taken from us
                await runtime.lease_lost(cid)
        for cid in held - wanted - leases.held(taking=True):
            await self._leases.release(cid)  # a row no run of ours stands behind
        for cid in await self._leases.claim_lapsed():
            log.warning("the run lease of %s lapsed; repairing its run here", cid)
            await self._runtime.take_over(cid)

    async def close(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        await self.owner_actions.close()
        await self.feed.close()
        await self.listener.close()
