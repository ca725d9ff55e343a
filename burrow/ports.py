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

import random
import socket
import threading
from pathlib import Path

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000  # below this sit well-known services (PostgreSQL, Redis, dev servers)
_handed_out: set[int] = set()
_lock = threading.Lock()


def _ephemeral_low() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def _free_now(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port nothing listens on now, outside the ephemeral range, new to this process."""
    high = _ephemeral_low() - 1
    with _lock:
        for _ in range(1_000):
            port = random.randint(_LOWEST, high) if high > _LOWEST else 0
            if port and port not in _handed_out and _free_now(port):
                _handed_out.add(port)
                return port
        # A host whose ephemeral range starts low (or is crowded): fall back to the kernel's
        # choice, still never the same port twice.
        while True:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = int(probe.getsockname()[1])
            if port not in _handed_out:
                _handed_out.add(port)
                return port
