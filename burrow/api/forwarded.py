"""Forwarding headers (`X-Forwarded-For`, `-Proto`, `-Host`), believed only from the reverse
proxies named in `BURROW_TRUSTED_PROXIES`.

Anyone can send these headers. Believed from any peer, they let a client pick the address
the login throttle counts against and the host the CSRF guard compares Origin with. So this
middleware is the one place that reads them: for a trusted peer it rewrites the ASGI scope
(client address, scheme, Host) to what the proxy saw; from any other peer it removes them.
Everything after it reads only `scope["client"]`, `scope["scheme"]` and the Host header.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

FORWARD_FOR = b"x-forwarded-for"
FORWARD_PROTO = b"x-forwarded-proto"
FORWARD_HOST = b"x-forwarded-host"
FORWARDING = frozenset({FORWARD_FOR, FORWARD_PROTO, FORWARD_HOST})


class TrustedProxies:
    """Addresses and networks whose forwarding headers are believed."""

    def __init__(self, networks: Iterable[Network] = ()) -> None:
        self.networks = tuple(networks)

    @classmethod
    def parse(cls, text: str) -> TrustedProxies:
        """`BURROW_TRUSTED_PROXIES`: comma-separated addresses or networks, e.g.
        `127.0.0.1, 10.0.0.0/8`; empty: none."""
        networks = []
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(
                    f"BURROW_TRUSTED_PROXIES: {item!r} is not an IP address or network; "
                    "list your reverse proxies' addresses, e.g. 127.0.0.1,10.0.0.0/8"
                ) from None
        return cls(networks)

    def trusts(self, host: str) -> bool:
        if not self.networks:
            return False
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self.networks)


class ForwardedHeaders:
    """ASGI middleware: apply a trusted proxy's forwarding headers, drop anyone else's."""

    def __init__(self, app: ASGIApp, proxies: TrustedProxies) -> None:
        self.app = app
        self.proxies = proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = self.rewrite(scope)
        await self.app(scope, receive, send)

    def rewrite(self, scope: Scope) -> Scope:
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        forwarded: dict[bytes, list[str]] = {}
        kept = []
        for name, value in headers:
            if name in FORWARDING:
                values = value.decode("latin-1").split(",")
                forwarded.setdefault(name, []).extend(v.strip() for v in values if v.strip())
            else:
                kept.append((name, value))
        if not forwarded:
            return scope
        scope = dict(scope)
        scope["headers"] = kept
        peer = scope.get("client")
        if peer is None or not self.proxies.trusts(peer[0]):
            return scope
        if FORWARD_FOR in forwarded:
            scope["client"] = (self._client(forwarded[FORWARD_FOR]), 0)
        # A proxy that appends rather than replaces puts its own value last.
        proto = forwarded.get(FORWARD_PROTO, [""])[-1].lower()
        if proto in ("http", "https"):
            secure = proto == "https"
            if scope["type"] == "websocket":
                scope["scheme"] = "wss" if secure else "ws"
            else:
                scope["scheme"] = proto
        if FORWARD_HOST in forwarded:
            host = forwarded[FORWARD_HOST][-1].encode("latin-1")
            scope["headers"] = [(n, v) for n, v in kept if n != b"host"] + [(b"host", host)]
        return scope

    def _client(self, chain: list[str]) -> str:
        """The nearest address in the chain that is not one of our proxies: what is to its
        left was written by the client itself and proves nothing."""
        for address in reversed(chain):
            if not self.proxies.trusts(address):
                return address
        return chain[0]
