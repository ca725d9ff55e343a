"""Connections still sending a request head (burrow/api/listener.py): a slow head times out
with a 408, one address holds only so many, and a thousand of them leave `/api/health`
answering. Real `burrow serve` processes at the usual soft open-file limit (1,024); the
slow clients come from other loopback addresses (127.0.0.2, ...) than the health check."""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.harness import serve_process

HEAD_SECONDS = 8  # long enough that a loaded machine checks the caps well before it
PER_ADDRESS = 100
HEADS = 1030  # past the usual soft limit: before the fix they shut everyone out
SETTINGS = {
    "BURROW_HEAD_TIMEOUT_SECONDS": str(HEAD_SECONDS),
    "BURROW_MAX_PENDING_CONNECTIONS_PER_ADDRESS": str(PER_ADDRESS),
}


def _usual_soft_limit() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 4096:
        pytest.skip(f"the test itself needs more than {HEADS} descriptors (ulimit -Hn {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        with serve_process(tmp_path, "demo", SETTINGS, preexec_fn=_usual_soft_limit) as (_, base):
            yield base
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def slow_head(base: str, source: str) -> socket.socket:
    """A connection from `source` that sent part of a request head, and no more."""
    host, port = base.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=5, source_address=(source, 0))
    with contextlib.suppress(OSError):  # refused at once (over a cap): seen by `answer`
        conn.sendall(b"GET /api/health HTTP/1.1\r\nHost: burrow\r\nX-Slow: ")
    return conn


def answer(conn: socket.socket, within: float) -> bytes | None:
    """What the server sent before closing, b"" for a bare close, None if still open."""
    conn.settimeout(within)
    seen = b""
    try:
        while chunk := conn.recv(4096):
            seen += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return seen


def test_a_thousand_slow_heads_leave_health_answering_and_time_out(server: str) -> None:
    with contextlib.ExitStack() as held:
        started = time.monotonic()
        # 94 from each of 11 addresses: under the per-address cap, over the soft limit.
        heads = [
            held.enter_context(slow_head(server, f"127.0.0.{2 + i % 11}")) for i in range(HEADS)
        ]
        health = httpx.get(f"{server}/api/health", timeout=5)
        assert health.status_code == 200 and health.json()["status"] == "ok"
        # Each slow head is answered 408 and closed once its time is up.
        deadline = started + HEAD_SECONDS + 5
        answers = [answer(conn, max(deadline - time.monotonic(), 0.1)) for conn in heads]
        still_open = sum(a is None for a in answers)
        assert still_open == 0, f"{still_open} slow heads still open after {HEAD_SECONDS + 5} s"
        assert all(a.startswith(b"HTTP/1.1 408") for a in answers if a), answers[0]


def test_one_address_holds_only_so_many_unsent_heads(server: str) -> None:
    with contextlib.ExitStack() as held:
        heads = [held.enter_context(slow_head(server, "127.0.0.2")) for _ in range(PER_ADDRESS)]
        over = [held.enter_context(slow_head(server, "127.0.0.2")) for _ in range(10)]
        # The ones over the cap are closed once they turn slow (a second), those within stay.
        assert all(answer(conn, 3) == b"" for conn in over)
        assert all(answer(conn, 0.01) is None for conn in heads)
        # Other addresses are not held up by it.
        assert answer(held.enter_context(slow_head(server, "127.0.0.3")), 0.5) is None
        assert httpx.get(f"{server}/api/health", timeout=5).status_code == 200


def test_a_burst_of_fast_clients_from_one_address_is_not_capped(server: str) -> None:
    """Accepted all at once, before any head is read: none of them is slow."""
    host, port = server.removeprefix("http://").split(":")
    with contextlib.ExitStack() as held:
        burst = [
            held.enter_context(socket.create_connection((host, int(port)), timeout=5))
            for _ in range(3 * PER_ADDRESS)
        ]
        for conn in burst:
            conn.sendall(b"GET /api/health HTTP/1.1\r\nHost: burrow\r\nConnection: close\r\n\r\n")
        answers = [answer(conn, 10) for conn in burst]
        assert all(a and a.startswith(b"HTTP/1.1 200") for a in answers), answers
