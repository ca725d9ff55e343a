"""Ports other than envd's: HTTP and WebSocket to the sandbox's own loopback."""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

from burrow.sandbox_host.registry import HostedSandbox


class PortProxy:
    async def __call__(
        self, hosted: HostedSandbox, port: int, scope: Scope, receive: Receive, send: Send
    ) -> None:
        raise NotImplementedError
