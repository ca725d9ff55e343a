"""Ports other than envd's: HTTP and WebSocket to a port on the sandbox's own loopback,
through the sandbox's tunnel (never a port opened on the host). This is how a Burrow
control plane's e2b backend serves previews from a sandbox host.

The exchange itself is the preview proxy's (`burrow.preview.upstream` for HTTP/1.1 over
tunnels, `burrow.preview.websocket` for the WebSocket relay); this module adds the
sandbox host's routing and strips its credentials, which a service must never see.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.types import Receive, Scope, Send

from burrow.preview import headers
from burrow.preview.upstream import UpstreamError, UpstreamPool
from burrow.preview.websocket import UpstreamRefused, relay_websocket
from burrow.sandbox.backend import ErrorCode, HttpUpstream, SandboxError
from burrow.sandbox_host.refusals import refuse
from burrow.sandbox_host.registry import HostedSandbox, Registry

CREDENTIALS = frozenset(
    {b"x-access-token", b"e2b-traffic-access-token", b"e2b-sandbox-id", b"e2b-sandbox-port"}
)
MAX_PORT = 65535


class PortProxy:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._pool = UpstreamPool(self._open_upstream)

    async def _open_upstream(self, sandbox_id: str, port: int) -> HttpUpstream:
        hosted = self.registry.find(sandbox_id)
        if hosted is None or hosted.state != "running":
            raise SandboxError(ErrorCode.UNAVAILABLE, f"The sandbox {sandbox_id} was not found")
        return await hosted.sandbox.open_http(port)

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def __call__(
        self, hosted: HostedSandbox, port: int, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if not 0 < port <= MAX_PORT:
            await _answer(scope, send, 400, f"Port {port} is not a TCP port.")
            return
        host = hosted.upstream_host(port)
        upstream, framed = headers.upstream_headers(scope, host, "http")
        forwarded = [(name, value) for name, value in upstream if name not in CREDENTIALS]
        if scope["type"] == "websocket":
            await self._websocket(hosted, port, scope, receive, send, forwarded, host)
        else:
            await self._http(hosted, port, scope, receive, send, forwarded, framed)

    async def _http(
        self,
        hosted: HostedSandbox,
        port: int,
        scope: Scope,
        receive: Receive,
        send: Send,
        forwarded: list[tuple[bytes, bytes]],
        framed: bool,
    ) -> None:
        try:
            response = await self._pool.request(
                (hosted.sandbox_id, port),
                scope["method"].encode(),
                headers.target(scope),
                forwarded,
                _body(receive) if framed else None,
            )
        except SandboxError as exc:
            await _answer(scope, send, 502, _why(exc, port))
            return
        except UpstreamError as exc:
            await _answer(scope, send, 502, f"The service on port {port} broke off: {exc}")
            return
        await response.relay(send)

    async def _websocket(
        self,
        hosted: HostedSandbox,
        port: int,
        scope: Scope,
        receive: Receive,
        send: Send,
        forwarded: list[tuple[bytes, bytes]],
        host: str,
    ) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        try:
            stream = await hosted.sandbox.open_tunnel(port)
        except SandboxError:
            await send({"type": "websocket.close", "code": 1011})
            return
        own = [(n, v) for n, v in forwarded if n not in headers.WEBSOCKET_OWN]
        url = f"ws://{host}{headers.target(scope).decode('latin-1')}"
        try:
            await relay_websocket(scope, receive, send, stream, url, own)
        except (UpstreamRefused, OSError):
            await send({"type": "websocket.close", "code": 1011})
        finally:
            stream[1].close()


async def _body(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise UpstreamError("the client went away while sending the body")
        if message.get("body"):
            yield message["body"]
        if not message.get("more_body", False):
            return


def _why(exc: SandboxError, port: int) -> str:
    if exc.code == ErrorCode.CONNECTION_REFUSED:
        # The SDK recognises these words (SandboxUnreachableException's case).
        return f"The sandbox is running but port is not open: nothing listens on {port}."
    return exc.message


async def _answer(scope: Scope, send: Send, status: int, message: str) -> None:
    await refuse(scope, send, status, message, close_code=1011)  # 1011: the service failed
