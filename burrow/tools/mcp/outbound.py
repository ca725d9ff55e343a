"""Which URLs the server may reach for an MCP server over HTTP, checked where it connects.

An HTTP MCP server is reached from the host, so its address is the host's to guard: a URL
from mcp.json reaches public addresses only. An address off the public internet (loopback,
private and link-local ranges, this host's own addresses) is reached only when the URL
matches an entry of `BURROW_MCP_ALLOW_URLS`, an administrator's explicit choice. The check
runs on the address the name resolved to, at the moment of connecting, and the connection
goes to exactly that address: a name that later resolves elsewhere (DNS rebinding) cannot
slip through (outbound_client.py makes the connections). Redirects leave the origin never
(the SDK's own rule). A URL with a dot
segment (`..` or `.`, also percent-encoded) in its path is refused outright: the client
would resolve it away after the prefix matched, e.g. `/mcp/../admin` under `/mcp/`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from urllib.parse import unquote, urlsplit

from burrow.sandbox.network import host_addresses

# `.` or `..` as a whole path segment; `/` and `\\` both separate (some servers take either).
_DOT_SEGMENT = re.compile(r"(?:^|[/\\])\.{1,2}(?:[/\\]|$)")


class UrlRefused(Exception):
    """The URL (or the address it resolves to) is not one the server may reach."""


class UrlPolicy:
    def __init__(
        self,
        allowed: Sequence[str] = (),
        own_ports: Iterable[int] = (),
        setting: str = "BURROW_MCP_ALLOW_URLS",  # named in refusals: where to list a URL
    ) -> None:
        self.setting = setting
        self.allowed = [a.strip() for a in allowed if a.strip()]
        self.own_ports = set(own_ports)  # Burrow's own listeners: never without an entry
        self._own_addresses: set[str] | None = None

    def explicitly_allowed(self, url: str) -> bool:
        if has_dot_segment(url):
            return False  # what the client sends is not the text that matched
        return any(_matches(url, entry) for entry in self.allowed)

    def check_url(self, url: str) -> None:
        """Refuse what is wrong before resolving: the scheme, dot segments, Burrow's port."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UrlRefused(f"{url} is not an http(s) address")
        if has_dot_segment(url):
            raise UrlRefused(
                f"{url} has a '.' or '..' segment in its path: write the path without them"
            )
        if self.explicitly_allowed(url):
            return
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if port in self.own_ports:
            raise UrlRefused(
                f"{url} is on Burrow's own port {port}; list it in {self.setting} to allow it"
            )

    def check_address(self, url: str, address: str) -> None:
        """Refuse a resolved address off the public internet unless the URL is listed."""
        if self.explicitly_allowed(url):
            return
        ip = ipaddress.ip_address(address.split("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped  # judged as the IPv4 address it reaches
        if not ip.is_global or ip.is_multicast or str(ip) in self._own():
            raise UrlRefused(
                f"{urlsplit(url).hostname} resolves to {ip}, which is not a public address; "
                f"an administrator can allow it by listing the URL in {self.setting}"
            )

    def _own(self) -> set[str]:
        if self._own_addresses is None:
            self._own_addresses = set(host_addresses())
        return self._own_addresses


def has_dot_segment(url: str) -> bool:
    """Whether the path of `url` holds a `.` or `..` segment, also percent-encoded (`%2e`,
    twice-encoded `%252e`): clients and servers resolve those away after any check."""
    path = urlsplit(url).path
    for _ in range(4):
        if _DOT_SEGMENT.search(path):
            return True
        decoded = unquote(path)
        if decoded == path:
            return False
        path = decoded
    return True  # still encoded after three rounds: no honest URL looks like that


def _matches(url: str, entry: str) -> bool:
    """`url` starts with `entry` at a boundary (`http://a:1/mcp` does not match `http://a:10`)."""
    if not url.startswith(entry):
        return False
    rest = url[len(entry) :]
    return entry.endswith("/") or rest == "" or rest[0] in "/?#"
