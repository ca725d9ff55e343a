"""Preview addresses: `{port}-{cid}.<domain>`, one origin per service (DESIGN.md §5).

Beside the configuration, below every layer: the preview proxy routes by them and the
runtime hands them to the `preview` tool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from burrow.config import Settings

DEFAULT_DOMAIN = "preview.localhost"
_LABEL = re.compile(r"([1-9][0-9]{0,4})-([a-z0-9][a-z0-9_]{0,62})")


@dataclass(frozen=True)
class PreviewAddress:
    port: int
    cid: str


class PreviewHosts:
    """Formats preview URLs and routes a request's Host header back to (port, cid)."""

    def __init__(self, domain: str, *, scheme: str = "http", public_port: int | None = None):
        self.domain = domain.lower().strip(".")
        self.scheme = scheme
        self.public_port = public_port  # None: the scheme's default port
        self._suffix = "." + self.domain

    @classmethod
    def from_settings(cls, settings: Settings) -> PreviewHosts:
        configured = settings.preview_domain
        if not configured:
            return cls(DEFAULT_DOMAIN, public_port=settings.preview_listen_port())
        if "://" not in configured:
            return cls(configured, scheme="https")
        parts = urlsplit(configured)
        return cls(parts.hostname or DEFAULT_DOMAIN, scheme=parts.scheme, public_port=parts.port)

    def host(self, cid: str, port: int) -> str:
        netloc = f"{port}-{cid}{self._suffix}"
        return netloc if self.public_port is None else f"{netloc}:{self.public_port}"

    def url(self, cid: str, port: int) -> str:
        return f"{self.scheme}://{self.host(cid, port)}/"

    def origin(self, cid: str, port: int) -> str:
        return f"{self.scheme}://{self.host(cid, port)}"

    def parse(self, host: str) -> PreviewAddress | None:
        """The preview a Host header names, or None (any other host, any port suffix)."""
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        name = name.lower()
        if not name.endswith(self._suffix):
            return None
        match = _LABEL.fullmatch(name[: -len(self._suffix)])
        if match is None:
            return None
        port = int(match.group(1))
        return PreviewAddress(port, match.group(2)) if port < 65536 else None
