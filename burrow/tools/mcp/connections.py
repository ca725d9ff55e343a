"""Each conversation's connections to the MCP servers of mcp.json, and their tools.

At the start of each run the servers are (re)connected as needed: a stdio server in the
conversation's sandbox (or on the host when an administrator said so), an HTTP server
from the host through the URL policy. A server that cannot be used is a `mcp.warning`
event and its tools are absent; the run goes on. Connections outlive runs and end when
the conversation is deleted, its sandbox stops (hibernation), or the server shuts down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from burrow.sandbox.backend import Sandbox, SandboxError
from burrow.tools.base import Tool
from burrow.tools.mcp import servers
from burrow.tools.mcp.outbound import UrlPolicy, UrlRefused
from burrow.tools.mcp.servers import ConfigError, ServerConfig

# The MCP SDK (and what of Burrow's wraps it) loads with the first server started: it
# costs `burrow serve` a large share of its start, and most servers have no mcp.json.
if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

    from burrow.tools.mcp.session import McpSession

log = logging.getLogger(__name__)

# cid -> (owner id, the values of the secrets the conversation chose, by name); None: no
# such conversation. Never the owner's other secrets: a server sees what its run may.
SecretsOf = Callable[[str], Awaitable[tuple[str, dict[str, str]] | None]]


@dataclass(frozen=True)
class ServerState:
    """A server as `GET /api/mcp/servers` shows it to one user."""

    name: str
    transport: str  # "sandbox" | "host" | "http"
    status: str  # "connected" | "failed" | "stopped" | "not_started" | "invalid"
    tools: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


@dataclass
class _Connection:
    config: ServerConfig  # as expanded: a changed secret reconnects
    session: McpSession
    tools: dict[str, Tool]


class McpConnections:
    def __init__(
        self,
        data_dir: Path,
        *,
        sandbox: Callable[[str], Awaitable[Sandbox]],
        secrets_of: SecretsOf,
        policy: UrlPolicy,
        connect_timeout: float = 30.0,
        idle_seconds: float | None = None,
    ) -> None:
        self.data_dir = data_dir
        self._sandbox = sandbox  # the conversation's bare sandbox: files, processes
        self._secrets_of = secrets_of
        self.policy = policy
        self.connect_timeout = connect_timeout
        self._live: dict[str, dict[str, _Connection]] = {}  # cid -> server -> connection
        self._owners: dict[str, str] = {}  # cid -> owner
        self._seen: dict[str, dict[str, ServerState]] = defaultdict(dict)  # owner -> last
        self._warned: dict[str, dict[str, str]] = defaultdict(dict)  # cid -> server -> message
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        # Servers of a conversation without a run for this long are stopped (like its
        # sandbox hibernates), so idle conversations keep no host process; None: never.
        self.idle_seconds = idle_seconds
        self._last_run: dict[str, float] = {}

    async def tools_for(self, cid: str, run_id: str) -> tuple[dict[str, Tool], dict[str, str]]:
        """The MCP tools the conversation's run gets, and warnings for servers left out."""
        await self._stop_idle(cid)
        config = servers.load(self.data_dir)
        if not config.servers and not config.problems:
            return {}, {}
        self._last_run[cid] = time.monotonic()
        found = await self._secrets_of(cid)
        if found is None:
            return {}, {}
        owner, secrets = found
        self._owners[cid] = owner
        tools: dict[str, Tool] = {}
        warnings: dict[str, str] = dict(config.problems)
        async with self._locks[cid]:
            live = self._live.setdefault(cid, {})
            for gone in set(live) - {s.name for s in config.servers}:
                await live.pop(gone).session.close()
            for server in config.servers:
                connection, problem = await self._connect(cid, server, secrets)
                if connection is not None and problem:
                    warnings[server.name] = f"MCP server {server.name!r}: {problem}"
                if connection is None:
                    warnings[server.name] = problem
                    self._seen[owner][server.name] = ServerState(
                        server.name, server.transport, "failed", error=problem
                    )
                    continue
                for name, tool in connection.tools.items():
                    tools.setdefault(name, tool)
                self._seen[owner][server.name] = _state(server, connection.session)
        return tools, self._warnings(cid, warnings)

    async def _stop_idle(self, active: str) -> None:
        if not self.idle_seconds:
            return
        now = time.monotonic()
        for cid, last in list(self._last_run.items()):
            live = self._live.get(cid, {})
            idle = min([now - last, *(c.session.idle_for() for c in live.values())])
            if cid != active and idle > self.idle_seconds:
                del self._last_run[cid]
                async with self._locks[cid]:
                    for connection in self._live.pop(cid, {}).values():
                        await connection.session.close()

    def _warnings(self, cid: str, current: dict[str, str]) -> dict[str, str]:
        """A warning when a server's trouble is new, not again at every run."""
        shown = self._warned[cid]
        new = {name: message for name, message in current.items() if shown.get(name) != message}
        self._warned[cid] = dict(current)
        return new

    async def _connect(
        self, cid: str, server: ServerConfig, secrets: Mapping[str, str]
    ) -> tuple[_Connection | None, str]:
        live = self._live[cid]
        try:
            self._check_secret_destination(server)
            expanded = server.expanded(secrets)
        except ConfigError as exc:
            old = live.pop(server.name, None)
            if old is not None:
                await old.session.close()
            return None, str(exc)
        current = live.get(server.name)
        if current is not None and current.config == expanded and current.session.alive:
            return current, ""
        if current is not None:
            await live.pop(server.name).session.close()
        try:
            session = await self._open(cid, expanded)
        except (UrlRefused, SandboxError) as exc:
            return None, f"MCP server {server.name!r} was not started: {_text(exc)}"
        await session.start(self.connect_timeout)
        if session.status != "connected":
            await session.close()
            return None, f"MCP server {server.name!r} is unavailable: {session.error}"
        from burrow.tools.mcp.tool import offered

        tools, left_out = offered(server.name, session, in_sandbox=server.transport == "sandbox")
        connection = _Connection(expanded, session, dict(tools))
        live[server.name] = connection
        if left_out:
            return connection, f"some tools were left out: {'; '.join(left_out[:5])}"
        return connection, ""

    def _check_secret_destination(self, server: ServerConfig) -> None:
        """Secrets in an HTTP server's headers go only to a URL the operator listed: mcp.json
        is a web administrator's to edit, the allow list the machine owner's."""
        if server.url is None or not server.placeholders():
            return
        try:
            self.policy.check_url(server.url)  # its own reason first (a dot segment, ...)
        except UrlRefused as exc:
            raise ConfigError(f"MCP server {server.name!r} was not started: {exc}") from None
        if not self.policy.explicitly_allowed(server.url):
            raise ConfigError(
                f"MCP server {server.name!r} was not started: its headers carry secrets "
                f"({', '.join(server.placeholders())}), which are sent only to URLs listed in "
                f"{self.policy.setting}; list {server.url} there to allow it"
            )

    async def _open(self, cid: str, server: ServerConfig) -> McpSession:
        from burrow.tools.mcp.sandbox_stdio import StderrTail, sandbox_stdio
        from burrow.tools.mcp.session import McpSession

        if server.url is not None:
            url = server.url
            self.policy.check_url(url)
            headers = dict(server.headers)
            refusal = HttpRefusal()
            return McpSession(
                server.name,
                lambda: _http(self.policy, url, headers, refusal),
                describe_failure=refusal.describe,
            )
        assert server.command is not None
        if server.host:
            return _host_session(server, self.data_dir)
        sandbox = await self._sandbox(cid)
        tail = StderrTail()
        argv = [server.command, *server.args]
        return McpSession(
            server.name,
            lambda: sandbox_stdio(sandbox, argv, server.env, tail),
            describe_failure=tail.describe,
            ended=lambda: tail.ended,
        )

    def status(self, owner: str, secret_names: set[str]) -> list[ServerState]:
        """Every configured server as this user's conversations last found it."""
        config = servers.load(self.data_dir)
        states = [
            ServerState(name, "unknown", "invalid", error=problem)
            for name, problem in config.problems
        ]
        live = {
            name: connection.session
            for cid, connections in self._live.items()
            if self._owners.get(cid) == owner
            for name, connection in connections.items()
            if connection.session.alive
        }
        for server in config.servers:
            missing = [n for n in server.placeholders() if n not in secret_names]
            if missing:
                states.append(
                    ServerState(
                        server.name,
                        server.transport,
                        "failed",
                        error=str(servers.MissingSecret(server.name, missing)),
                    )
                )
            elif server.name in live:
                states.append(_state(server, live[server.name]))
            elif server.name in self._seen[owner]:
                seen = self._seen[owner][server.name]
                status = "stopped" if seen.status == "connected" else seen.status
                states.append(
                    ServerState(seen.name, seen.transport, status, seen.tools, seen.error)
                )
            else:
                states.append(ServerState(server.name, server.transport, "not_started"))
        return states

    async def forget(self, cid: str) -> None:
        """The conversation was deleted: its servers stop."""
        async with self._locks[cid]:
            for connection in self._live.pop(cid, {}).values():
                await connection.session.close()
        self._locks.pop(cid, None)
        self._owners.pop(cid, None)
        self._warned.pop(cid, None)
        self._last_run.pop(cid, None)

    async def close(self) -> None:
        """Server shutdown: every MCP server stops, none is left running."""
        cids = list(self._live)
        await asyncio.gather(*(self.forget(cid) for cid in cids), return_exceptions=True)


def _state(server: ServerConfig, session: McpSession) -> ServerState:
    from burrow.tools.mcp.tool import offered

    offer, _ = offered(server.name, session)
    tools = [
        {
            "name": tool.spec.name,
            "description": tool.spec.description.removeprefix(f"[MCP server {server.name}] ")[:300],
            "kind": tool.kind.as_event(),
        }
        for tool in offer.values()
    ]
    status = "connected" if session.alive else ("failed" if session.error else "stopped")
    return ServerState(server.name, server.transport, status, tools, session.error)


class HttpRefusal:
    """The last error status an HTTP server answered, said with the failure: the SDK's own
    words ("Server returned an error response") do not say what to do about it."""

    def __init__(self) -> None:
        self.status: int | None = None

    async def saw(self, response: Any) -> None:  # an httpx response hook
        if response.status_code >= 400:
            self.status = response.status_code

    def describe(self) -> str:
        if self.status in (401, 403):
            return (
                f"HTTP {self.status}: the server asks for authorization. Burrow's MCP client "
                "sends the headers mcp.json gives the server and runs no OAuth flow: add "
                '"headers": {"Authorization": "Bearer ${NAME}"} to its entry, with NAME a '
                "secret the conversation uses"
            )
        return f"HTTP {self.status}" if self.status else ""


@contextlib.asynccontextmanager
async def _http(
    policy: UrlPolicy, url: str, headers: dict[str, str], refusal: HttpRefusal
) -> AsyncIterator[TransportStreams]:
    from mcp.client.streamable_http import streamable_http_client

    from burrow.tools.mcp.outbound_client import checked_client

    client = checked_client(policy, url, headers)
    client.event_hooks["response"].append(refusal.saw)
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


def _host_session(server: ServerConfig, data_dir: Path) -> McpSession:
    """A stdio server on the host, as an administrator allowed: an environment of the
    SDK's safe defaults plus its own `env`, never the rest of Burrow's."""
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from burrow.tools.mcp.session import McpSession

    assert server.command is not None
    errors: TextIO = tempfile.TemporaryFile("w+")  # noqa: SIM115 - lives with the session
    params = StdioServerParameters(
        command=server.command, args=list(server.args), env=dict(server.env), cwd=data_dir
    )

    said: list[str] = []  # read before the file closes with the transport

    def last_words() -> str:
        if said or errors.closed:
            return " | ".join(said)
        errors.seek(0)
        lines = [line.strip() for line in errors.read()[-4000:].splitlines() if line.strip()]
        return " | ".join(lines[-3:])

    @contextlib.asynccontextmanager
    async def transport() -> AsyncIterator[TransportStreams]:
        try:
            async with stdio_client(params, errlog=errors) as streams:
                yield streams
        finally:
            words = last_words()
            if words:
                said.append(words)
            errors.close()

    return McpSession(server.name, transport, describe_failure=last_words)


def _text(exc: Exception) -> str:
    return exc.message if isinstance(exc, SandboxError) else str(exc)
