"""Free TCP ports on 127.0.0.1 for a child server that must be told its port before it binds.

Asking the kernel (bind to port 0, read the port, close) is not enough, for two reasons a
test run met: two asks in a row may return the same port — one CI run started a server
whose API and preview listeners were both given 48435, and it died on its second bind — and
a port from the kernel's ephemeral range is also what it hands to outgoing connections, so
another process may take it between the probe and the child's bind. So a port here is
chosen at random below the ephemeral range, is free when probed, and is never handed out
twice by this process.
"""

from __future__ import annotations

import functools
import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000  # below this sit well-known services (PostgreSQL, Redis, dev servers)
_TRIES_BELOW = 1_000  # random tries below the ephemeral range before the kernel chooses
_handed_out: set[int] = set()
_lock = threading.Lock()


@functools.cache
def _ephemeral_low() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def _candidates() -> Iterator[int]:
    """Random ports below the ephemeral range, then (a host whose range starts low, or a
    crowded one) the kernel's own choices."""
    high = _ephemeral_low() - 1
    if high > _LOWEST:
        for _ in range(_TRIES_BELOW):
            yield random.randint(_LOWEST, high)
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        yield port  # closed first: it is probed again


def _free_now(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port nothing listens on now, outside the ephemeral range, new to this process."""
    with _lock:
        port = next(p for p in _candidates() if p not in _handed_out and _free_now(p))
        _handed_out.add(port)
        return port
