"""E2B's create-time network options (`network` and `allow_internet_access`), read into
what this host does with a sandbox, or refused: an option the host cannot honour is a 400
naming it, never ignored, so a client that asks to be locked down is, or is told.

What is honoured:
- `denyOut` with `0.0.0.0/0` (the SDK's ALL_TRAFFIC), or `allow_internet_access: false`:
  no network at all (loopback only).
- `allowOut` host names (and `*.domain`) beside a deny-all: egress only to those names,
  through the host's allowlisting HTTP(S) proxy, and only to what the host's own
  BURROW_SANDBOX_ALLOW_DOMAINS admits too (a client narrows, never widens). `allowOut`
  with nothing denied allows what was allowed anyway, as in E2B.
- `allowPublicTraffic: true`: the sandbox's ports (not envd) answer without the traffic
  token; false, or left out, they need it (the host's default, stricter than E2B's).
- `maskRequestHost`: the Host header a service in the sandbox sees, `${PORT}` filled in.

Refused: deny or allow by address or CIDR range (the sandbox's egress is filtered by name,
or not at all), `dnsServers` (the sandbox resolves no names itself: the proxy does),
`egressProxy`, `rules` and `httpsPorts`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from burrow.sandbox.allowlist import DomainAllowlist
from burrow.sandbox.backend import NetworkPolicy

ALL_TRAFFIC = "0.0.0.0/0"
MAX_ENTRIES = 100
MAX_MASK_CHARS = 253
# A host name with an optional port, where `${PORT}` may stand for a label's part or the port.
_LABEL = r"(?:[A-Za-z0-9-]|\$\{PORT\})+"
_MASK = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*(?::(?:[0-9]+|\$\{{PORT\}}))?$")
_REFUSED = {
    "dnsServers": "the sandbox resolves no names itself here (the host's proxy does): "
    "leave dnsServers out",
    "egressProxy": "this host sends no egress through a proxy of yours: leave egressProxy out",
    "rules": "this host rewrites no requests: leave rules out",
    "httpsPorts": "this host serves the sandbox's ports over its own scheme: leave httpsPorts out",
}
_KNOWN = {"allowOut", "denyOut", "allowPublicTraffic", "maskRequestHost", *_REFUSED}


class NetworkRefused(ValueError):
    """A network option this host cannot honour; the message says which and what to do."""


@dataclass(frozen=True)
class SandboxNetwork:
    policy: NetworkPolicy | None = None  # None: the host's default
    allow_domains: tuple[str, ...] | None = None  # egress only to these names
    public_traffic: bool = False  # ports answer without the traffic token
    host_mask: str | None = None  # the Host a service sees; "${PORT}" is the port


def allowlist_of(names: Sequence[str] | None) -> DomainAllowlist | None:
    """The allowlist of names read_network passed (None: no list of its own)."""
    return None if names is None else DomainAllowlist.parse(",".join(names))


def read_network(body: dict[str, Any]) -> SandboxNetwork:
    """The create body's network options; raises NetworkRefused."""
    closed = body.get("allow_internet_access") is False
    options = body.get("network")
    if options is None:
        return SandboxNetwork(policy="none" if closed else None)
    if not isinstance(options, dict):
        raise NetworkRefused("network must be an object (E2B's SandboxNetworkConfig).")
    unknown = sorted(set(options) - _KNOWN)
    if unknown:
        raise NetworkRefused(
            f"network.{unknown[0]} is not an option this host knows: it takes "
            f"{', '.join(sorted(_KNOWN))}."
        )
    for name, why in _REFUSED.items():
        if options.get(name) not in (None, [], {}):
            raise NetworkRefused(f"network.{name} is not supported: {why}.")
    deny = _entries(options, "denyOut")
    allow = _entries(options, "allowOut")
    denied_all = ALL_TRAFFIC in deny
    if not denied_all and deny:
        raise NetworkRefused(
            f"network.denyOut {deny[0]!r}: this host denies all outbound traffic "
            f"({ALL_TRAFFIC}) or none, not one address or range; deny {ALL_TRAFFIC} and "
            "allowOut the host names the sandbox may reach."
        )
    allowed: tuple[str, ...] | None = None
    if denied_all and allow and not closed:
        for entry in allow:
            if _is_address(entry):
                raise NetworkRefused(
                    f"network.allowOut {entry!r}: this host allows egress by host name, "
                    "through its HTTP(S) proxy, not by address or range; name the host."
                )
        try:
            allowed = tuple(DomainAllowlist.parse(",".join(allow)).entries())
        except ValueError:
            bad = next(e for e in allow if not _parses(e))
            raise NetworkRefused(
                f"network.allowOut {bad!r} is not a host name or a *.domain wildcard."
            ) from None
    policy: NetworkPolicy | None = None
    if closed or (denied_all and not allowed):
        policy = "none"
    elif allowed:
        policy = "egress"
    public = options.get("allowPublicTraffic")
    if public is not None and not isinstance(public, bool):
        raise NetworkRefused("network.allowPublicTraffic must be true or false.")
    return SandboxNetwork(
        policy=policy,
        allow_domains=allowed if policy == "egress" else None,
        public_traffic=public is True,
        host_mask=_mask(options.get("maskRequestHost")),
    )


def _entries(options: dict[str, Any], name: str) -> list[str]:
    value = options.get(name)
    if value is None:
        return []
    if (
        not isinstance(value, list)
        or len(value) > MAX_ENTRIES
        or not all(isinstance(v, str) and 0 < len(v) <= 253 for v in value)
    ):
        raise NetworkRefused(
            f"network.{name} must be a list of at most {MAX_ENTRIES} addresses, ranges or "
            "host names."
        )
    return [v.strip() for v in value]


def _is_address(entry: str) -> bool:
    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False
    return True


def _parses(entry: str) -> bool:
    try:
        DomainAllowlist.parse(entry)
    except ValueError:
        return False
    return True


def _mask(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_MASK_CHARS or not _MASK.match(value):
        raise NetworkRefused(
            "network.maskRequestHost must be a host name, with an optional :port, where "
            "${PORT} stands for the sandbox's port (e.g. ${PORT}-myapp.example.com)."
        )
    return value
