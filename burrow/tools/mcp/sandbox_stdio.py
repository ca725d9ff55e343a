"""An MCP stdio transport whose server runs inside a conversation's sandbox.

The server is one `background` exec of the sandbox agent: JSON-RPC lines go in as a
streamed stdin, come out on stdout. Closing the transport closes the exec stream, which
kills the server's whole process group in the sandbox; a sandbox that stops (hibernation,
deletion) ends the stream, and the session sees its server gone.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import AsyncIterator, Mapping

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from burrow.sandbox.backend import ExecExit, ExecRequest, Sandbox, SandboxError

MAX_LINE_BYTES = 16 << 20  # a JSON-RPC message longer than this ends the session
STDERR_LINES = 20


class StderrTail:
    """The last lines the server wrote to stderr: the reason it failed, when it does."""

    def __init__(self) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self.exit: ExecExit | None = None
        self.ended = False  # the server's process is gone (exited, killed, sandbox stopped)

    def add(self, data: bytes) -> None:
        for line in data.decode(errors="replace").splitlines():
            if line.strip():
                self.lines.append(line[:500])

    def describe(self) -> str:
        how = ""
        if self.exit is not None:
            how = (
                f"exited with code {self.exit.exit_code}"
                if self.exit.exit_code is not None
                else f"was killed by signal {self.exit.signal}"
            )
        said = " | ".join(list(self.lines)[-3:])
        return "; ".join(part for part in (how, said) if part)


@contextlib.asynccontextmanager
async def sandbox_stdio(
    sandbox: Sandbox, argv: list[str], env: Mapping[str, str], stderr: StderrTail
) -> AsyncIterator[TransportStreams]:
    incoming: tuple[
        MemoryObjectSendStream[SessionMessage | Exception],
        MemoryObjectReceiveStream[SessionMessage | Exception],
    ] = anyio.create_memory_object_stream(0)
    outgoing: tuple[
        MemoryObjectSendStream[SessionMessage], MemoryObjectReceiveStream[SessionMessage]
    ] = anyio.create_memory_object_stream(0)
    to_session, read_stream = incoming
    write_stream, from_session = outgoing

    async def stdin() -> AsyncIterator[bytes]:
        async with from_session:
            async for message in from_session:
                line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                yield (line + "\n").encode()

    request = ExecRequest(argv=argv, env=dict(env), stdin=stdin(), background=True)

    async def pump() -> None:
        buffer = b""
        async with to_session:
            try:
                events = sandbox.exec(request)
                async with contextlib.aclosing(events):  # type: ignore[type-var]
                    async for event in events:
                        if isinstance(event, ExecExit):
                            stderr.exit = event
                        elif event.stream == "stderr":
                            stderr.add(event.data)
                        else:
                            buffer = await _deliver(buffer + event.data, to_session)
            except SandboxError as exc:
                stderr.lines.append(exc.message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass  # the session is gone
            finally:
                stderr.ended = True

    async with anyio.create_task_group() as tasks, read_stream, write_stream:
        tasks.start_soon(pump)
        try:
            yield read_stream, write_stream
        finally:
            tasks.cancel_scope.cancel()  # closes the exec stream: the server is killed


async def _deliver(
    data: bytes, to_session: MemoryObjectSendStream[SessionMessage | Exception]
) -> bytes:
    """Send every whole line of `data` to the session; returns the unfinished rest."""
    *lines, rest = data.split(b"\n")
    for line in lines:
        if not line.strip():
            continue
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            await to_session.send(exc)
            continue
        await to_session.send(SessionMessage(message))
    if len(rest) > MAX_LINE_BYTES:
        raise anyio.BrokenResourceError(f"a message longer than {MAX_LINE_BYTES} bytes")
    return rest
