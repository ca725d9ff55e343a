"""The local backend: one long-lived bubblewrap sandbox per id, each with its own guest.

The host binds the guest's Unix socket and hands the listening fd to the sandbox
(socket activation), so the sandbox never sees the socket path and the host can connect
at once: the handshake completes when the guest is up, with no polling. The host closes
its copy of the listener, so a dead guest refuses connections instead of hanging them.

The guest shares the sandbox with the code it runs, which can stop or starve it: every
call to it goes through `_call` (or the exec stream), whose waits have deadlines (see
client.py); a guest that misses one gets its sandbox killed from the host — bwrap's
process group, then the pid namespace and the cgroup — never waited on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import logging
import os
import re
import shutil
import signal
import socket
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, TypeVar

from burrow.sandbox import bwrap, cgroups, idmap, network, rootfs, seccomp
from burrow.sandbox.allowlist import DomainAllowlist
from burrow.sandbox.backend import (
    Capabilities,
    ErrorCode,
    ExecChunk,
    ExecEvent,
    ExecExit,
    ExecRequest,
    FileEntry,
    HandleStatus,
    HttpUpstream,
    NetworkPlan,
    RootLayer,
    RootPlan,
    Sandbox,
    SandboxError,
    closing_exec,
)
from burrow.sandbox.cgroups import Limits
from burrow.sandbox.client import (
    REPLY_TIMEOUT_SECONDS,
    GuestClient,
    GuestUnresponsive,
    PtyConnection,
)
from burrow.sandbox.disk import WorkspaceDisk
from burrow.sandbox.egress_proxy import AllowlistProxy, ProxyLimits
from burrow.sandbox.idmap import IdRange
from burrow.sandbox.leftovers import Reaper, remove_runtime_dir
from burrow.sandbox.network import NetworkPolicy, egress_unavailable
from burrow.sandbox.stage import Stage, open_to
from burrow.sandbox.watch import WorkspaceWatch

SANDBOX_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
STDERR_TAIL_LINES = 20
STDERR_LINE_BYTES = 500
log = logging.getLogger(__name__)
LOOPBACK_RACE = "loopback: Failed"  # bwrap's words when it cannot set up `lo`
STOP_WAIT_SECONDS = 2.0  # for the stderr pipe to close once every process is killed

T = TypeVar("T")
RootMode = Literal["writable", "read-only"]


@dataclass(frozen=True)
class BootPlan:
    """How every sandbox of a backend is started."""

    bwrap: str
    python: str
    guest_dir: Path
    boot_timeout: float
    seccomp_filter: bytes | None
    limits: Limits | None
    network: NetworkPolicy  # as realised: "none" when egress cannot be had here
    resolv_conf: Path | None
    allowlist: DomainAllowlist | None = None  # egress only through the allowlisting proxy
    proxy_limits: ProxyLimits | None = None
    # Under a root server: the sandbox's uid range, setpriv's path and where bwrap, running
    # as that range's root, finds the workspace (stage.py). None: bwrap maps our own uid.
    ids: IdRange | None = None
    setpriv: str = ""
    stage: Stage | None = None
    base: rootfs.Base | None = None  # the writable root's lower layers; None: read-only
    environment: Path | None = None  # a built environment's layer, between base and own
    home: str | None = None  # E2B's layout: the workspace there too, files anywhere (bwrap.py)

    @property
    def slirp(self) -> bool:
        return self.network == "egress" and self.allowlist is None


class LocalSandbox:
    """A running (or stopped) bubblewrap sandbox; see `LocalBackend`."""

    def __init__(
        self,
        sandbox_id: str,
        workspace_dir: Path,
        socket_path: Path,
        disk: WorkspaceDisk | None = None,
        *,
        layer: rootfs.Layer | None = None,
        layer_disk: WorkspaceDisk | None = None,
        agent_timeout: float = REPLY_TIMEOUT_SECONDS,
    ) -> None:
        self._id = sandbox_id
        self.disk = disk
        self.layer = layer  # its writable root's own changes, when the backend gives one
        self.layer_disk = layer_disk
        self.cgroup: cgroups.SandboxCgroup | None = None
        self.limits: Limits | None = None
        self._egress: network.Egress | None = None
        self._proxy: AllowlistProxy | None = None
        self.workspace_dir = workspace_dir  # on the host
        self.socket_path = socket_path
        self.client = GuestClient(str(socket_path), reply_timeout=agent_timeout)
        self.detail = ""  # why the sandbox is not ready, shown with UNAVAILABLE errors
        self._status: HandleStatus = "stopped"
        self._process: asyncio.subprocess.Process | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._watchers: list[asyncio.Task[None]] = []
        self._stopping = False
        self._watch: WorkspaceWatch | None = None  # from boot to stop, on a disk of its own

    @property
    def id(self) -> str:
        return self._id

    @property
    def workspace(self) -> str:
        return bwrap.SANDBOX_WORKSPACE

    @property
    def status(self) -> HandleStatus:
        return self._status

    @property
    def workspace_changes(self) -> WorkspaceWatch | None:
        return self._watch

    @property
    def host_pid(self) -> int | None:
        """bwrap's pid on the host while the sandbox runs (its one child is the sandbox's
        init, whose /proc root is the sandbox's tree: sandbox_host/tree.py)."""
        process = self._process
        if process is None or process.returncode is not None or self._status != "ready":
            return None
        return process.pid

    async def start(self, plan: BootPlan) -> None:
        """Boot the sandbox and wait until its guest answers the handshake.

        A cancelled caller does not interrupt the boot halfway (a bwrap killed during its
        own set-up can leave the namespace's init behind); the boot finishes, then stops.
        """
        booting = asyncio.ensure_future(self._boot_retrying(plan))
        try:
            await asyncio.shield(booting)
        except asyncio.CancelledError:
            try:
                with contextlib.suppress(Exception):
                    await booting
            finally:  # a second cancel too: nothing of the sandbox outlives its caller
                await self.stop()
            raise

    async def _boot_retrying(self, plan: BootPlan) -> None:
        try:
            await self._boot(plan)
        except asyncio.CancelledError:
            # The boot itself cancelled: an event loop that closes cancels every task, this
            # shielded one too, and a bwrap it spawned must not outlive the loop (its
            # transport, collected later, warned in whichever test ran then).
            await self.stop()
            raise
        except SandboxError:
            # Under load, bwrap's own loopback set-up ("loopback: Failed RTM_NEWADDR") failed
            # now and then while slirp4netns configured the same namespace. slirp4netns now
            # starts after the handshake, when that set-up is done; one more boot stays as a
            # guard, since nothing of the sandbox ran yet and a failed boot costs the user.
            if not plan.slirp or LOOPBACK_RACE not in self.detail:
                raise
            log.warning("sandbox %s: %s; booting once more", self.id, self.detail)
            await self._boot(plan)

    async def _boot(self, plan: BootPlan) -> None:
        await self.stop()
        self._status, self.detail, self._stopping = "starting", "", False
        self._stderr_tail.clear()
        # With cgroups, the launcher waits at its gate while the host moves it into them
        # and readies the workspace (disk, ownership, stage) at the same time.
        gated = plan.limits is not None
        try:
            await self._prepare(plan, ready_workspace=not gated)
        except SandboxError as exc:
            await self.stop()
            self._fail(exc.message)
            raise SandboxError(ErrorCode.BOOT_FAILED, f"Sandbox {self.id}: {exc.message}") from None
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        fds: list[int] = []
        info_read = gate_write = block_write = -1
        try:
            listener.bind(str(self.socket_path))
            os.chmod(self.socket_path, 0o600)  # the stage is passable by the uid range
            listener.listen(128)
            fds.append(listener.fileno())
            seccomp_fd = None
            if plan.seccomp_filter is not None:
                seccomp_fd = seccomp.filter_fd(plan.seccomp_filter)
                fds.append(seccomp_fd)
            info_fd = block_read = None
            # The sandbox's pid: for the uid map, slirp4netns and the proxy.
            if plan.network == "egress" or plan.ids is not None:
                info_read, info_fd = os.pipe()
                fds.append(info_fd)
            if plan.ids is not None:
                block_read, block_write = os.pipe()
                fds.append(block_read)
            argv = bwrap.build_argv(
                plan.bwrap,
                workspace=plan.stage.path_for(self.id) if plan.stage else self.workspace_dir,
                listen_fd=listener.fileno(),
                python=plan.python,
                guest_dir=plan.guest_dir,
                seccomp_fd=seccomp_fd,
                info_fd=info_fd,
                tmp_size_bytes=(plan.limits.tmp_mb << 20) if plan.limits else bwrap.TMP_SIZE_BYTES,
                resolv_conf=plan.resolv_conf if plan.slirp else None,
                env=network.proxy_env() if plan.allowlist is not None else None,
                userns_block_fd=block_read,
                root=plan.stage.root_for(self.id) if plan.stage and plan.base else None,
                home=plan.home,
            )
            argv, args_fd = bwrap.hide_options(argv)
            fds.append(args_fd)
            gate_read = None
            if gated:
                gate_read, gate_write = os.pipe()
                fds.append(gate_read)
            as_uid = (plan.setpriv, plan.ids.root) if plan.ids is not None else None
            argv = bwrap.launch_command(argv, as_uid=as_uid, gate_fd=gate_read)
            self._process = await asyncio.create_subprocess_exec(
                # argv[0] too is visible in /proc/1/cmdline: the name, not the host path.
                os.path.basename(argv[0]),
                *argv[1:],
                executable=argv[0],
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                # Nothing of the server's environment or working directory: the
                # namespace's init (bwrap itself) shows its environ and cwd to the sandbox.
                env={},
                cwd="/",
                pass_fds=tuple(fds),
                # Its own process group, so stop() can kill bwrap and the namespace's init
                # together even if bwrap's die-with-parent has not taken effect yet.
                start_new_session=True,
            )
        except OSError as exc:
            for fd in (gate_write, block_write):
                if fd >= 0:
                    os.close(fd)
            self._fail(f"could not start bubblewrap: {exc}")
            raise SandboxError(ErrorCode.BOOT_FAILED, f"Sandbox {self.id}: {self.detail}") from exc
        finally:
            listener.close()
            for fd in fds[1:]:
                os.close(fd)
        process = self._process
        if gate_write >= 0:
            try:
                assert self.cgroup is not None
                await asyncio.gather(
                    asyncio.to_thread(self.cgroup.join, process.pid), self._ready_workspace(plan)
                )
                os.write(gate_write, b"go\n")
            except SandboxError as exc:
                if block_write >= 0:
                    os.close(block_write)
                await self.stop()
                self._fail(exc.message)
                raise SandboxError(
                    ErrorCode.BOOT_FAILED, f"Sandbox {self.id}: {exc.message}"
                ) from None
            finally:
                os.close(gate_write)
        self._watchers = [
            asyncio.create_task(self._collect_stderr(process)),
            asyncio.create_task(self._watch_exit(process)),
        ]
        try:
            async with asyncio.timeout(plan.boot_timeout):
                pid = await self._sandbox_pid(info_read) if info_read >= 0 else 0
                if plan.ids is not None:
                    idmap.write_maps(pid, plan.ids)
                    os.write(block_write, b"1")
                await self.client.handshake(plan.boot_timeout)
                # The network after the handshake: bwrap has set up loopback by then (while
                # slirp4netns configured the namespace at the same time, bwrap's own set-up
                # failed now and then under load), and none of the sandbox's own code has
                # run yet: no command starts before the fence is up or the proxy listens.
                if plan.slirp:
                    self._egress = network.Egress()
                    await self._egress.start(pid)
                if plan.allowlist is not None:
                    await self._start_proxy(pid, plan.allowlist, plan.proxy_limits)
        except (SandboxError, TimeoutError, OSError) as exc:
            reason = await self._boot_failure(process, exc)
            await self.stop()
            self._fail(reason)
            raise SandboxError(ErrorCode.BOOT_FAILED, f"Sandbox {self.id}: {reason}") from None
        finally:
            if info_read >= 0:
                os.close(info_read)
            if block_write >= 0:
                os.close(block_write)
            if plan.stage is not None:  # bwrap holds its own mount of the workspace now
                plan.stage.release(self.id)
        self._status = "ready"

    async def _prepare(self, plan: BootPlan, *, ready_workspace: bool) -> None:
        """The workspace (unless the launcher's gate waits for it) and the cgroups."""
        self.limits = plan.limits
        if ready_workspace:
            await self._ready_workspace(plan)
        self.socket_path.unlink(missing_ok=True)
        if plan.limits is not None:
            self.cgroup = cgroups.SandboxCgroup(cgroups.name_for(self.workspace_dir), plan.limits)
            await asyncio.to_thread(self.cgroup.create)

    async def _ready_workspace(self, plan: BootPlan) -> None:
        """Mounted (when quotas are on), owned by the sandbox's uid range, and bound where
        bwrap can reach it."""
        # 0700 like the data directory above it.
        self.workspace_dir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.workspace_dir.mkdir(mode=0o700, exist_ok=True)
        if self.disk is not None:
            await self.disk.mount()
            if self._watch is None:  # before any process of the sandbox runs: none is missed
                self._watch = WorkspaceWatch.open(self.workspace_dir)
        if plan.ids is None or plan.stage is None:
            return
        moved = 0
        if not idmap.owned_by(self.workspace_dir, plan.ids):  # new, or an older Burrow's
            moved = await asyncio.to_thread(idmap.reown, self.workspace_dir, plan.ids)
        if moved:
            log.warning(
                "sandbox %s: moved %d file(s) of its workspace to the sandbox's uid range "
                "(%d..%d on the host)",
                self.id,
                moved,
                plan.ids.start,
                plan.ids.start + idmap.SIZE - 1,
            )
        try:
            plan.stage.bind(self.id, self.workspace_dir)
        except OSError as exc:
            raise SandboxError(
                ErrorCode.BOOT_FAILED, f"could not stage the workspace for bubblewrap: {exc}"
            ) from None
        if plan.base is not None and self.layer is not None:
            await self._ready_root(
                plan.base, plan.ids, plan.stage.root_for(self.id), plan.environment, plan.home
            )

    async def _ready_root(
        self,
        base: rootfs.Base,
        ids: IdRange,
        target: Path,
        environment: Path | None,
        home: str | None,
    ) -> None:
        """The writable root's layer (on its own disk when quotas are on), mounted over the
        base where bwrap takes it as `/`."""
        assert self.layer is not None
        if self.layer_disk is not None:
            await self.layer_disk.mount()
        layer = self.layer

        def ready() -> None:  # one trip to a thread: under load each costs a scheduling delay
            layer.prepare(base, ids)
            layer.mount(base, target, environment, also=home)

        try:
            await asyncio.to_thread(ready)
        except OSError as exc:
            raise SandboxError(
                ErrorCode.BOOT_FAILED, f"could not mount the sandbox's writable root: {exc}"
            ) from None

    async def _sandbox_pid(self, info_read: int) -> int:
        info = b""
        while b"}" not in info:  # bwrap writes its JSON in pieces
            chunk = await asyncio.to_thread(os.read, info_read, 4096)
            if not chunk:
                raise SandboxError(ErrorCode.BOOT_FAILED, "bubblewrap exited before it started")
            info += chunk
        return network.read_child_pid(info)

    async def _start_proxy(
        self, pid: int, allowlist: DomainAllowlist, limits: ProxyLimits | None
    ) -> None:
        sock = await asyncio.to_thread(network.listen_in_namespace, pid)
        proxy = AllowlistProxy(
            allowlist, limits=limits, host_addresses=await asyncio.to_thread(network.host_addresses)
        )
        try:
            await proxy.serve(sock)
        except OSError:
            sock.close()
            raise
        self._proxy = proxy

    async def stop(self) -> None:
        """Kill every process of the sandbox from the host; nothing here waits on the guest.

        SIGKILL to bwrap's process group ends the pid namespace's init, and the kernel then
        kills every process of the namespace (stopped ones too); the cgroup is swept after.
        """
        process, self._process = self._process, None
        self._stopping = True
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        watchers, self._watchers = self._watchers, []
        if watchers:  # the stderr pipe closes once its last holder is dead: bound the wait
            _, late = await asyncio.wait(watchers, timeout=STOP_WAIT_SECONDS)
            for task in late:
                task.cancel()
        egress, self._egress = self._egress, None
        if egress is not None:
            await egress.stop()
        proxy, self._proxy = self._proxy, None
        if proxy is not None:
            await proxy.close()
        cgroup, self.cgroup = self.cgroup, None
        if cgroup is not None:
            await asyncio.to_thread(cgroup.kill_and_remove)
        watch, self._watch = self._watch, None
        if watch is not None:  # one of the host's few fanotify groups, back at each stop
            watch.close()
        self.socket_path.unlink(missing_ok=True)
        if self._status != "failed":
            self._status = "stopped"
            self.detail = "the sandbox was stopped"

    async def exec(self, request: ExecRequest) -> AsyncIterator[ExecEvent]:
        self._check_ready()
        before = self.cgroup.usage() if self.cgroup else None
        try:
            # aclosing: closing this stream must close (and so kill) the guest's at once.
            async with closing_exec(self.client.exec(request)) as events:
                async for event in events:
                    if isinstance(event, ExecExit):
                        note = self._limit_note(before, event)
                        if note:
                            yield ExecChunk("stderr", note.encode())
                    yield event
        except SandboxError as exc:
            raise await self._explain(exc) from None

    def _limit_note(self, before: cgroups.Usage | None, exit: ExecExit) -> str:
        """Name the limit a failed command ran into, so the model and the user see why."""
        if self.limits is None:
            return ""
        notes = []
        if before is not None and self.cgroup is not None:
            after = self.cgroup.usage()
            if after.oom_kills > before.oom_kills:
                notes.append(
                    f"a process was killed because the sandbox ran out of memory "
                    f"(limit {self.limits.memory_mb} MiB)"
                )
            if after.pids_refused > before.pids_refused:
                notes.append(
                    f"the sandbox reached its process limit ({self.limits.pids}); "
                    "a fork was refused"
                )
        if exit.exit_code != 0 and self.disk is not None and self.disk.mounted:
            used, total = self.disk.usage()
            if total and used >= total * 0.98:
                notes.append(f"the workspace disk is full ({self.limits.disk_mb} MiB)")
        if not notes:
            return ""
        return "\n[burrow] " + "; ".join(notes) + ". The sandbox is still usable.\n"

    async def open_pty(
        self, cols: int, rows: int, env: Mapping[str, str] | None = None
    ) -> PtyConnection:
        return await self._call(lambda: self.client.open_pty(cols, rows, env=env))

    async def running_commands(self) -> int:
        return await self._call(self.client.running_commands)

    async def read_file(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        return await self._call(lambda: self.client.read_file(path, offset, limit))

    async def write_file(self, path: str, data: bytes) -> None:
        await self._call(lambda: self.client.write_file(path, data))

    async def list_dir(self, path: str) -> list[FileEntry]:
        return await self._call(lambda: self.client.list_dir(path))

    async def stat(self, path: str) -> FileEntry:
        return await self._call(lambda: self.client.stat(path))

    async def open_tunnel(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await self._call(lambda: self.client.open_tunnel(port))

    async def open_http(self, port: int) -> HttpUpstream:
        reader, writer = await self.open_tunnel(port)
        return HttpUpstream(reader, writer)

    async def ping(self) -> float:
        return await self._call(self.client.ping)

    async def _call(self, request: Callable[[], Awaitable[T]]) -> T:
        """Every host -> guest request goes through here (exec streams through `exec`):
        the client owns the deadline, this the error mapping."""
        self._check_ready()
        try:
            return await request()
        except SandboxError as exc:
            raise await self._explain(exc) from None

    def _check_ready(self) -> None:
        if self._status != "ready":
            raise self._unavailable()

    def _unavailable(self) -> SandboxError:
        return SandboxError(
            ErrorCode.UNAVAILABLE,
            f"Sandbox {self.id} is {self._status}: {self.detail or 'not running'}. "
            "Restart it (create it again) to continue.",
        )

    async def _explain(self, exc: SandboxError) -> SandboxError:
        """Turn a broken connection into the reason the sandbox died, when it did; a
        guest that missed a deadline is killed with its sandbox, never waited on."""
        if isinstance(exc, GuestUnresponsive):
            if self._status == "ready":
                await self.stop()
                self._fail(
                    f"{exc.message} Every process of the sandbox was killed; its files are kept"
                )
            return self._unavailable()
        if exc.code != ErrorCode.UNAVAILABLE:
            return exc
        process = self._process
        if process is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):  # let the exit watcher record the death
                    await process.wait()
                    await asyncio.gather(*self._watchers, return_exceptions=True)
        return self._unavailable() if self._status != "ready" else exc

    def _fail(self, reason: str) -> None:
        self._status, self.detail = "failed", reason

    async def _collect_stderr(self, process: asyncio.subprocess.Process) -> None:
        """Keep the last lines bwrap and the guest wrote: a boot failure's reason. Bounded
        per line too, as the sandbox's code can write there (/proc/1/fd/2)."""
        assert process.stderr is not None
        rest = b""
        while chunk := await process.stderr.read(STDERR_LINE_BYTES):
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                self._stderr_tail.append(_shown(line))
            if len(rest) > STDERR_LINE_BYTES:  # no newline in sight: cut it here
                self._stderr_tail.append(_shown(rest))
                rest = b""
        if rest:
            self._stderr_tail.append(_shown(rest))

    async def _watch_exit(self, process: asyncio.subprocess.Process) -> None:
        returncode = await process.wait()
        if self._stopping:
            return
        how = f"killed by signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
        stderr = "; ".join(line for line in self._stderr_tail if line)
        self._fail(f"the sandbox agent died ({how}){': ' + stderr if stderr else ''}")

    async def _boot_failure(self, process: asyncio.subprocess.Process, exc: Exception) -> str:
        if isinstance(exc, (TimeoutError, GuestUnresponsive)):
            return "the sandbox agent did not answer in time"
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await process.wait()
                await asyncio.gather(*self._watchers, return_exceptions=True)
        stderr = "; ".join(line for line in self._stderr_tail if line)
        return f"the sandbox did not start: {stderr or exc}"


class LocalBackend:
    """Sandboxes as bubblewrap namespaces on this machine.

    `data_dir` holds the workspaces (`data_dir/workspaces/<id>`); sockets live in a short
    private directory under /tmp because Unix socket paths are limited to 108 bytes.
    """

    name = "local"
    capabilities = Capabilities(
        pty=True,
        preview="tunnel",
        hibernation="files",
        network_policies=("none", "egress"),
        egress_allowlist=True,
        running_commands=True,
    )

    def __init__(
        self,
        data_dir: Path,
        *,
        python: str = "/usr/bin/python3",
        boot_timeout: float = 10.0,
        limits: Limits | None = None,
        network: NetworkPolicy = "none",
        allow_domains: DomainAllowlist | None = None,
        proxy_limits: ProxyLimits | None = None,
        seccomp: bool = True,
        agent_timeout: float = REPLY_TIMEOUT_SECONDS,
        root: RootMode = "writable",
        home: str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        # E2B's layout (the sandbox host's): the workspace also at `home` (/home/user), which
        # is HOME, and the file API open to the sandbox's whole tree (guest/files.py).
        self.home = home
        self.root: RootMode = root  # "writable": a root of its own (rootfs.py), where possible
        self.python = python
        self.boot_timeout = boot_timeout
        self.limits = limits  # None: no cgroups and no disk quota (tests, unprivileged hosts)
        self.network: NetworkPolicy = network  # for a create() that names none
        self.allow_domains = allow_domains or None  # empty: egress goes anywhere public
        self.proxy_limits = proxy_limits
        self.seccomp = seccomp
        self.agent_timeout = agent_timeout  # past it, a guest that has not answered is killed
        self._runtime_dir: Path | None = None  # made on first use (the stage: stage.py)
        self._sandboxes: dict[str, LocalSandbox] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._guest_dir: Path | None = None
        self._guest_lock = asyncio.Lock()
        self._seccomp_filter: bytes | None = None
        self._ids: IdRange | None = None
        self._ids_known = False
        self._base: rootfs.Base | None = None
        self._base_lock = asyncio.Lock()
        self.reaper = Reaper(self.data_dir, self._locks, SANDBOX_ID)
        if network == "egress" and self.allow_domains is None:
            missing = egress_unavailable()
            if missing:
                log.warning(
                    "Sandbox egress is unavailable: %s. Sandboxes start with no network "
                    "(policy none) and say so in their status.",
                    missing,
                )

    def network_plan(
        self, policy: NetworkPolicy | None, allow_domains: DomainAllowlist | None = None
    ) -> NetworkPlan:
        policy = policy or self.network
        if policy == "none":
            return NetworkPlan("none", "no network (loopback only)")
        allowed = self._allowed(allow_domains)
        if allowed is not None:
            if not allowed:
                asked = ", ".join(allow_domains.entries()) if allow_domains else "none"
                return NetworkPlan(
                    "none", f"no network: none of the names asked for ({asked}) is allowed here"
                )
            entries = tuple(allowed.entries())
            how = f"egress through Burrow's allowlisting proxy only ({', '.join(entries)})"
            return NetworkPlan("egress", how, allow_domains=entries)
        missing = egress_unavailable()
        if missing:
            how = f"egress is unavailable: {missing}; the sandbox has no network"
            return NetworkPlan("none", how, degraded=True)
        return NetworkPlan("egress", "egress to public addresses (host and private ranges cut)")

    def _allowed(self, asked: DomainAllowlist | None) -> DomainAllowlist | None:
        """The names a sandbox's egress is held to (None: any public address)."""
        if asked is None:
            return self.allow_domains
        return asked if self.allow_domains is None else self.allow_domains.narrowed(asked)

    def workspace_dir(self, sandbox_id: str) -> Path:
        """Where the sandbox's /workspace lives on the host."""
        return self.data_dir / "workspaces" / _checked_id(sandbox_id)

    def get(self, sandbox_id: str) -> LocalSandbox | None:
        """The sandbox if this backend started it (in any status), without starting it."""
        return self._sandboxes.get(sandbox_id)

    async def create(
        self,
        sandbox_id: str,
        *,
        network: NetworkPolicy | None = None,
        allow_domains: DomainAllowlist | None = None,
        environment: str | None = None,
    ) -> LocalSandbox:
        workspace_dir = self.workspace_dir(sandbox_id)
        async with self._locks.setdefault(sandbox_id, asyncio.Lock()):
            await self.reaper.before_boot(_checked_id(sandbox_id))
            sandbox = self._sandboxes.get(sandbox_id)
            if sandbox is not None and sandbox.status == "ready":
                return sandbox
            bwrap_bin = bwrap.find_bwrap()
            if not os.access(self.python, os.X_OK):
                raise SandboxError(
                    ErrorCode.BOOT_FAILED,
                    f"{self.python} is missing: the local sandbox runs its agent with the "
                    "system Python; install python3 (`apt-get install python3`).",
                )
            if sandbox is None:
                socket_path = self._runtime_path() / f"{_short_hash(sandbox_id)}.sock"
                sandbox = LocalSandbox(
                    sandbox_id,
                    workspace_dir,
                    socket_path,
                    self._disk(sandbox_id),
                    layer=rootfs.Layer(self.layer_dir(sandbox_id)),
                    layer_disk=self._layer_disk(sandbox_id),
                    agent_timeout=self.agent_timeout,
                )
                self._sandboxes[sandbox_id] = sandbox
            plan = await self._plan(bwrap_bin, network, allow_domains)
            if plan.base is not None:
                plan = replace(plan, environment=self._environment_for(sandbox_id, environment))
            await sandbox.start(plan)
            return sandbox

    def _disk(self, sandbox_id: str) -> WorkspaceDisk | None:
        if self.limits is None or not self.limits.disk_mb:
            return None
        image = self.data_dir / "workspaces" / f"{_checked_id(sandbox_id)}.img"
        ids = self.id_range()
        owner = ids.root if ids is not None else os.getuid()
        return WorkspaceDisk(image, self.workspace_dir(sandbox_id), self.limits.disk_mb, owner)

    def layer_dir(self, sandbox_id: str) -> Path:
        """Where the sandbox's writable root keeps its changes on the host."""
        return self.data_dir / "layers" / _checked_id(sandbox_id)

    def _layer_disk(self, sandbox_id: str) -> WorkspaceDisk | None:
        """The layer's own file system, as big as a workspace's: what a sandbox installs is
        bounded like what it writes to /workspace."""
        if self.limits is None or not self.limits.disk_mb:
            return None
        image = self.data_dir / "layers" / f"{_checked_id(sandbox_id)}.img"
        return WorkspaceDisk(image, self.layer_dir(sandbox_id), self.limits.disk_mb, 0)

    def _disks(self, sandbox_id: str) -> list[WorkspaceDisk]:
        return [d for d in (self._disk(sandbox_id), self._layer_disk(sandbox_id)) if d]

    def disk_used(self, sandbox_id: str) -> int | None:
        """The workspace's and the layer's images' allocated blocks (sparse: what was
        written); plain directories (no disk quotas) are not measured, as walking them
        would cost."""
        disks = self._disks(sandbox_id)
        if not disks:
            return None
        used = 0
        for disk in disks:
            with contextlib.suppress(FileNotFoundError):
                used += disk.image.stat().st_blocks * 512
        return used

    def id_range(self) -> IdRange | None:
        """The host ids sandboxes run as (idmap.py); None when this server is not root."""
        if not self._ids_known:
            try:
                self._ids = idmap.burrow_range()
            except OSError as exc:
                raise SandboxError(
                    ErrorCode.BOOT_FAILED,
                    f"Could not register the sandboxes' uid range in {exc.filename}: "
                    f"{exc.strerror}. Add a line `burrow:<start>:65536` to /etc/subuid and "
                    "/etc/subgid (an unused range), or run Burrow as a user other than root.",
                ) from None
            self._ids_known = True
        return self._ids

    async def _plan(
        self, bwrap_bin: str, policy: NetworkPolicy | None, allow: DomainAllowlist | None
    ) -> BootPlan:
        if self._seccomp_filter is None and self.seccomp:
            self._seccomp_filter = seccomp.build_filter()
        realised = self.network_plan(policy, allow).policy
        ids = self.id_range()
        return BootPlan(
            bwrap=bwrap_bin,
            python=self.python,
            guest_dir=await self._prepared_guest(),
            boot_timeout=self.boot_timeout,
            seccomp_filter=self._seccomp_filter,
            limits=self.limits,
            network=realised,
            resolv_conf=network.resolv_conf(self._runtime_path()) if realised == "egress" else None,
            allowlist=self._allowed(allow) if realised == "egress" else None,
            proxy_limits=self.proxy_limits,
            ids=ids,
            setpriv=bwrap.find_setpriv() if ids is not None else "",
            stage=Stage(self._runtime_path(), ids) if ids is not None else None,
            base=await self._prepared_base(ids),
            home=self.home,
        )

    def root_plan(self, sandbox_id: str) -> RootPlan:
        host = RootLayer("host", False, "the host's system: /usr, dpkg's database, a curated /etc")
        missing = self.root_unavailable()
        if missing:
            return RootPlan("host", False, missing, (host,))
        own = RootLayer(
            "conversation",
            True,
            "what the sandbox changed or installed, kept across hibernation and restarts",
        )
        detail = (
            "the host's system (never written) under the sandbox's own layer; "
            "checkpoints cover /workspace only"
        )
        return RootPlan("host", True, detail, (host, own))

    async def copy_root(self, source_id: str, target_id: str) -> None:
        """The source's layer, copied (`cp -a`: owners, modes, links, the overlay's
        whiteouts and xattrs) into the target's before its first boot. A running source's
        layer is read as it stands."""
        if self.root_unavailable():
            return
        source, target = self.layer_dir(source_id), self.layer_dir(target_id)
        for sandbox_id in (source_id, target_id):  # their disks mounted (a restart unmounts)
            disk = self._layer_disk(sandbox_id)
            if disk is not None and (disk.image.exists() or sandbox_id == target_id):
                async with self._locks.setdefault(sandbox_id, asyncio.Lock()):
                    await self.reaper.before_boot(sandbox_id)
                    await disk.mount()
        if not source.is_dir():
            return
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
        await _copy_uppers(source, target)
        pin = self._pin(source_id)
        if pin.exists():  # the fork stands on the same environment build
            shutil.copy(pin, self._pin(target_id))

    def environments_dir(self) -> Path:
        """Built environments' layers (runs/workspace/environments.py), by key."""
        return self.data_dir / "environments"

    def environment_exists(self, key: str) -> bool:
        return (self.environments_dir() / _checked_id(key)).is_dir()

    def environment_build_of(self, sandbox_id: str) -> str | None:
        try:
            return self._pin(sandbox_id).read_text().strip() or None
        except OSError:
            return None

    def _pin(self, sandbox_id: str) -> Path:
        """Beside the layer (not in it: its disk may not be mounted): the environment build
        the sandbox stands on."""
        return self.data_dir / "layers" / f"{_checked_id(sandbox_id)}.environment"

    async def save_environment(self, sandbox_id: str, key: str) -> None:
        """The stopped build sandbox's layer, copied whole under the environment's key
        (made under a name of its own, then renamed: a half-copied layer is never used)."""
        target = self.environments_dir() / _checked_id(key)
        if target.is_dir():
            return
        making = target.with_name(f".{key}.{os.getpid()}")
        await asyncio.to_thread(shutil.rmtree, making, ignore_errors=True)
        making.mkdir(mode=0o700, parents=True)
        await _copy_uppers(self.layer_dir(sandbox_id), making)
        os.replace(making, target)

    async def collect_environments(self, keep: set[str]) -> list[str]:
        def collect() -> list[str]:
            layers = self.data_dir / "layers"
            pinned = {
                pin.read_text().strip() for pin in layers.glob("*.environment") if pin.is_file()
            }
            removed = []
            for build in sorted(self.environments_dir().iterdir()):
                # A dot name is a build being copied (save_environment): not ours to take.
                if build.name.startswith(".") or build.name in keep | pinned:
                    continue
                shutil.rmtree(build, ignore_errors=True)
                removed.append(build.name)
            return removed

        return await asyncio.to_thread(collect) if self.environments_dir().is_dir() else []

    def _environment_for(self, sandbox_id: str, asked: str | None) -> Path | None:
        """The environment layer the sandbox stands on: the one it first booted on (kept
        in its layer as a pin), else the one asked for now, pinned from here on."""
        key = self.environment_build_of(sandbox_id) or asked
        if key is None:
            return None
        path = self.environments_dir() / _checked_id(key)
        if not path.is_dir():
            raise SandboxError(
                ErrorCode.BOOT_FAILED,
                f"the environment build {key} this sandbox stands on is gone from "
                f"{self.environments_dir()}",
            )
        pin = self._pin(sandbox_id)
        if not pin.exists():
            pin.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            pin.write_text(key + "\n")
        return path

    def root_unavailable(self) -> str:
        """Why sandboxes here see the host's system read-only ("" when they have a root of
        their own)."""
        if self.root != "writable":
            return "the server runs sandboxes with a read-only root (BURROW_SANDBOX_ROOT)"
        return rootfs.unavailable(self.id_range())

    async def _prepared_base(self, ids: IdRange | None) -> rootfs.Base | None:
        """The writable root's base, built on the first boot that needs it."""
        if self.root != "writable" or ids is None:
            return None
        async with self._base_lock:
            if self._base is None:
                missing = rootfs.unavailable(ids)
                if missing:
                    raise SandboxError(ErrorCode.BOOT_FAILED, missing)
                self._base = await asyncio.to_thread(
                    rootfs.build_base, self._runtime_path() / "base", ids
                )
            return self._base

    async def destroy(self, sandbox_id: str) -> None:
        workspace_dir = self.workspace_dir(sandbox_id)
        async with self._locks.setdefault(sandbox_id, asyncio.Lock()):
            await self.reaper.before_boot(_checked_id(sandbox_id))
            sandbox = self._sandboxes.pop(sandbox_id, None)
            if sandbox is not None:
                await sandbox.stop()
            for disk in self._disks(sandbox_id):
                await disk.unmount()
                disk.image.unlink(missing_ok=True)
            await asyncio.to_thread(shutil.rmtree, workspace_dir, ignore_errors=True)
            await asyncio.to_thread(shutil.rmtree, self.layer_dir(sandbox_id), ignore_errors=True)
            self._pin(sandbox_id).unlink(missing_ok=True)

    async def hibernate(self, sandbox: Sandbox) -> None:
        """Files only: every process stops; `create` boots afresh on the same workspace."""
        await sandbox.stop()

    async def recover(self) -> None:
        """Reap what a dead server of this data directory left, in the background: start-up
        does not wait for it, and `create` waits only for its own sandbox's share."""
        self.reaper.start()

    async def close(self) -> None:
        sandboxes = list(self._sandboxes.values())
        await asyncio.gather(*(sandbox.stop() for sandbox in sandboxes))
        for sandbox in sandboxes:
            for disk in (sandbox.disk, sandbox.layer_disk):
                if disk is not None:
                    with contextlib.suppress(SandboxError):
                        await disk.unmount()
        self._sandboxes.clear()
        if self.reaper.sweep is not None:  # a server's backend: nothing may outlive it
            self.reaper.sweep.cancel()
            await asyncio.to_thread(self.reaper.sweep_stopped)
        if self._runtime_dir is not None:
            remove_runtime_dir(self._runtime_dir)
            self._runtime_dir = None
            self._guest_dir = None
            self._base = None
        self.reaper.close()  # last: the sandboxes are stopped

    async def _prepared_guest(self) -> Path:
        """A private copy of the guest package, byte-compiled by the sandbox's Python.

        The guest runs with -B from a read-only mount, so it could never cache its own
        bytecode; compiling on every boot would add ~20 ms to each create.
        """
        async with self._guest_lock:
            if self._guest_dir is None:
                target = self._runtime_path() / "guest"
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(
                    bwrap.GUEST_DIR, target, ignore=shutil.ignore_patterns("__pycache__")
                )
                compiling = await asyncio.create_subprocess_exec(
                    *(self.python, "-E", "-S", "-m", "compileall", "-q", str(target)),
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL,
                )
                await compiling.wait()  # if it fails the guest only starts slower
                _readable_by_all(target)  # bwrap reads it as the sandbox's uid
                self._guest_dir = target
            return self._guest_dir

    def _runtime_path(self) -> Path:
        if self._runtime_dir is None:
            # Private (0700) and short: the socket path must stay under 108 bytes.
            self._runtime_dir = Path(tempfile.mkdtemp(prefix="burrow-", dir="/tmp"))
            self.reaper.record_runtime_dir(self._runtime_dir)
            ids = self.id_range()
            if ids is not None:
                open_to(self._runtime_dir, ids)
        return self._runtime_dir


async def _copy_uppers(source: Path, target: Path) -> None:
    """Each overlay's upper directory of the layer `source` into `target` (`cp -a`:
    owners, modes, links, the overlay's whiteouts and xattrs); one already there stays."""

    def parts() -> list[Path]:
        found = [p for p in sorted(source.iterdir()) if (p / "upper").is_dir()]
        return [p for p in found if not (target / p.name).exists()]

    for part in await asyncio.to_thread(parts):
        (target / part.name).mkdir(mode=0o700)
        argv = ("cp", "-a", "--reflink=auto", "--", str(part / "upper"), str(target / part.name))
        copying = await asyncio.create_subprocess_exec(*argv, stderr=asyncio.subprocess.PIPE)
        _, err = await copying.communicate()
        if copying.returncode != 0:
            raise SandboxError(
                ErrorCode.BOOT_FAILED,
                f"could not copy the sandbox's installed system: {err.decode()[-500:]}",
            )


def _readable_by_all(root: Path) -> None:
    """Directories 0755, files 0644, whatever the server's umask was."""
    for directory, _, files in os.walk(root):
        os.chmod(directory, 0o755)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o644)


def _checked_id(sandbox_id: str) -> str:
    if not SANDBOX_ID.fullmatch(sandbox_id) or ".." in sandbox_id:
        raise SandboxError(
            ErrorCode.BOOT_FAILED,
            f"Invalid sandbox id {sandbox_id!r}: use letters, digits, '_', '-' or '.'.",
        )
    return sandbox_id


def _shown(line: bytes) -> str:
    return line[:STDERR_LINE_BYTES].decode(errors="replace").rstrip()


def _short_hash(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]
