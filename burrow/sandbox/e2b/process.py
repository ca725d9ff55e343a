"""Commands and terminals in an E2B sandbox, over envd's process RPCs.

A one-shot command goes through the `process.Process` client the SDK builds for its own
`commands` module, not through `commands.run`: that one decodes output as text and runs a
shell line, while Burrow's exec streams raw bytes of an argv. Terminals use the SDK's
`pty` module as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any, Literal, cast

from e2b import AsyncSandbox
from e2b.connection_config import KEEPALIVE_PING_HEADER, KEEPALIVE_PING_INTERVAL_SEC
from e2b.envd.client_async import as_stream, create_rpc_client, first_event
from e2b.envd.process import process_connect, process_pb
from e2b.envd.utils import authentication_header, extract_start_pid
from e2b.sandbox.commands.command_handle import CommandExitException, PtySize
from protobuf import Oneof

from burrow.sandbox.backend import ExecChunk, ExecEvent, ExecExit, ExecRequest
from burrow.sandbox.e2b.errors import from_sdk, mapped

START_SECONDS = 30.0  # for the remote side to start a command
KILL_SECONDS = 5.0  # for a kill request when a command is abandoned
STDIN_PIECE = 64 * 1024
PTY_BACKLOG = 256  # output pieces a terminal holds before the remote stream waits for its reader

# Go's names for signals (os.ProcessState.String(): "signal: killed"), as envd reports them.
_SIGNAL_NAMES = {
    "hangup": signal.SIGHUP,
    "interrupt": signal.SIGINT,
    "quit": signal.SIGQUIT,
    "aborted": signal.SIGABRT,
    "killed": signal.SIGKILL,
    "segmentation fault": signal.SIGSEGV,
    "broken pipe": signal.SIGPIPE,
    "alarm clock": signal.SIGALRM,
    "terminated": signal.SIGTERM,
    "user defined signal 1": signal.SIGUSR1,
    "user defined signal 2": signal.SIGUSR2,
}


class RemoteProcesses:
    """Starts, feeds and kills commands of one remote sandbox."""

    def __init__(self, remote: AsyncSandbox) -> None:
        self._remote = remote
        self._rpc = create_rpc_client(
            process_connect.ProcessClient, remote.envd_api_url, remote.connection_config
        )

    async def run(self, request: ExecRequest, workspace: str) -> AsyncIterator[ExecEvent]:
        """`Sandbox.exec` without the result file (the caller reads that); an empty
        `workspace` lets the remote side choose where the command starts."""
        config = process_pb.ProcessConfig(
            cmd=request.argv[0],
            args=list(request.argv[1:]),
            envs=dict(request.env),
            cwd=(request.cwd or workspace) or None,
        )
        start = process_pb.StartRequest(process=config, stdin=request.stdin is not None)
        # The headers `commands.run` sends: the default user (older envd) and keepalives.
        headers = {
            **authentication_header(self._remote._envd_version),
            KEEPALIVE_PING_HEADER: str(KEEPALIVE_PING_INTERVAL_SEC),
        }
        events = as_stream(self._rpc.start(start, headers=headers))
        pid: int | None = None
        ended = timed_out = False
        tasks: list[asyncio.Task[Any]] = []
        timer: asyncio.TimerHandle | None = None
        try:
            with mapped("start the command"):
                pid = extract_start_pid(await first_event(events, START_SECONDS), "start")
            if request.stdin is not None:
                tasks.append(asyncio.create_task(self._feed(pid, request.stdin)))
            if request.timeout is not None:

                def expire() -> None:
                    nonlocal timed_out
                    timed_out = True
                    tasks.append(asyncio.create_task(self.kill(pid)))

                timer = asyncio.get_running_loop().call_later(request.timeout, expire)
            with mapped("read the command's output"):
                async for response in events:
                    event = (
                        response.event.event.value
                        if response.event and response.event.event
                        else None
                    )
                    if isinstance(event, process_pb.ProcessEvent.DataEvent):
                        output = event.output
                        if (
                            output is not None
                            and output.field in ("stdout", "stderr")
                            and output.value
                        ):
                            yield ExecChunk(output.field, output.value)
                    elif isinstance(event, process_pb.ProcessEvent.EndEvent):
                        ended = True
                        yield (
                            ExecExit(None, signal.SIGKILL, timed_out=True)
                            if timed_out
                            else _exit(event)
                        )
                        return
            # The stream ended without an end event: the connection broke (the command may
            # still run; the finally kills it).
            raise from_sdk(ConnectionError("the command's output stream broke off"), "run it")
        finally:
            if timer is not None:
                timer.cancel()
            for task in tasks:
                task.cancel()
            if pid is not None and not ended:  # abandoned (closed early, cancelled): kill it
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.kill(pid))
            with contextlib.suppress(Exception):
                await events.aclose()

    async def kill(self, pid: int) -> None:
        """SIGKILL to the command (envd kills its process group)."""
        request = process_pb.SendSignalRequest(
            process=_selector(pid),
            signal=process_pb.Signal.SIGKILL,
        )
        with contextlib.suppress(Exception):
            async with asyncio.timeout(KILL_SECONDS):
                await self._rpc.send_signal(request)

    async def _feed(self, pid: int, stdin: bytes | AsyncIterable[bytes]) -> None:
        """Write stdin in order, then close it (EOF), as the local guest does."""
        selector = _selector(pid)
        pieces = _pieces(stdin) if isinstance(stdin, bytes) else stdin
        try:
            async for piece in pieces:
                for start in range(0, len(piece), STDIN_PIECE):
                    data = piece[start : start + STDIN_PIECE]
                    await self._rpc.send_input(
                        process_pb.SendInputRequest(
                            process=selector,
                            input=process_pb.ProcessInput(input=_stdin(data)),
                        )
                    )
            await self._rpc.close_stdin(process_pb.CloseStdinRequest(process=selector))
        except Exception:
            return  # the command ended or stopped reading; its exit says how


def _selector(pid: int) -> process_pb.ProcessSelector:
    return process_pb.ProcessSelector(selector=cast(Oneof[Literal["pid"], int], Oneof("pid", pid)))


def _stdin(data: bytes) -> Oneof[Literal["stdin"], bytes]:
    return cast(Oneof[Literal["stdin"], bytes], Oneof("stdin", data))


async def _pieces(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _exit(end: process_pb.ProcessEvent.EndEvent) -> ExecExit:
    """The exit an end event reports; an error there (the command could not run: a missing
    working directory or program) is raised, as the local backend raises it."""
    if end.has_field("error") and end.error:
        raise from_sdk(RuntimeError(end.error), "run the command")
    status = (end.status or "").strip().lower()
    if status.startswith("signal:"):
        name = status.partition(":")[2].strip()
        number = _SIGNAL_NAMES.get(name) or _signal_number(name)
        if number is not None:
            return ExecExit(None, int(number))
    return ExecExit(end.exit_code)


def _signal_number(name: str) -> int | None:
    """`9`, `kill`, `sigkill`: the short forms other envd implementations write."""
    if name.isdigit():
        return int(name)
    short = name.upper().removeprefix("SIG")
    member = signal.Signals.__members__.get(f"SIG{short}")
    return int(member) if member is not None else None


class RemotePty:
    """An E2B PTY as a `PtySession`: output through a bounded queue (the remote stream
    waits while it is full), input and resizes as requests."""

    def __init__(self, remote: AsyncSandbox) -> None:
        self._remote = remote
        self._output: asyncio.Queue[bytes] = asyncio.Queue(PTY_BACKLOG)
        self._pid: int | None = None
        self._ended = asyncio.Event()
        self._closing: asyncio.Task[Any] | None = None
        self._waiter: asyncio.Task[None] | None = None
        self.exit: ExecExit | None = None
        self._code: int | None = None

    async def start(self, cols: int, rows: int, cwd: str, env: dict[str, str]) -> RemotePty:
        with mapped("open a terminal"):
            handle = await self._remote.pty.create(
                PtySize(rows=rows, cols=cols),
                on_data=self._output.put,
                cwd=cwd,
                envs=env,
                timeout=0,
            )
        self._pid = handle.pid
        self._waiter = asyncio.create_task(self._wait(handle.wait))
        return self

    async def _wait(self, wait: Callable[[], Any]) -> None:
        try:
            await wait()
            self._code = 0
        except CommandExitException as exc:
            self._code = exc.exit_code
        except Exception:
            self._code = None  # the stream broke: the shell is gone for us
        self._ended.set()

    async def read(self) -> bytes:
        if self.exit is not None:
            return b""
        if self._output.empty() and self._ended.is_set():
            self.exit = ExecExit(self._code)
            return b""
        getting = asyncio.ensure_future(self._output.get())
        ending = asyncio.ensure_future(self._ended.wait())
        try:
            await asyncio.wait((getting, ending), return_when=asyncio.FIRST_COMPLETED)
        finally:
            ending.cancel()
            if not getting.done():
                getting.cancel()
        if getting.done() and not getting.cancelled():
            return getting.result()
        return await self.read()

    async def write(self, data: bytes) -> None:
        if data and self.exit is None and self._pid is not None:
            with contextlib.suppress(Exception):  # the shell is gone; read() reports its end
                await self._remote.pty.send_stdin(self._pid, data)

    async def resize(self, cols: int, rows: int) -> None:
        if self.exit is None and self._pid is not None:
            with contextlib.suppress(Exception):
                await self._remote.pty.resize(self._pid, PtySize(rows=rows, cols=cols))

    def close(self) -> None:
        """Kill the shell (a request, so it runs in the background)."""
        if self._pid is not None and self._closing is None and not self._ended.is_set():
            self._closing = asyncio.ensure_future(self._kill(self._pid))

    async def _kill(self, pid: int) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(KILL_SECONDS):
                await self._remote.pty.kill(pid)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(KILL_SECONDS):
                await self._ended.wait()
        self._ended.set()
