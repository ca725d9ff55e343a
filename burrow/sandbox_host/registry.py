"""The sandboxes a host runs: who owns each, its access token, its deadline, its state.

Lifecycle in E2B's words: `running` until its timeout lapses (then killed: stopped and its
files deleted), `paused` (Burrow's hibernation: processes stop, files stay) until resumed
or killed. With a ledger (`ledger.py`) the host's record survives a restart, which pauses
every sandbox; without one a stopping host kills its sandboxes.
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
from pathlib import Path
from typing import Any, Literal

from burrow.sandbox.backend import (
    Backend,
    ErrorCode,
    ExecExit,
    ExecRequest,
    NetworkPolicy,
    Sandbox,
    SandboxError,
    closing_exec,
)
from burrow.sandbox_host import ledger, users
from burrow.sandbox_host.network_options import SandboxNetwork, allowlist_of
from burrow.sandbox_host.processes import ProcessTable
from burrow.sandbox_host.template_recipe import HOME_SEED

log = logging.getLogger(__name__)

State = Literal["running", "paused"]
REAP_INTERVAL_SECONDS = 1.0


@dataclass(frozen=True)
class HostLimits:
    max_sandboxes_per_key: int = 20  # live (running) sandboxes; paused ones do not count
    max_paused_per_key: int = 100  # paused ones keep their files: a disk cap of its own
    default_timeout: int = 300  # seconds, the SDK's default too
    max_timeout: int = 24 * 3600
    max_metadata_entries: int = 64
    max_env_entries: int = 256
    # What get_info reports of each sandbox's size (0: not limited on this host).
    cpu_count: int = 1
    memory_mb: int = 0
    disk_mb: int = 0


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
    access_token: str  # opens envd and every port
    traffic_token: str  # opens the ports other than envd's (previews)
    metadata: dict[str, str]
    envs: dict[str, str]
    network: NetworkPolicy
    started_at: float
    end_at: float
    handle: Sandbox | None  # None: paused since the host started, not booted yet
    auto_pause: bool = False  # at the timeout: pause (E2B's lifecycle autoPause), not kill
    allow_out: list[str] | None = None  # egress only to these names (E2B network.allowOut)
    public_traffic: bool = False  # its ports answer without the traffic token
    host_mask: str | None = None  # the Host its services see (E2B network.maskRequestHost)
    workdir: str | None = None  # where its commands start (its template's); None: workspace
    users: bool = False  # it has E2B's `user` besides root (users.py); False: one user
    user: str = "user"  # who a call that names no user acts as (its template's last USER)
    state: State = "running"
    processes: ProcessTable = field(default_factory=ProcessTable)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    removed: bool = False  # killed (or timed out): streams that watch it end
    on_end: list[Callable[[], None]] = field(default_factory=list)  # run when paused or removed
    cut: bool = False  # paused or removed: its envd streams are dropped, not ended

    @property
    def sandbox(self) -> Sandbox:
        if self.handle is None:
            raise SandboxError(
                ErrorCode.UNAVAILABLE, f"Sandbox {self.sandbox_id} is paused: connect to resume it."
            )
        return self.handle

    def record(self) -> dict[str, Any]:
        return {
            "sandbox_id": self.sandbox_id,
            "owner": self.owner,
            "template_id": self.template_id,
            "access_token": self.access_token,
            "traffic_token": self.traffic_token,
            "metadata": self.metadata,
            "envs": self.envs,
            "network": self.network,
            "started_at": self.started_at,
            "end_at": self.end_at,
            "auto_pause": self.auto_pause,
            "allow_out": self.allow_out,
            "public_traffic": self.public_traffic,
            "host_mask": self.host_mask,
            "workdir": self.workdir,
            "users": self.users,
            "user": self.user,
        }

    @classmethod
    def paused_from(cls, record: dict[str, Any]) -> HostedSandbox:
        return cls(**record, handle=None, state="paused")

    def ended(self) -> None:
        self.cut = True
        callbacks, self.on_end = self.on_end, []
        for callback in callbacks:
            callback()

    def upstream_host(self, port: int) -> str:
        """The Host header a service on `port` sees."""
        if self.host_mask is None:
            return f"localhost:{port}"
        return self.host_mask.replace("${PORT}", str(port))

    def token_matches(self, presented: str) -> bool:
        return hmac.compare_digest(self.access_token.encode(), presented.encode())

    def traffic_token_matches(self, presented: str) -> bool:
        return hmac.compare_digest(self.traffic_token.encode(), presented.encode())


class Registry:
    def __init__(
        self,
        backend: Backend,
        limits: HostLimits,
        ledger_path: Path | None,
        name: str | None = None,
    ) -> None:
        self.backend = backend
        self.limits = limits
        self.ledger_path = ledger_path
        # A fleet's gateway finds a sandbox's host by the name its id starts with.
        self._id_prefix = f"{name}-" if name else ""
        self._sandboxes: dict[str, HostedSandbox] = {}
        self._creating: dict[str, int] = {}  # per owner, creates in flight count to the cap
        self._reaper: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.ledger_path is not None:
            for record in ledger.load(self.ledger_path):
                try:
                    hosted = HostedSandbox.paused_from(record)
                except TypeError as exc:
                    log.error("skipping a sandbox record the host cannot read: %s", exc)
                    continue
                self._sandboxes[hosted.sandbox_id] = hosted
            log.info("%d sandboxes known from the ledger, all paused", len(self._sandboxes))
        self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def close(self) -> None:
        """With a ledger every sandbox is left paused (the backend then stops them, files
        stay); without one they are killed."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for hosted in list(self._sandboxes.values()):
            if self.ledger_path is None:
                await self._remove(hosted)
                continue
            async with hosted.lock:
                hosted.ended()
                await hosted.processes.kill_all()
                hosted.state, hosted.handle = "paused", None
        self._save()

    def _save(self) -> None:
        if self.ledger_path is not None:
            ledger.save(self.ledger_path, [s.record() for s in self._sandboxes.values()])

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
        network: SandboxNetwork,
        auto_pause: bool = False,
        environment: str | None = None,
        workdir: str | None = None,
        user: str = users.E2B_USER,
    ) -> HostedSandbox:
        """`environment`, a template's built layer, is the system it starts on; its home
        (what the build left in /home/user, templates.py) is the new workspace's first
        content, and `workdir` where its commands start."""
        live = self._count(owner, "running") + self._creating.get(owner, 0)
        if live >= self.limits.max_sandboxes_per_key:
            raise LimitReached(
                f"This API key has {self.limits.max_sandboxes_per_key} running sandboxes, the "
                "host's cap (BURROW_SANDBOX_HOST_MAX_SANDBOXES): kill or pause one first."
            )
        sandbox_id = f"{self._id_prefix}i{secrets.token_hex(10)}"
        self._creating[owner] = self._creating.get(owner, 0) + 1
        try:
            sandbox = await self.backend.create(
                sandbox_id,
                network=network.policy,
                allow_domains=allowlist_of(network.allow_domains),
                environment=environment,
            )
            has_users = await _make_home(sandbox, seeded=environment is not None)
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
            traffic_token=secrets.token_urlsafe(24),
            metadata=metadata,
            envs=envs,
            network=network.policy or self.backend.network_plan(None).policy,
            allow_out=None if network.allow_domains is None else list(network.allow_domains),
            public_traffic=network.public_traffic,
            host_mask=network.host_mask,
            started_at=now,
            end_at=now + self.clamp_timeout(timeout),
            handle=sandbox,
            auto_pause=auto_pause,
            workdir=workdir,
            users=has_users,
            user=user,
        )
        self._sandboxes[sandbox_id] = hosted
        self._save()
        return hosted

    def _count(self, owner: str, state: State) -> int:
        return sum(1 for s in self._sandboxes.values() if s.owner == owner and s.state == state)

    def owned(self, owner: str, sandbox_id: str) -> HostedSandbox:
        """The sandbox if `owner` owns it; another key's sandbox is as absent as a missing one."""
        hosted = self._sandboxes.get(sandbox_id)
        if hosted is None or hosted.owner != owner:
            raise SandboxNotFound(f"Sandbox {sandbox_id} not found")
        return hosted

    def find(self, sandbox_id: str) -> HostedSandbox | None:
        """For envd traffic, which proves itself with the sandbox's access token instead."""
        return self._sandboxes.get(sandbox_id)

    def running(self) -> list[HostedSandbox]:
        return [s for s in self._sandboxes.values() if s.state == "running"]

    def listed(self, owner: str) -> list[HostedSandbox]:
        return [s for s in self._sandboxes.values() if s.owner == owner]

    async def kill(self, owner: str, sandbox_id: str) -> None:
        await self._remove(self.owned(owner, sandbox_id))

    def set_timeout(self, owner: str, sandbox_id: str, timeout: int) -> None:
        hosted = self.owned(owner, sandbox_id)
        hosted.end_at = time.time() + self.clamp_timeout(timeout)
        self._save()

    async def pause(self, owner: str, sandbox_id: str) -> None:
        hosted = self.owned(owner, sandbox_id)
        async with hosted.lock:
            if hosted.state == "paused":
                raise WrongState(f"Sandbox {sandbox_id} is already paused")
            paused = sum(
                1 for s in self._sandboxes.values() if s.owner == owner and s.state == "paused"
            )
            if paused >= self.limits.max_paused_per_key:
                raise LimitReached(
                    f"This API key has {self.limits.max_paused_per_key} paused sandboxes, the "
                    "host's cap (BURROW_SANDBOX_HOST_MAX_PAUSED): kill one first."
                )
            hosted.ended()  # first: its streams are cut, as a VM's would be, not ended
            await hosted.processes.kill_all()
            await hosted.sandbox.stop()  # hibernation: every process ends, files stay
            hosted.state = "paused"
            self._save()

    async def resume(self, owner: str, sandbox_id: str, timeout: int | None) -> HostedSandbox:
        """Wake a paused sandbox (or just extend a running one's deadline, as E2B's
        connect does)."""
        hosted = self.owned(owner, sandbox_id)
        async with hosted.lock:
            if hosted.state == "paused":
                if self._count(owner, "running") >= self.limits.max_sandboxes_per_key:
                    raise LimitReached(
                        f"This API key has {self.limits.max_sandboxes_per_key} running "
                        "sandboxes, the host's cap: kill or pause one before resuming."
                    )
                hosted.handle = await self.backend.create(
                    sandbox_id, network=hosted.network, allow_domains=allowlist_of(hosted.allow_out)
                )
                hosted.state, hosted.cut = "running", False
                hosted.end_at = time.time() + self.clamp_timeout(timeout)
            else:
                hosted.end_at = max(hosted.end_at, time.time() + self.clamp_timeout(timeout))
            self._save()
            return hosted

    async def _remove(self, hosted: HostedSandbox) -> None:
        self._sandboxes.pop(hosted.sandbox_id, None)
        hosted.removed = True
        self._save()
        async with hosted.lock:
            hosted.ended()  # first: its streams are cut, as a VM's would be, not ended
            await hosted.processes.kill_all()
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
                            try:
                                await self.pause(hosted.owner, hosted.sandbox_id)
                            except LimitReached:
                                await self._remove(hosted)  # no room to keep it paused
                        else:
                            await self._remove(hosted)
                    except Exception:
                        log.exception("could not kill expired sandbox %s", hosted.sandbox_id)


current_sandbox: contextvars.ContextVar[HostedSandbox] = contextvars.ContextVar("current_sandbox")
"""The sandbox an envd request was routed to and authenticated for (set by the app)."""


async def _make_home(sandbox: Sandbox, seeded: bool) -> bool:
    """E2B's `user` and its /home/user (users.py), with the template's home copied in first
    when `seeded` (what its build left there, templates.py). True: the sandbox has the
    account; False: its root is read-only, one user acts for all."""
    seed = f"[ ! -d {HOME_SEED} ] || cp -a {HOME_SEED}/. /workspace/ || exit 3\n" if seeded else ""
    script = seed + f"(\n{users.ACCOUNT}\n) 2>/dev/null || true"
    request = ExecRequest(argv=["/bin/sh", "-c", script], timeout=120.0)
    output = bytearray()
    async with closing_exec(sandbox.exec(request)) as events:
        async for event in events:
            if isinstance(event, ExecExit):
                if event.exit_code != 0:
                    raise SandboxError(
                        ErrorCode.UNAVAILABLE, "The template's home could not be copied in."
                    )
            elif event.stream == "stdout":  # an ExecChunk
                output += event.data[:64]
    return output.strip().endswith(b"ok")
