"""One live connection to one MCP server, on the official SDK's `Client`.

The SDK's client is an async context manager that must be entered and left in one task,
so a session owns a task that holds it open until `close`; calls from runs go through
it meanwhile. Cancelling a call (an interrupted run) sends the server the SDK's
`notifications/cancelled`; closing the session closes the transport, which ends the
server's process (in the sandbox or on the host).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, TypeVar

import mcp_types as types
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.shared.exceptions import MCPError

log = logging.getLogger(__name__)

_R = TypeVar("_R")
Status = Literal["starting", "connected", "failed", "stopped"]
CONNECT_TIMEOUT_SECONDS = 30.0
CLOSE_TIMEOUT_SECONDS = 5.0
MAX_TOOL_PAGES = 20  # tools/list pages followed at most
MAX_RESOURCES = 200  # kept from resources/list: they are named to the model


class McpSession:
    def __init__(
        self,
        name: str,
        transport: Callable[[], AbstractAsyncContextManager[TransportStreams]],
        describe_failure: Callable[[], str] = lambda: "",
        ended: Callable[[], bool] = lambda: False,
    ) -> None:
        self.name = name
        self.status: Status = "starting"
        self.error: str | None = None
        self.tools: list[types.Tool] = []
        self.resources: list[types.Resource] = []  # what resources/list named, if it can
        self.reads_resources = False  # the server has the resources capability
        self._transport = transport
        self._describe_failure = describe_failure  # the server's last words (stderr)
        self._ended = ended  # the transport knows the server is gone
        self._client: Client | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.calls = 0  # calls in flight
        self.last_used = time.monotonic()

    @property
    def alive(self) -> bool:
        return self.status == "connected" and not self._ended()

    async def start(self, timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
        """Connect and list the tools; on failure `status` is "failed" and `error` says why."""
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._serve(), name=f"mcp {self.name}")
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._ready)
        except TimeoutError:
            self._fail(f"did not answer within {timeout:g} s")
            await self.close()
        except asyncio.CancelledError:  # an interrupted run: leave no server behind
            self._stop.set()
            self._task.cancel()
            raise

    async def _serve(self) -> None:
        try:
            client = Client(self._transport(), mode="legacy", cache=None)
            async with client:
                tools = await _list_tools(client)
                if client.server_capabilities.resources is not None:
                    self.reads_resources = True
                    self.resources = await _list_resources(client, self.name)
                self._client, self.tools, self.status = client, tools, "connected"
                self._resolve()
                await self._stop.wait()
        except Exception as exc:
            self._fail(_reason(exc))
        finally:
            self._client = None
            if self.status != "failed":
                self.status = "stopped"
            self._resolve()

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return await self._use(lambda client: client.call_tool(tool, arguments))

    async def read(self, uri: str) -> types.ReadResourceResult:
        return await self._use(lambda client: client.read_resource(uri))

    async def _use(self, request: Callable[[Client], Awaitable[_R]]) -> _R:
        """One request of a run's: an error answer leaves the session as it is; a broken
        connection marks it failed, so the next run connects again."""
        client = self._client
        if client is None or not self.alive:
            raise ConnectionError(f"MCP server {self.name!r} is not connected ({self.error})")
        self.calls += 1
        try:
            return await request(client)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED or self._ended():
                self._fail("the server stopped")
            raise  # the server's own error answer: the session is fine
        except Exception as exc:
            self._fail(f"the connection broke: {_reason(exc, '')}")
            raise
        finally:
            self.calls -= 1
            self.last_used = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the last call ended; 0 while one runs."""
        return 0.0 if self.calls else time.monotonic() - self.last_used

    async def close(self) -> None:
        """Leave the client (the server's process ends with its transport)."""
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT_SECONDS):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _fail(self, reason: str) -> None:
        last_words = self._describe_failure()
        self.status = "failed"
        self.error = f"{reason} ({last_words})" if last_words else reason

    def _resolve(self) -> None:
        if self._ready is not None and not self._ready.done():
            self._ready.set_result(None)


async def _list_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


async def _list_resources(client: Client, name: str) -> list[types.Resource]:
    """The server's resources, as many as are named to the model; a server whose listing
    fails still serves its tools (and reads by URI)."""
    resources: list[types.Resource] = []
    cursor: str | None = None
    try:
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_resources(cursor=cursor)
            resources += page.resources
            cursor = page.next_cursor
            if cursor is None or len(resources) >= MAX_RESOURCES:
                break
    except MCPError as exc:
        log.info("MCP server %r did not list its resources: %s", name, exc)
    return resources[:MAX_RESOURCES]


def _reason(exc: BaseException, prefix: str = "could not connect: ") -> str:
    """What went wrong, from the exception groups anyio wraps failures in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return prefix + (str(exc) or type(exc).__name__)
