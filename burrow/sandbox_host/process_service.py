"""envd's `process.Process` Connect service on a hosted sandbox's `ProcessTable`."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar, cast

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext
from e2b.envd.process import process_pb as pb
from e2b.envd.process.process_connect import Process
from protobuf import Oneof

from burrow.sandbox.backend import ExecExit, SandboxError
from burrow.sandbox_host import users
from burrow.sandbox_host.paths import BadPath, connect_code, sandbox_path
from burrow.sandbox_host.processes import (
    Detached,
    Ended,
    HostedProcess,
    Output,
    ProcessError,
    ProcessSpec,
)
from burrow.sandbox_host.registry import HostedSandbox, current_sandbox
from burrow.sandbox_host.users import current_user

KEEPALIVE_HEADER = "keepalive-ping-interval"
DEFAULT_KEEPALIVE_SECONDS = 50.0
MIN_KEEPALIVE_SECONDS = 1.0
MAX_PTY_SIDE = 1000
R = TypeVar("R")

_KINDS = {
    "not_found": Code.NOT_FOUND,
    "invalid": Code.INVALID_ARGUMENT,
    "exhausted": Code.RESOURCE_EXHAUSTED,
}


def _hosted() -> HostedSandbox:
    hosted = current_sandbox.get()
    if hosted.state != "running":
        raise ConnectError(Code.UNAVAILABLE, f"Sandbox {hosted.sandbox_id} is paused.")
    return hosted


def _selected(hosted: HostedSandbox, selector: pb.ProcessSelector | None) -> HostedProcess:
    chosen = selector.selector if selector is not None else None
    try:
        if chosen is not None and chosen.field == "pid":
            return hosted.processes.find(pid=int(chosen.value))
        if chosen is not None and chosen.field == "tag":
            return hosted.processes.find(tag=str(chosen.value))
    except ProcessError as exc:
        raise ConnectError(_KINDS[exc.kind], exc.message) from None
    raise ConnectError(Code.INVALID_ARGUMENT, "Select the process by pid or tag.")


def _status(exit: ExecExit) -> pb.ProcessEvent.EndEvent:
    if exit.exit_code is not None:
        return pb.ProcessEvent.EndEvent(
            exit_code=exit.exit_code, exited=True, status=f"exit status {exit.exit_code}"
        )
    name = signal.Signals(exit.signal).name[3:].lower() if exit.signal else "unknown"
    return pb.ProcessEvent.EndEvent(exit_code=-1, exited=False, status=f"signal: {name}")


def _event(kind: str, value: object) -> pb.ProcessEvent:
    return pb.ProcessEvent(event=cast(Any, Oneof(kind, value)))


def _keepalive(ctx: RequestContext[Any, Any]) -> float:
    try:
        seconds = float(ctx.request_headers.get(KEEPALIVE_HEADER, DEFAULT_KEEPALIVE_SECONDS))
    except ValueError:
        seconds = DEFAULT_KEEPALIVE_SECONDS
    return max(MIN_KEEPALIVE_SECONDS, seconds)


async def _stream(
    process: HostedProcess,
    wrap: Callable[[pb.ProcessEvent], R],
    ctx: RequestContext[Any, Any],
    *,
    kill_at_deadline: bool,
) -> AsyncIterator[R]:
    """The process's events from now on as envd sends them: start, data..., end. At the
    request's deadline (the SDK's command `timeout`) the stream ends with DEADLINE_EXCEEDED
    and, for the stream that started the process, the process is killed, as envd does."""
    keepalive = _keepalive(ctx)
    remaining_ms = ctx.timeout_ms
    deadline = None if remaining_ms is None else time.monotonic() + remaining_ms / 1000
    async with process.attach() as queue:
        yield wrap(_event("start", pb.ProcessEvent.StartEvent(pid=process.pid)))
        while True:
            wait = keepalive
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    if kill_at_deadline:
                        process.kill()
                    raise ConnectError(
                        Code.DEADLINE_EXCEEDED,
                        f"Process {process.pid} outlived the request's timeout"
                        + (" and was killed." if kill_at_deadline else "."),
                    )
            try:
                event = await asyncio.wait_for(queue.get(), wait)
            except TimeoutError:
                if deadline is None or deadline > time.monotonic():
                    yield wrap(_event("keepalive", pb.ProcessEvent.KeepAlive()))
                continue
            process.taken(queue)
            if isinstance(event, Output):
                data = pb.ProcessEvent.DataEvent(output=cast(Any, Oneof(event.stream, event.data)))
                yield wrap(_event("data", data))
            elif isinstance(event, Ended):
                end = _status(event.exit)
                if event.error is not None:
                    end.error = event.error
                yield wrap(_event("end", end))
                return
            elif isinstance(event, Detached):
                raise ConnectError(
                    Code.RESOURCE_EXHAUSTED,
                    f"This stream fell too far behind process {process.pid}'s output and was "
                    "detached; the process runs on (reconnect with its pid).",
                )


class ProcessService(Process):
    async def list(
        self, request: pb.ListRequest, ctx: RequestContext[pb.ListRequest, pb.ListResponse]
    ) -> pb.ListResponse:
        hosted = _hosted()
        return pb.ListResponse(
            processes=[
                pb.ProcessInfo(
                    config=pb.ProcessConfig(
                        cmd=p.spec.cmd, args=p.spec.args, envs=p.spec.envs, cwd=p.spec.cwd
                    ),
                    pid=p.pid,
                    tag=p.spec.tag,
                )
                for p in hosted.processes.running()
            ]
        )

    async def start(
        self, request: pb.StartRequest, ctx: RequestContext[pb.StartRequest, pb.StartResponse]
    ) -> AsyncIterator[pb.StartResponse]:
        hosted = _hosted()
        config = request.process or pb.ProcessConfig()
        if not config.cmd:
            raise ConnectError(Code.INVALID_ARGUMENT, "process.cmd is required.")
        try:
            # No cwd: where its template's steps ended (WORKDIR), else /home/user.
            cwd = sandbox_path(config.cwd or hosted.workdir or "", hosted.sandbox.workspace)
        except BadPath as exc:
            raise ConnectError(Code.INVALID_ARGUMENT, str(exc)) from None
        spec = ProcessSpec(
            cmd=config.cmd,
            args=list(config.args),
            envs=dict(config.envs),
            cwd=cwd,
            tag=request.tag or None,
            user=current_user.get() or hosted.user,
            users=hosted.users,
        )
        pty_size = None
        if request.pty is not None:
            size = request.pty.size or pb.PTY.Size(cols=80, rows=24)
            pty_size = (_side(size.cols, "cols"), _side(size.rows, "rows"))
        try:
            process = await hosted.processes.start(
                hosted.sandbox,
                spec,
                {**users.environment(spec.user, spec.users), **hosted.envs, **spec.envs},
                stdin=bool(request.stdin),
                pty_size=pty_size,
            )
        except ProcessError as exc:
            raise ConnectError(_KINDS[exc.kind], exc.message) from None
        except SandboxError as exc:
            raise ConnectError(connect_code(exc.code), exc.message) from None
        start = _stream(process, lambda e: pb.StartResponse(event=e), ctx, kill_at_deadline=True)
        async for message in start:
            yield message

    async def connect(
        self, request: pb.ConnectRequest, ctx: RequestContext[pb.ConnectRequest, pb.ConnectResponse]
    ) -> AsyncIterator[pb.ConnectResponse]:
        process = _selected(_hosted(), request.process)
        attached = _stream(
            process, lambda e: pb.ConnectResponse(event=e), ctx, kill_at_deadline=False
        )
        async for message in attached:
            yield message

    async def update(
        self, request: pb.UpdateRequest, ctx: RequestContext[pb.UpdateRequest, pb.UpdateResponse]
    ) -> pb.UpdateResponse:
        process = _selected(_hosted(), request.process)
        if request.pty is not None and request.pty.size is not None:
            size = request.pty.size
            await _control(
                lambda: process.resize(_side(size.cols, "cols"), _side(size.rows, "rows"))
            )
        return pb.UpdateResponse()

    async def stream_input(
        self,
        request: AsyncIterator[pb.StreamInputRequest],
        ctx: RequestContext[pb.StreamInputRequest, pb.StreamInputResponse],
    ) -> pb.StreamInputResponse:
        hosted = _hosted()
        process: HostedProcess | None = None
        async for message in request:
            event = message.event
            if event is None:
                continue
            if event.field == "start":
                process = _selected(hosted, event.value.process)
            elif event.field == "data":
                if process is None:
                    raise ConnectError(
                        Code.INVALID_ARGUMENT, "StreamInput: send the start event first."
                    )
                await _send(process, event.value.input)
        return pb.StreamInputResponse()

    async def send_input(
        self,
        request: pb.SendInputRequest,
        ctx: RequestContext[pb.SendInputRequest, pb.SendInputResponse],
    ) -> pb.SendInputResponse:
        await _send(_selected(_hosted(), request.process), request.input)
        return pb.SendInputResponse()

    async def send_signal(
        self,
        request: pb.SendSignalRequest,
        ctx: RequestContext[pb.SendSignalRequest, pb.SendSignalResponse],
    ) -> pb.SendSignalResponse:
        process = _selected(_hosted(), request.process)
        if request.signal not in (pb.Signal.SIGKILL, pb.Signal.SIGTERM):
            raise ConnectError(Code.INVALID_ARGUMENT, "Only SIGKILL and SIGTERM are supported.")
        process.kill()  # both end the process group: Burrow's exec has no gentler stop
        return pb.SendSignalResponse()

    async def close_stdin(
        self,
        request: pb.CloseStdinRequest,
        ctx: RequestContext[pb.CloseStdinRequest, pb.CloseStdinResponse],
    ) -> pb.CloseStdinResponse:
        process = _selected(_hosted(), request.process)
        await _control(process.close_stdin)
        return pb.CloseStdinResponse()


async def _send(process: HostedProcess, given: pb.ProcessInput | None) -> None:
    chosen = given.input if given is not None else None
    if chosen is None:
        return
    await _control(lambda: process.send_input(bytes(chosen.value), pty=chosen.field == "pty"))


async def _control(action: Callable[[], Awaitable[None]]) -> None:
    """A control request on a process; async, as a terminal's keystrokes may be requests
    (`PtySession.write`)."""
    try:
        await action()
    except ProcessError as exc:
        raise ConnectError(_KINDS[exc.kind], exc.message) from None


def _side(value: int, name: str) -> int:
    if not 1 <= value <= MAX_PTY_SIDE:
        raise ConnectError(Code.INVALID_ARGUMENT, f"PTY {name} must be 1 to {MAX_PTY_SIDE}.")
    return value
