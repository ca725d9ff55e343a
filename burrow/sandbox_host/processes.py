"""The processes of one hosted sandbox, as envd's Process service sees them.

Burrow's sandbox runs a command as a stream (`Sandbox.exec`) or a shell on a PTY
(`Sandbox.open_pty`); envd names processes by pid, lets several clients attach to one
(`Connect`), feeds them input by pid and signals them. A `HostedProcess` is that bridge: a
pump task reads the command's output and fans it out to the attached streams, and input
goes through a bounded queue into the command's stdin stream. A process outlives the
stream that started it (the SDK's background commands and `disconnect()`), until it exits,
is killed, or its sandbox goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import posixpath
import shlex
import signal
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from burrow.sandbox.backend import (
    ErrorCode,
    ExecChunk,
    ExecExit,
    ExecRequest,
    PtySession,
    Sandbox,
    SandboxError,
    closing_exec,
)
from burrow.sandbox_host import users
from burrow.sandbox_host.users import E2B_USER

MAX_PROCESSES = 64  # live processes per sandbox: a flood of Starts meets a clear refusal
MAX_PENDING_INPUT = 8 * 1024 * 1024  # stdin bytes sent but not yet taken by the command
SUBSCRIBER_BACKLOG = 256  # output events queued for one attached stream
SLOW_SUBSCRIBER_SECONDS = 10.0  # a stream this far behind is detached; the process runs on
SHELLS = {"bash", "sh", "zsh", "dash"}


@dataclass(frozen=True)
class ProcessSpec:
    cmd: str
    args: list[str]
    envs: dict[str, str]
    cwd: str | None  # inside the sandbox; None: the workspace
    tag: str | None = None
    user: str = E2B_USER  # who it runs as (users.py)
    users: bool = False  # the sandbox has that user besides root; False: its one user runs it


@dataclass(frozen=True)
class Output:
    stream: Literal["stdout", "stderr", "pty"]
    data: bytes


@dataclass(frozen=True)
class Ended:
    exit: ExecExit
    error: str | None = None


@dataclass(frozen=True)
class Detached:
    """The attached stream fell too far behind and was dropped (the process runs on)."""


ProcessEvent = Output | Ended | Detached


class ProcessError(Exception):
    """A request about a process that cannot be honoured; `kind` picks the wire code."""

    def __init__(self, kind: Literal["not_found", "invalid", "exhausted"], message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass
class _Subscriber:
    queue: asyncio.Queue[ProcessEvent] = field(default_factory=asyncio.Queue)
    room: asyncio.Event = field(default_factory=asyncio.Event)


class HostedProcess:
    def __init__(
        self,
        pid: int,
        spec: ProcessSpec,
        *,
        pty: PtySession | None,
        slow_after: float = SLOW_SUBSCRIBER_SECONDS,
    ) -> None:
        self.pid = pid
        self.slow_after = slow_after
        self.spec = spec
        self.pty = pty
        self.ended: Ended | None = None
        self._subscribers: list[_Subscriber] = []
        self._stdin: asyncio.Queue[bytes | None] | None = None
        self._pending_input = 0
        self._task: asyncio.Task[None] | None = None

    # -- attach -------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def attach(self) -> AsyncIterator[asyncio.Queue[ProcessEvent]]:
        """A queue of this process's events from now on, ending with `Ended` (or
        `Detached`); detached when the block is left."""
        subscriber = _Subscriber()
        if self.ended is not None:
            subscriber.queue.put_nowait(self.ended)
        else:
            self._subscribers.append(subscriber)
        try:
            yield subscriber.queue
        finally:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)
            subscriber.room.set()  # a pump waiting for this stream to catch up goes on

    def taken(self, queue: asyncio.Queue[ProcessEvent]) -> None:
        """The attached stream took an event: the pump may go on if it waited for room."""
        for subscriber in self._subscribers:
            if subscriber.queue is queue and queue.qsize() < SUBSCRIBER_BACKLOG // 2:
                subscriber.room.set()

    async def _publish(self, event: Output) -> None:
        for subscriber in list(self._subscribers):
            if subscriber not in self._subscribers:
                continue  # it left while the pump waited for another
            if subscriber.queue.qsize() >= SUBSCRIBER_BACKLOG:
                # Back-pressure: the command's pipe fills while one client catches up,
                # but a client that stops reading does not hold the command forever.
                subscriber.room.clear()
                try:
                    await asyncio.wait_for(subscriber.room.wait(), self.slow_after)
                except TimeoutError:
                    if subscriber in self._subscribers:
                        self._subscribers.remove(subscriber)
                    subscriber.queue.put_nowait(Detached())
                    continue
            if subscriber in self._subscribers:  # it may have left while the pump waited
                subscriber.queue.put_nowait(event)

    def _finish(self, ended: Ended) -> None:
        self.ended = ended
        for subscriber in self._subscribers:
            subscriber.queue.put_nowait(ended)
        self._subscribers.clear()

    # -- run ----------------------------------------------------------------------------

    def run_exec(self, sandbox: Sandbox, env: Mapping[str, str], with_stdin: bool) -> None:
        stdin: AsyncIterator[bytes] | None = None
        if with_stdin:
            self._stdin = asyncio.Queue()
            stdin = self._input_stream(self._stdin)
        argv = users.command([self.spec.cmd, *self.spec.args], self.spec.user, self.spec.users)
        request = ExecRequest(argv=argv, cwd=self.spec.cwd, env=dict(env), stdin=stdin)
        lookup = users.lookup(self.spec.cmd, self.spec.user, self.spec.users)
        probe = None if lookup is None else replace(request, argv=lookup, stdin=None)
        self._task = asyncio.create_task(self._pump_exec(sandbox, request, probe))

    async def _input_stream(self, queue: asyncio.Queue[bytes | None]) -> AsyncIterator[bytes]:
        while (data := await queue.get()) is not None:
            self._pending_input -= len(data)
            yield data

    async def _pump_exec(
        self, sandbox: Sandbox, request: ExecRequest, probe: ExecRequest | None
    ) -> None:
        exit = ExecExit(None, signal=int(signal.SIGKILL))
        error = None
        try:
            if probe is not None and not await _found(sandbox, probe):
                raise SandboxError(ErrorCode.EXEC_NOT_FOUND, f"Command not found: {self.spec.cmd}")
            async with closing_exec(sandbox.exec(request)) as events:
                async for event in events:
                    if isinstance(event, ExecChunk):
                        await self._publish(Output(event.stream, event.data))
                    else:
                        exit = event
        except SandboxError as exc:
            exit, error = ExecExit(None), exc.message
        except asyncio.CancelledError:
            pass  # killed: closing the exec stream killed the process group
        self._finish(Ended(exit, error))

    def run_pty(self) -> None:
        self._task = asyncio.create_task(self._pump_pty())

    async def _pump_pty(self) -> None:
        assert self.pty is not None
        try:
            while data := await self.pty.read():
                await self._publish(Output("pty", data))
        except asyncio.CancelledError:
            self.pty.close()
        self._finish(Ended(self.pty.exit or ExecExit(None, signal=int(signal.SIGHUP))))

    # -- control ------------------------------------------------------------------------

    async def send_input(self, data: bytes, *, pty: bool) -> None:
        if self.ended is not None:
            raise ProcessError("not_found", f"Process {self.pid} has exited.")
        if self.pty is not None:
            await self.pty.write(data)  # PTY or stdin input both are keystrokes for a PTY
            return
        if pty:
            raise ProcessError("invalid", f"Process {self.pid} has no PTY; send stdin instead.")
        if self._stdin is None:
            raise ProcessError(
                "invalid", f"Process {self.pid} was started without stdin (stdin=False)."
            )
        if self._pending_input + len(data) > MAX_PENDING_INPUT:
            raise ProcessError(
                "exhausted",
                f"Process {self.pid} has {self._pending_input} bytes of input it has not "
                f"read yet; at most {MAX_PENDING_INPUT} may wait.",
            )
        self._pending_input += len(data)
        self._stdin.put_nowait(data)

    async def close_stdin(self) -> None:
        if self.pty is not None:
            raise ProcessError("invalid", "A PTY has no stdin to close: send Ctrl-D (0x04).")
        if self._stdin is None:
            raise ProcessError("invalid", f"Process {self.pid} was started without stdin.")
        self._stdin.put_nowait(None)

    async def resize(self, cols: int, rows: int) -> None:
        if self.pty is None:
            raise ProcessError("invalid", f"Process {self.pid} has no PTY to resize.")
        await self.pty.resize(cols, rows)

    def kill(self) -> None:
        if self.pty is not None:
            self.pty.close()  # the shell and its jobs get SIGHUP, then SIGKILL
        elif self._task is not None:
            self._task.cancel()

    async def wait(self) -> None:
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)


class ProcessTable:
    """The live processes of one sandbox, by pid (and tag)."""

    def __init__(self, slow_after: float = SLOW_SUBSCRIBER_SECONDS) -> None:
        self.slow_after = slow_after  # an attached stream this far behind is detached
        self._pids = itertools.count(1000)
        self._processes: dict[int, HostedProcess] = {}

    async def start(
        self,
        sandbox: Sandbox,
        spec: ProcessSpec,
        env: Mapping[str, str],
        *,
        stdin: bool,
        pty_size: tuple[int, int] | None,
    ) -> HostedProcess:
        if len(self._processes) >= MAX_PROCESSES:
            raise ProcessError(
                "exhausted",
                f"This sandbox runs {MAX_PROCESSES} processes already; wait for one to end "
                "or kill one.",
            )
        pid = next(self._pids)
        if pty_size is None:
            process = HostedProcess(pid, spec, pty=None, slow_after=self.slow_after)
            process.run_exec(sandbox, env, stdin)
        else:
            pty = await sandbox.open_pty(*pty_size, env=env)
            process = HostedProcess(pid, spec, pty=pty, slow_after=self.slow_after)
            if line := _pty_command_line(spec):
                await pty.write(line.encode())
            process.run_pty()
        self._processes[pid] = process
        asyncio.get_running_loop().create_task(self._forget_when_done(process))
        return process

    async def _forget_when_done(self, process: HostedProcess) -> None:
        await process.wait()
        self._processes.pop(process.pid, None)

    def find(self, pid: int | None = None, tag: str | None = None) -> HostedProcess:
        for process in self._processes.values():
            if (pid is not None and process.pid == pid) or (
                tag is not None and process.spec.tag == tag
            ):
                return process
        what = f"pid {pid}" if pid is not None else f"tag {tag!r}"
        raise ProcessError("not_found", f"No running process with {what}.")

    def running(self) -> list[HostedProcess]:
        return [p for p in self._processes.values() if p.ended is None]

    async def kill_all(self) -> None:
        processes = list(self._processes.values())
        for process in processes:
            process.kill()
        await asyncio.gather(*(process.wait() for process in processes))
        self._processes.clear()


def _pty_command_line(spec: ProcessSpec) -> str:
    """What to type into the PTY's login shell for a Start that asked for another program
    or directory than a shell in the workspace (the SDK's own PTY asks for `bash -i -l`)."""
    steps = []
    if spec.cwd:
        steps.append(f"cd {shlex.quote(spec.cwd)}")
    # The login shell is the sandbox's root's: another user's program is exec'd through
    # setpriv (users.py), a shell too.
    argv = users.command([spec.cmd, *spec.args], spec.user, spec.users)
    if posixpath.basename(spec.cmd) not in SHELLS or argv[0] != spec.cmd:
        steps.append("exec " + shlex.join(argv))
    return " && ".join(steps) + "\n" if steps else ""


async def _found(sandbox: Sandbox, probe: ExecRequest) -> bool:
    """Whether the lookup (users.lookup) found the program."""
    async with closing_exec(sandbox.exec(probe)) as events:
        async for event in events:
            if isinstance(event, ExecExit):
                return event.exit_code == 0
    return False
