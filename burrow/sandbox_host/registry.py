"""The sandboxes a host runs: who owns each, its access token, its deadline, its state.

Lifecycle in E2B's words: `running` until its timeout lapses (then killed: stopped and its
files deleted), `paused` (Burrow's hibernation: processes stop, files stay) until resumed
or killed. All state is in memory: a restarted host starts empty and removes what the
previous one left (the backend's `recover`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from burrow.sandbox.backend import Backend, NetworkPolicy, Sandbox, SandboxError
from burrow.sandbox_host.processes import ProcessTable

log = logging.getLogger(__name__)

State = Literal["running", "paused"]
REAP_INTERVAL_SECONDS = 1.0


@dataclass(frozen=True)
class HostLimits:
    max_sandboxes_per_key: int = 20  # live (running) sandboxes; paused ones do not count
    default_timeout: int = 300  # seconds, the SDK's default too
    max_timeout: int = 24 * 3600
    max_metadata_entries: int = 64
    max_env_entries: int = 256


class SandboxNotFound(Exception):
    pass


class LimitReached(Exception):
    pass


class WrongState(Exception):
    pass


@dataclass
class HostedSandbox:
    sandbox_id: str
    owner: str
    template_id: str
    access_token: str
    metadata: dict[str, str]
    envs: dict[str, str]
    network: NetworkPolicy
    started_at: float
    end_at: float
    sandbox: Sandbox
    auto_pause: bool = False  # at the timeout: pause (E2B's lifecycle autoPause), not kill
    state: State = "running"
    processes: ProcessTable = field(default_factory=ProcessTable)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    removed: bool = False  # killed (or timed out): streams that watch it end
    on_end: list[Callable[[], None]] = field(default_factory=list)  # run when paused or removed

    def ended(self) -> None:
        callbacks, self.on_end = self.on_end, []
        for callback in callbacks:
            callback()

    def token_matches(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(
            self.access_token.encode(), presented.encode()
        )


class Registry:
    def __init__(self, backend: Backend, limits: HostLimits) -> None:
        self.backend = backend
        self.limits = limits
        self._sandboxes: dict[str, HostedSandbox] = {}
        self._creating: dict[str, int] = {}  # per owner, creates in flight count to the cap
        self._reaper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for hosted in list(self._sandboxes.values()):
            await self._remove(hosted)

    def clamp_timeout(self, timeout: int | None) -> int:
        if timeout is None:
            return self.limits.default_timeout
        return max(1, min(int(timeout), self.limits.max_timeout))

    async def create(
        self,
        owner: str,
        *,
        template_id: str,
        timeout: int | None,
        metadata: dict[str, str],
        envs: dict[str, str],
        network: NetworkPolicy | None,
        auto_pause: bool = False,
    ) -> HostedSandbox:
        live = sum(1 for s in self._sandboxes.values() if s.owner == owner and s.state == "running")
        if live + self._creating.get(owner, 0) >= self.limits.max_sandboxes_per_key:
            raise LimitReached(
                f"This API key has {self.limits.max_sandboxes_per_key} running sandboxes, the "
                "host's cap (BURROW_SANDBOX_HOST_MAX_SANDBOXES): kill or pause one first."
            )
        sandbox_id = "i" + secrets.token_hex(10)
        self._creating[owner] = self._creating.get(owner, 0) + 1
        try:
            sandbox = await self.backend.create(sandbox_id, network=network)
        except BaseException:
            with contextlib.suppress(SandboxError):
                await self.backend.destroy(sandbox_id)
            raise
        finally:
            self._creating[owner] -= 1
        now = time.time()
        hosted = HostedSandbox(
            sandbox_id=sandbox_id,
            owner=owner,
            template_id=template_id,
            access_token=secrets.token_urlsafe(24),
            metadata=metadata,
            envs=envs,
            network=network or self.backend.network_plan(None).policy,
            started_at=now,
            end_at=now + self.clamp_timeout(timeout),
            sandbox=sandbox,
            auto_pause=auto_pause,
        )
        self._sandboxes[sandbox_id] = hosted
        return hosted

    def owned(self, owner: str, sandbox_id: str) -> HostedSandbox:
        """The sandbox if `owner` owns it; another key's sandbox is as absent as a missing one."""
        hosted = self._sandboxes.get(sandbox_id)
        if hosted is None or hosted.owner != owner:
            raise SandboxNotFound(f"Sandbox {sandbox_id} not found")
        return hosted

    def find(self, sandbox_id: str) -> HostedSandbox | None:
        """For envd traffic, which proves itself with the sandbox's access token instead."""
        return self._sandboxes.get(sandbox_id)

    def listed(self, owner: str) -> list[HostedSandbox]:
        return [s for s in self._sandboxes.values() if s.owner == owner]

    async def kill(self, owner: str, sandbox_id: str) -> None:
        await self._remove(self.owned(owner, sandbox_id))

    def set_timeout(self, owner: str, sandbox_id: str, timeout: int) -> None:
        hosted = self.owned(owner, sandbox_id)
        hosted.end_at = time.time() + self.clamp_timeout(timeout)

    async def pause(self, owner: str, sandbox_id: str) -> None:
        hosted = self.owned(owner, sandbox_id)
        async with hosted.lock:
            if hosted.state == "paused":
                raise WrongState(f"Sandbox {sandbox_id} is already paused")
            await hosted.processes.kill_all()
            hosted.ended()
            await hosted.sandbox.stop()  # hibernation: every process ends, files stay
            hosted.state = "paused"

    async def resume(self, owner: str, sandbox_id: str, timeout: int | None) -> HostedSandbox:
        """Wake a paused sandbox (or just extend a running one's deadline, as E2B's
        connect does)."""
        hosted = self.owned(owner, sandbox_id)
        async with hosted.lock:
            if hosted.state == "paused":
                live = sum(
                    1 for s in self._sandboxes.values() if s.owner == owner and s.state == "running"
                )
                if live >= self.limits.max_sandboxes_per_key:
                    raise LimitReached(
                        f"This API key has {self.limits.max_sandboxes_per_key} running "
                        "sandboxes, the host's cap: kill or pause one before resuming."
                    )
                hosted.sandbox = await self.backend.create(sandbox_id, network=hosted.network)
                hosted.state = "running"
            end_at = time.time() + self.clamp_timeout(timeout)
            hosted.end_at = max(hosted.end_at, end_at) if hosted.state == "running" else end_at
            return hosted

    async def _remove(self, hosted: HostedSandbox) -> None:
        self._sandboxes.pop(hosted.sandbox_id, None)
        hosted.removed = True
        async with hosted.lock:
            await hosted.processes.kill_all()
            hosted.ended()
            await self.backend.destroy(hosted.sandbox_id)

    async def _reap_forever(self) -> None:
        """Kill running sandboxes whose timeout lapsed (E2B's default end of life). Paused
        sandboxes wait for a resume or a kill."""
        while True:
            await asyncio.sleep(REAP_INTERVAL_SECONDS)
            now = time.time()
            for hosted in list(self._sandboxes.values()):
                if hosted.state == "running" and hosted.end_at <= now:
                    log.info("sandbox %s reached its timeout", hosted.sandbox_id)
                    try:
                        if hosted.auto_pause:
                            await self.pause(hosted.owner, hosted.sandbox_id)
                        else:
                            await self._remove(hosted)
                    except Exception:
                        log.exception("could not kill expired sandbox %s", hosted.sandbox_id)


current_sandbox: contextvars.ContextVar[HostedSandbox] = contextvars.ContextVar("current_sandbox")
"""The sandbox an envd request was routed to and authenticated for (set by the app)."""
