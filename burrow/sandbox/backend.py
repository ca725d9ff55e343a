"""The seam between Burrow and the machines that run model-requested code.

A `Backend` creates, finds and destroys sandboxes; a `Sandbox` is one conversation's
isolated machine. Every backend implements every operation or raises `NotSupported`:
there is no inherited default that silently runs something on the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from burrow.sandbox.allowlist import DomainAllowlist

NetworkPolicy = Literal["none", "egress"]
"""`none`: loopback only; `egress`: outbound to public addresses (or through an allowlist)."""


@dataclass(frozen=True)
class NetworkPlan:
    """The network a sandbox gets for the policy it asked for."""

    policy: NetworkPolicy  # what it gets
    detail: str  # how, in a line for people
    degraded: bool = False  # less than asked: egress is unavailable on this host
    allow_domains: tuple[str, ...] = ()  # egress only to these, through the proxy


class ErrorCode(enum.StrEnum):
    """Typed failure causes, shared by the in-sandbox guest and every backend."""

    PATH_ESCAPE = "path_escape"  # the path resolves outside the workspace
    NOT_FOUND = "not_found"  # no such file or directory
    IS_A_DIRECTORY = "is_a_directory"
    NOT_A_FILE = "not_a_file"  # a FIFO, socket or device: never opened, it could block forever
    NOT_A_DIRECTORY = "not_a_directory"
    INVALID_CWD = "invalid_cwd"
    EXEC_NOT_FOUND = "exec_not_found"
    TIMEOUT = "timeout"
    TOO_LARGE = "too_large"
    PERMISSION_DENIED = "permission_denied"
    PROTOCOL = "protocol"  # malformed frame or version mismatch
    UNAVAILABLE = "unavailable"  # the sandbox is not running or its guest died
    BOOT_FAILED = "boot_failed"
    NOT_SUPPORTED = "not_supported"
    INTERNAL = "internal"
    CONNECTION_REFUSED = "connection_refused"  # nothing listens on that port in the sandbox


class SandboxError(Exception):
    """A sandbox operation failed for a reason the caller can name and show."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class NotSupported(SandboxError):
    def __init__(self, operation: str, backend: str) -> None:
        super().__init__(
            ErrorCode.NOT_SUPPORTED, f"The {backend} backend does not support {operation}."
        )


SandboxStatus = Literal["starting", "ready", "hibernated", "failed"]
"""A conversation's sandbox as its journal's `sandbox.status` events and the pool tell it."""
HandleStatus = SandboxStatus | Literal["stopped"]
"""A `Sandbox` object's own state: also `stopped` (not started yet, or stopped or
destroyed), which no conversation is told: the pool reports it hibernated or failed."""


@dataclass(frozen=True)
class ExecChunk:
    """A piece of a running command's output."""

    stream: Literal["stdout", "stderr"]
    data: bytes


@dataclass(frozen=True)
class ExecExit:
    """The end of a command: its exit code, or the signal that killed it."""

    exit_code: int | None
    signal: int | None = None
    timed_out: bool = False
    result: bytes | None = None  # content of ExecRequest.result_file, None if not written


ExecEvent = ExecChunk | ExecExit


@contextlib.asynccontextmanager
async def closing_exec(events: AsyncIterator[ExecEvent]) -> AsyncIterator[AsyncIterator[ExecEvent]]:
    """Close an exec stream when the block is left, so a command abandoned by an exception
    or a cancellation is killed at once rather than when the stream is garbage-collected."""
    try:
        yield events
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


@dataclass(frozen=True)
class FileEntry:
    name: str
    path: str  # workspace-relative, "/"-separated
    kind: Literal["file", "dir", "symlink", "other"]
    size: int
    mtime: float
    mode: int = 0  # permission bits (0o644)
    owner: str = ""  # user and group names, as the sandbox knows them
    group: str = ""
    target: str | None = None  # stat of a symlink: the target's workspace-relative path


@dataclass
class ExecRequest:
    argv: list[str]
    cwd: str | None = None  # absolute path inside the sandbox; None = the workspace
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None  # seconds; the process group is killed when it passes
    # Bytes: written then closed. A stream: each piece is written as it comes and stdin is
    # closed when the stream ends (a long-lived server's input). None: /dev/null.
    stdin: bytes | AsyncIterable[bytes] | None = None
    # A file (absolute, inside the sandbox) the command may write for its caller, e.g. the
    # final cwd; its content comes back in ExecExit.result and the file is removed. It
    # keeps such bookkeeping out of the output the model and the user see.
    result_file: str | None = None
    # A long-lived helper (an MCP server), not a command: it does not keep the sandbox from
    # hibernating, and hibernation ends it.
    background: bool = False
    # The command (and all it starts) may change nothing but temporary files, enforced by
    # the sandbox whatever the command says (guest/landlock.py); a backend that cannot
    # enforce it refuses the command (NOT_SUPPORTED), never runs it unrestricted.
    read_only: bool = False


PreviewTransport = Literal["tunnel", "http"]
"""How a preview reaches a port: `tunnel`, a byte stream to the port itself; `http`, an HTTP
endpoint of the backend's own that routes each request by headers (E2B's sandbox proxy)."""

Hibernation = Literal["files", "memory"]
"""What survives hibernation: `files` only (processes stop; preview services are started
again on wake), or `memory` too (a paused machine resumes with its processes running)."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do. The runs and api layers read these instead of asking which
    backend they hold; an operation a backend lacks still raises `NotSupported`."""

    pty: bool
    preview: PreviewTransport
    hibernation: Hibernation
    network_policies: tuple[NetworkPolicy, ...]  # the policies a conversation may choose
    egress_allowlist: bool  # BURROW_SANDBOX_ALLOW_DOMAINS is enforced
    running_commands: bool  # counts one-shot commands (else hibernation never waits on one)


@dataclass(frozen=True)
class RootLayer:
    name: str
    writable: bool
    detail: str


@dataclass(frozen=True)
class RootPlan:
    """What a sandbox's `/` is made of here, bottom layer first (GET …/sandbox shows it)."""

    environment: str  # "host": the host's own system, nothing built
    writable: bool  # can the sandbox install into its system (apt, pip, npm -g)?
    detail: str
    layers: tuple[RootLayer, ...]


@dataclass(frozen=True)
class HttpUpstream:
    """A connection that carries HTTP/1.1 (and WebSocket upgrades) to a sandbox port.

    Over a tunnel it is the port itself; over a backend's HTTP proxy, `headers` go with
    every request head sent on it (they route it: sandbox id, port, access token) and
    `host`, when set, replaces the request's Host.
    """

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    headers: tuple[tuple[bytes, bytes], ...] = ()
    host: bytes | None = None


class PtySession(Protocol):
    """An interactive shell on a pseudo-terminal inside a sandbox."""

    @property
    def exit(self) -> ExecExit | None:
        """How the shell ended; None while it runs."""
        ...

    async def read(self) -> bytes:
        """The next bytes the terminal shows; b"" once the shell has exited."""
        ...

    async def write(self, data: bytes) -> None:
        """Keystrokes (Ctrl-C is b"\\x03" and reaches the foreground job as SIGINT).

        Async because a remote backend's keystrokes are a request; a local one only queues.
        """
        ...

    async def resize(self, cols: int, rows: int) -> None: ...

    def close(self) -> None:
        """Hang up: the shell and its jobs get SIGHUP, then SIGKILL."""
        ...


@dataclass(frozen=True)
class Changed:
    """One workspace entry changed since a watch was last asked (`WorkspaceChanges`)."""

    path: str  # workspace-relative
    kind: Literal["file", "link", "folder", "other", "gone"]  # now; other: a FIFO, a socket
    size: int = 0
    was_folder: bool = False  # a folder was made, removed or moved here: what was under it


class WorkspaceChanges(Protocol):
    """The kernel's account of what changed in a workspace (sandbox/watch.py), so a
    checkpoint reads only that instead of walking every file."""

    def changes(self, pruned: Callable[[str], bool]) -> list[Changed] | None:
        """What changed since the last call, as it is now; None: not known (walk)."""
        ...

    def distrust(self) -> None:
        """The last answer was not applied: the next one is None."""
        ...


class Sandbox(Protocol):
    """One conversation's isolated machine. All paths are inside the sandbox."""

    @property
    def id(self) -> str: ...

    @property
    def workspace(self) -> str:
        """Absolute path of the workspace inside the sandbox (the guest's first cwd)."""
        ...

    @property
    def status(self) -> HandleStatus: ...

    def exec(self, request: ExecRequest) -> AsyncIterator[ExecEvent]:
        """Run a command; yields output chunks as they come and ends with one `ExecExit`.

        Closing the iterator early (e.g. on cancellation) kills the command's process group.
        Processes the command put in the background keep running after it exits.
        """
        ...

    async def read_file(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        """Bytes of a file; `path` is workspace-relative or absolute inside the workspace."""
        ...

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file inside the workspace, making parent directories."""
        ...

    async def list_dir(self, path: str) -> list[FileEntry]: ...

    async def stat(self, path: str) -> FileEntry: ...

    async def open_tunnel(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A byte stream to a TCP port on the sandbox's own loopback (previews).

        Reached through the sandbox's channel, never through a port opened on the host.
        Raises SandboxError(CONNECTION_REFUSED) when nothing listens there. Closing the
        writer ends the tunnel.
        """
        ...

    async def open_http(self, port: int) -> HttpUpstream:
        """A connection for HTTP to a port on the sandbox's own loopback (previews): the
        tunnel itself, or the backend's HTTP proxy with the headers that route to the port.

        Raises SandboxError(CONNECTION_REFUSED) when a tunnel finds nothing listening (an
        HTTP proxy answers that with an error response instead).
        """
        ...

    async def ping(self) -> float:
        """Round-trip to the in-sandbox guest, in seconds."""
        ...

    async def open_pty(
        self, cols: int, rows: int, env: Mapping[str, str] | None = None
    ) -> PtySession:
        """Start an interactive login shell in the workspace on a new pseudo-terminal;
        `env` adds to its environment (a conversation's secrets)."""
        ...

    async def running_commands(self) -> int:
        """One-shot commands running now; a sandbox running one is never hibernated."""
        ...

    async def stop(self) -> None:
        """Kill every process of the sandbox. Files in the workspace stay."""
        ...

    @property
    def workspace_changes(self) -> WorkspaceChanges | None:
        """What tells this workspace's changes as they happen, where the backend has one
        (a local workspace on its own disk, under a root server); None: walk to find them."""
        ...


class RemoteIds(Protocol):
    """Where a remote backend keeps which remote sandbox serves each of Burrow's sandbox ids:
    the database, so every replica and a restarted server find it by one lookup — whatever
    host of the fleet it is on, and however many hosts were added since."""

    async def get(self, sandbox_id: str) -> str | None: ...

    async def put(self, sandbox_id: str, remote_id: str) -> None: ...

    async def forget(self, sandbox_id: str) -> None: ...


class Backend(Protocol):
    """Creates and finds sandboxes. One sandbox per conversation."""

    name: str
    capabilities: Capabilities

    async def create(
        self,
        sandbox_id: str,
        *,
        network: NetworkPolicy | None = None,
        allow_domains: DomainAllowlist | None = None,
        environment: str | None = None,
    ) -> Sandbox:
        """Start (or restart) the sandbox for `sandbox_id` and return it once ready, with
        the network policy `network` (None: the backend's default); `environment`, a
        built environment's key, is the system a first boot starts from (a sandbox keeps
        the one it started on; runs/workspace/environments.py); `allow_domains` narrows
        its egress to those names (and to the backend's own list, if it has one): a list
        nothing is left of gives it no network.

        Raises SandboxError(BOOT_FAILED) with the reason when it cannot start; never falls
        back to the host.
        """
        ...

    def network_plan(
        self, network: NetworkPolicy | None, allow_domains: DomainAllowlist | None = None
    ) -> NetworkPlan:
        """How a sandbox asking for `network` (None: the default) is connected here."""
        ...

    async def destroy(self, sandbox_id: str) -> None:
        """Stop the sandbox and delete its workspace."""
        ...

    async def hibernate(self, sandbox: Sandbox) -> None:
        """Put an idle sandbox to sleep, keeping what `capabilities.hibernation` says: its
        files (stop every process), or its memory too (pause). The next `create` of the same
        id wakes it."""
        ...

    def root_plan(self, sandbox_id: str) -> RootPlan:
        """What the sandbox's `/` is made of, and whether it may change it."""
        ...

    async def copy_root(self, source_id: str, target_id: str) -> None:
        """Give `target_id`, not booted yet, a copy of what `source_id` changed of its
        system (a fork); nothing where the backend keeps no such changes apart."""
        ...

    def disk_used(self, sandbox_id: str) -> int | None:
        """Bytes the sandbox's workspace takes on the host's disk now (blocks allocated),
        whether it runs or not; None when this backend cannot tell (a remote one's disks
        are its host's to bound). Cheap: per-user quotas sum it over many sandboxes."""
        ...

    async def recover(self) -> None:
        """On start: reap (or adopt) what a dead server of the same data left behind, such
        as processes and mounts of its sandboxes; may finish in the background, but before
        the sandbox concerned is created again."""
        ...

    async def close(self) -> None:
        """Stop every sandbox this backend started (server shutdown). Files stay."""
        ...
