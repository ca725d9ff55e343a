"""Each conversation's sandbox: started on first use, hibernated when idle, woken on the
next access, its life recorded in the journal as `sandbox.status` events.

Hibernating stops every process and keeps the files; waking boots a fresh sandbox on the
same workspace and starts again the services the preview tool recorded. A sandbox that
runs a command is never hibernated under it. A boot that failed stays failed, with its
reason, until the user restarts the sandbox: nothing retries in a loop, and nothing ever
runs on the host instead. Restart and destroy kill the sandbox before they wait for its
lock, so nothing the sandbox does (say, stopping its agent) can hold them up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from burrow.runs.journal.events import EnvironmentBuild, SandboxStatusChanged, make
from burrow.runs.journal.journal import Journal
from burrow.runs.workspace.environments import (
    EnvironmentLayers,
    Environments,
    EnvironmentUnavailable,
    Stage,
)
from burrow.runs.workspace.quotas import (
    DiskCache,
    DiskQuotaExceeded,
    OwnerTally,
    SandboxQuotaExceeded,
)
from burrow.sandbox.backend import (
    Backend,
    ErrorCode,
    ExecExit,
    ExecRequest,
    NetworkPolicy,
    Sandbox,
    SandboxError,
    SandboxStatus,
    closing_exec,
)
from burrow.sandbox.terminals import Terminal, TerminalRegistry
from burrow.store.events import ConversationGone
from burrow.tools.preview import SERVICE_DIR, START, port_accepts, read_services

log = logging.getLogger(__name__)

DEFAULT_IDLE_SECONDS = 900.0


@dataclass(frozen=True)
class SandboxState:
    status: str  # "none" | "starting" | "ready" | "hibernated" | "failed"
    detail: str


class SandboxPool:
    def __init__(
        self,
        backend: Backend,
        journal: Journal,
        *,
        idle_seconds: float | None = DEFAULT_IDLE_SECONDS,
        owner_of: Callable[[str], Awaitable[str | None]] | None = None,
        max_per_owner: int = 0,
        for_commands: Callable[[str, Sandbox], Sandbox] = lambda cid, sandbox: sandbox,
        network_of: Callable[[str], Awaitable[NetworkPolicy | None]] | None = None,
        disk_mb_per_owner: int = 0,
        conversations_of: Callable[[str], Awaitable[list[str]]] | None = None,
        environments: Environments | None = None,
        environment_of: Callable[[str], Awaitable[str | None]] | None = None,
    ) -> None:
        self.backend = backend
        self.environments = environments
        self._environment_of = environment_of  # the conversation's, read at its first boot
        # What commands and terminals run on: the sandbox with the conversation's secrets.
        self._for_commands = for_commands
        self.idle_seconds = idle_seconds  # None or 0: never hibernate
        self.max_per_owner = max_per_owner  # live sandboxes per owner (needs owner_of); 0: any
        self._network_of = network_of  # the conversation's policy, read at each start
        # Disk all of an owner's workspaces may take (needs owner_of and conversations_of).
        self.disk_mb_per_owner = disk_mb_per_owner
        self._conversations_of = conversations_of
        # What else holds an owner's disk and goes first when it is full (kept setups);
        # set once those exist, as they are built on this pool.
        self.disk_cache: DiskCache | None = None
        self._live = OwnerTally(owner_of)  # from admission until it stops
        self.terminals = TerminalRegistry(on_activity=self.touch)
        self._journal = journal
        self._sandboxes: dict[str, Sandbox] = {}
        self._states: dict[str, SandboxState] = {}
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._starting: dict[str, asyncio.Future[Sandbox]] = {}
        self._last_used: dict[str, float] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._hibernating: set[asyncio.Task[None]] = set()

    def running(self, cid: str) -> Sandbox | None:
        sandbox = self._sandboxes.get(cid)
        return sandbox if sandbox is not None and sandbox.status == "ready" else None

    def state(self, cid: str) -> SandboxState:
        """What this server knows of the conversation's sandbox (none: never started here)."""
        state = self._states.get(cid, SandboxState("none", ""))
        sandbox = self._sandboxes.get(cid)
        if state.status == "ready" and sandbox is not None and sandbox.status != "ready":
            detail = getattr(sandbox, "detail", "") or "the sandbox stopped"
            return SandboxState("failed", detail)  # died under us; the next get() restarts
        return state

    def touch(self, cid: str) -> None:
        """Record use now: the idle timer counts from the last use."""
        self._last_used[cid] = time.monotonic()
        if self.idle_seconds and cid not in self._timers and cid in self._sandboxes:
            self._arm(cid, self.idle_seconds)

    async def get(self, cid: str) -> Sandbox:
        """The conversation's ready sandbox, starting or waking it when needed."""
        self.touch(cid)
        sandbox = self.running(cid)
        if sandbox is not None:
            return sandbox
        state = self._states.get(cid)
        if state is not None and state.status == "failed" and cid not in self._starting:
            raise SandboxError(
                ErrorCode.BOOT_FAILED,
                f"The sandbox failed to start: {state.detail.rstrip('.')}. "
                "Restart it (POST /api/conversations/{cid}/sandbox/restart) once that is fixed.",
            )
        starting = self._starting.get(cid)
        if starting is None:
            starting = asyncio.ensure_future(self._start_locked(cid))
            self._starting[cid] = starting
            starting.add_done_callback(lambda _: self._starting.pop(cid, None))
        # A caller that is cancelled (an interrupted run) must not abort a start that other
        # callers, or the next run, are waiting for.
        return await asyncio.shield(starting)

    async def commands(self, cid: str) -> Sandbox:
        """The sandbox as the conversation's commands and terminals see it (`get` is the
        bare one: files and previews)."""
        return self._for_commands(cid, await self.get(cid))

    async def open_terminal(self, cid: str, cols: int, rows: int) -> Terminal:
        sandbox = await self.commands(cid)
        return await self.terminals.open(cid, sandbox, cols, rows)

    async def _start_locked(self, cid: str) -> Sandbox:
        async with self._locks[cid]:
            sandbox = self.running(cid)
            if sandbox is not None:
                return sandbox
            return await self._start(cid)

    async def _start(self, cid: str) -> Sandbox:
        await self._admit(cid)
        previous = self._states.get(cid)
        waking = previous is not None and previous.status == "hibernated"
        what = "Waking the" if waking else f"Starting a {self.backend.name}"
        await self._status(cid, "starting", f"{what} sandbox")
        self._sandboxes.pop(cid, None)
        await self.terminals.close_all(cid)  # shells of a sandbox that died are gone
        try:
            policy = await self.network_of(cid)
            environment = await self._environment_key(cid)
            sandbox = await self.backend.create(cid, network=policy, environment=environment)
        except SandboxError as exc:
            self._live.release(cid)
            await self._status(cid, "failed", exc.message)
            raise
        self._sandboxes[cid] = sandbox
        # Resumed with its memory, services still listen: start only those that do not.
        resumed = waking and self.backend.capabilities.hibernation == "memory"
        detail = await self._start_services(self._for_commands(cid, sandbox), resumed)
        plan = self.backend.network_plan(policy)
        if plan.degraded:  # said where the user looks, not only in the server's log
            detail = "; ".join(part for part in (plan.detail, detail) if part)
        await self._status(cid, "ready", detail)
        self.touch(cid)
        return sandbox

    async def environment_of(self, cid: str) -> str | None:
        """The environment the conversation chose (None: the host's system)."""
        return await self._environment_of(cid) if self._environment_of is not None else None

    async def _environment_key(self, cid: str) -> str | None:
        """The build a first boot starts from, once it is built (the conversation's
        journal hears the build meanwhile); None when the sandbox has none to choose: no
        environment, or one it started on before, which the backend keeps it on."""
        name = await self.environment_of(cid)
        if name is None or self.environments is None:
            return None
        backend = self.backend
        if isinstance(backend, EnvironmentLayers) and backend.environment_build_of(cid) is not None:
            return None

        async def told(stage: Stage, detail: str) -> None:
            build = EnvironmentBuild(name=name, stage=stage, detail=detail)
            await self._journal.append(cid, make(build))

        try:
            return await self.environments.key_for(name, told)
        except EnvironmentUnavailable as exc:
            raise SandboxError(ErrorCode.BOOT_FAILED, exc.message) from None

    async def network_of(self, cid: str) -> NetworkPolicy | None:
        """The conversation's network policy (None: the backend's default)."""
        return await self._network_of(cid) if self._network_of is not None else None

    async def _start_services(self, sandbox: Sandbox, resumed: bool = False) -> str:
        """Start what `.burrow/services.json` records, as the preview tool would (after a
        resume, only the services not listening: the others never stopped)."""
        started, failed, running = [], [], []
        root = sandbox.workspace.rstrip("/")
        for service in await read_services(sandbox):
            if resumed and await _listening(sandbox, service.port):
                running.append(str(service.port))
                continue
            files = [f"{root}/{SERVICE_DIR}/{service.port}.{ext}" for ext in ("log", "exit", "pid")]
            request = ExecRequest(
                argv=["bash", "-c", START, "burrow-preview", service.command, *files],
                cwd=service.cwd,
                timeout=30,
            )
            exit_event: ExecExit | None = None
            try:
                async with closing_exec(sandbox.exec(request)) as events:
                    async for event in events:
                        if isinstance(event, ExecExit):
                            exit_event = event
            except SandboxError as exc:
                log.warning("service on port %d did not start: %s", service.port, exc.message)
            if exit_event is not None and exit_event.exit_code == 0:
                started.append(str(service.port))
            else:
                failed.append(str(service.port))
        parts = []
        if running:
            parts.append(f"resumed with the service(s) on port(s) {', '.join(running)} running")
        if started:
            parts.append(f"services started again on port(s) {', '.join(started)}")
        if failed:
            parts.append(f"could not start the service(s) on port(s) {', '.join(failed)}")
        return "; ".join(parts)

    async def hibernate(self, cid: str, detail: str | None = None) -> bool:
        """Stop the sandbox's processes, keep its files; False if it is busy or not running."""
        async with self._locks[cid]:
            sandbox = self.running(cid)
            if sandbox is None:
                return False
            try:
                if await sandbox.running_commands():
                    return False
            except SandboxError:
                pass  # a broken agent is stopped all the same
            self._cancel_timer(cid)
            self._sandboxes.pop(cid, None)
            self._live.release(cid)
            await self.terminals.close_all(cid)
            await self.backend.hibernate(sandbox)
            minutes = (self.idle_seconds or 0) / 60
            detail = detail or f"idle for {minutes:g} min; files kept, wakes on next use"
            await self._status(cid, "hibernated", detail)
            return True

    async def restart(self, cid: str) -> Sandbox:
        await self._kill(cid)
        async with self._locks[cid]:
            self._cancel_timer(cid)
            old = self._sandboxes.pop(cid, None)
            await self.terminals.close_all(cid)
            if old is not None:
                await old.stop()
            self._states.pop(cid, None)
            return await self._start(cid)

    async def copy_root(self, source: str, target: str) -> None:
        """A fork's sandbox, before its first boot, gets what the source installed."""
        await self.backend.copy_root(source, target)

    async def destroy(self, cid: str) -> None:
        await self._kill(cid)
        async with self._locks[cid]:
            self._cancel_timer(cid)
            self._sandboxes.pop(cid, None)
            self._live.release(cid)
            await self.terminals.close_all(cid)
            await self.backend.destroy(cid)
        self._locks.pop(cid, None)
        self._states.pop(cid, None)
        self._last_used.pop(cid, None)
        self._live.forget(cid)

    async def _kill(self, cid: str) -> None:
        """Kill the sandbox before waiting for its lock: whoever holds the lock is then
        waiting on a dead agent, which fails at once instead of at its deadline."""
        sandbox = self._sandboxes.get(cid)
        if sandbox is not None:
            await sandbox.stop()

    async def recover(self) -> None:
        """What a dead server left of its sandboxes is reaped (see `Backend.recover`)."""
        await self.backend.recover()

    async def close(self) -> None:
        for cid in list(self._timers):
            self._cancel_timer(cid)
        for task in list(self._hibernating):
            task.cancel()
        await self.terminals.close_everything()
        self._sandboxes.clear()
        self._live.clear()
        await self.backend.close()

    async def _admit(self, cid: str) -> None:
        """Count this sandbox against its owner's cap. At the cap, hibernate the owner's
        least recently used sandbox that runs no command (files kept; it wakes on next use),
        as a person juggling conversations expects; refuse only when all of them are busy.
        Counting and admitting happen with no await between them, so concurrent starts
        cannot all slip under the cap. First, the owner's workspaces must be under their
        disk quota: a sandbox can grow only while it runs, so at worst an owner holds the
        quota plus what their live sandboxes wrote since they started."""
        if not (self.max_per_owner or self.disk_mb_per_owner):
            return
        owner = await self._live.owner(cid)
        if owner is None:
            return  # not a conversation (any more): nothing to count it against
        if self.disk_mb_per_owner and self._conversations_of is not None:
            await self._check_disk(owner)
        if not self.max_per_owner:
            return
        tried: set[str] = set()
        while True:
            others = [c for c in self._live.held_by(owner, besides=cid) if not self._stopped(c)]
            if len(others) < self.max_per_owner:
                self._live.hold(cid, owner)
                return
            idle = [c for c in others if c not in tried and self.running(c) is not None]
            if not idle:
                raise SandboxQuotaExceeded(self.max_per_owner)
            victim = min(idle, key=lambda c: self._last_used.get(c, 0.0))
            tried.add(victim)
            await self.hibernate(
                victim,
                f"hibernated to make room for another of your sandboxes (the limit is "
                f"{self.max_per_owner} live at once); files kept, wakes on next use",
            )

    async def _check_disk(self, owner: str) -> None:
        """Refuse while the owner's conversations and kept setups hold their disk quota;
        kept setups (a cache) are dropped first, the least recently used first."""
        assert self._conversations_of is not None
        limit = self.disk_mb_per_owner << 20
        cids = await self._conversations_of(owner)
        kept = await self.disk_cache.kept_by(owner) if self.disk_cache else []
        used = await asyncio.to_thread(self._disk_used, [*cids, *kept])
        while used >= limit and kept and self.disk_cache is not None:
            dropped = kept.pop(0)
            freed = await asyncio.to_thread(self._disk_used, [dropped])
            await self.disk_cache.drop(dropped)
            log.info("dropped %s's kept %s (%d MiB) to make room", owner, dropped, freed >> 20)
            used -= freed
        if used >= limit:
            raise DiskQuotaExceeded(used, self.disk_mb_per_owner)

    def _disk_used(self, cids: list[str]) -> int:
        return sum(self.backend.disk_used(cid) or 0 for cid in cids)

    def _stopped(self, cid: str) -> bool:
        """It died under us: no longer live, though still on the books until woken."""
        sandbox = self._sandboxes.get(cid)
        return sandbox is not None and sandbox.status != "ready"

    def _arm(self, cid: str, delay: float) -> None:
        loop = asyncio.get_running_loop()
        self._timers[cid] = loop.call_later(delay, self._on_timer, cid)

    def _cancel_timer(self, cid: str) -> None:
        timer = self._timers.pop(cid, None)
        if timer is not None:
            timer.cancel()

    def _on_timer(self, cid: str) -> None:
        self._timers.pop(cid, None)
        if self.idle_seconds is None or cid not in self._sandboxes:
            return
        idle = time.monotonic() - self._last_used.get(cid, 0.0)
        if idle < self.idle_seconds:
            self._arm(cid, self.idle_seconds - idle)
            return
        task = asyncio.create_task(self._hibernate_when_idle(cid))
        self._hibernating.add(task)
        task.add_done_callback(self._hibernating.discard)

    async def _hibernate_when_idle(self, cid: str) -> None:
        try:
            hibernated = await self.hibernate(cid)
        except ConversationGone:
            return  # deleted while it hibernated: destroy() does the rest
        except Exception:
            log.exception("hibernating the sandbox of %s failed", cid)
            hibernated = False
        if not hibernated and self.idle_seconds and cid in self._sandboxes:
            self._arm(cid, self.idle_seconds)  # busy: look again after another idle period

    def statuses(self) -> dict[str, int]:
        """How many conversations' sandboxes are in each status (for /metrics)."""
        counts: dict[str, int] = {}
        for state in self._states.values():
            counts[state.status] = counts.get(state.status, 0) + 1
        return counts

    async def _status(self, cid: str, status: SandboxStatus, detail: str) -> None:
        self._states[cid] = SandboxState(status, detail)
        await self._journal.append(cid, make(SandboxStatusChanged(status=status, detail=detail)))


async def _listening(sandbox: Sandbox, port: int) -> bool:
    try:
        return await port_accepts(sandbox, port)
    except SandboxError:
        return False  # started again: a second copy fails to bind and says so in its log
